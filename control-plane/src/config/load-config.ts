// Reads the YAML configuration, applies environment overrides and validates it. Every error
// names the path of the bad field, so an operator can fix the file without reading code.
import { readFileSync } from "node:fs";
import { parseDocument } from "yaml";
import type { z } from "zod";
import { type Config, configSchema } from "./schema.ts";

export class ConfigError extends Error {
  constructor(
    readonly source: string,
    readonly problems: string[],
  ) {
    super(`invalid configuration ${source}:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
}

/** Environment variables that override fields (secrets stay out of ConfigMaps). */
const envOverrides: Array<[env: string, apply: (raw: Record<string, unknown>, value: string) => void]> = [
  ["KVROUTE_AUTH_TOKEN", (raw, v) => (raw.authToken = v)],
  ["KVROUTE_LISTEN", (raw, v) => (raw.listen = v)],
  ["KVROUTE_LOG_LEVEL", (raw, v) => (raw.logLevel = v)],
];

function formatPath(path: PropertyKey[]): string {
  if (path.length === 0) return "(top level)";
  return path
    .map((p, i) => (typeof p === "number" ? `[${p}]` : `${i === 0 ? "" : "."}${String(p)}`))
    .join("");
}

function formatIssues(error: z.ZodError): string[] {
  return error.issues.map((issue) => {
    const where = formatPath(issue.path);
    if (issue.code === "unrecognized_keys") return `${where}: unknown field(s) ${issue.keys.join(", ")}`;
    return `${where}: ${issue.message}`;
  });
}

/** Validates an already-parsed object (tests, embedded defaults) with the environment applied. */
export function parseConfig(raw: unknown, source = "(inline)", env: NodeJS.ProcessEnv = process.env): Config {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new ConfigError(source, ["(top level): expected a mapping of configuration fields"]);
  }
  const withEnv = structuredClone(raw) as Record<string, unknown>;
  // An empty secret usually means a missing one (a Secret key left blank): refused rather than
  // read as "no token", which would leave /v1/sync and /v1/report open.
  if (env.KVROUTE_AUTH_TOKEN === "") {
    throw new ConfigError(source, [
      "KVROUTE_AUTH_TOKEN: set but empty (unset it to run without a token, only for local use)",
    ]);
  }
  for (const [name, apply] of envOverrides) {
    const value = env[name];
    if (value !== undefined && value !== "") apply(withEnv, value);
  }
  const result = configSchema.safeParse(withEnv);
  if (!result.success) throw new ConfigError(source, formatIssues(result.error));
  return result.data;
}

export function parseConfigYaml(
  text: string,
  source = "(inline)",
  env: NodeJS.ProcessEnv = process.env,
): Config {
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      source,
      doc.errors.map((e) => `line ${e.linePos?.[0].line ?? "?"}: ${e.message.split("\n")[0]}`),
    );
  }
  return parseConfig(doc.toJS(), source, env);
}

export function loadConfigFile(path: string, env: NodeJS.ProcessEnv = process.env): Config {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError(path, [`cannot read the file: ${(err as Error).message}`]);
  }
  return parseConfigYaml(text, path, env);
}
