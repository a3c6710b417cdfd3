// The kvroute filter's plugin configuration, protocol 1: exactly these fields, with these
// types. Every artifact that embeds it (envoy.yaml, the Istio and Envoy Gateway resources)
// is checked against this, so a renamed or missing field fails the tests.

type Check = (v: unknown) => boolean;
const str: Check = (v) => typeof v === "string" && v.length > 0;
const positiveInt: Check = (v) => Number.isInteger(v) && (v as number) > 0;
const path: Check = (v) => typeof v === "string" && /^\/[^\s?#]*$/.test(v);

const CONTROL_PLANE: Record<string, Check> = {
  cluster: str,
  authority: (v) => typeof v === "string" && /^[A-Za-z0-9.-]+:\d{1,5}$/.test(v),
  syncPath: path,
  reportPath: path,
  // The control plane requires at least 16 characters (authToken).
  token: (v) => typeof v === "string" && v.length >= 16,
  timeoutMs: positiveInt,
};

const TOP: Record<string, Check> = {
  controlPlane: (v) => v !== null && typeof v === "object" && !Array.isArray(v),
  tickMs: positiveInt,
  // filter/core/plugin-config.ts MAX_BODY_BYTES: 64 MiB.
  maxBodyBytes: (v) => positiveInt(v) && (v as number) <= 64 * 1024 * 1024,
  failMode: (v) => v === "open" || v === "closed",
  inferencePaths: (v) => Array.isArray(v) && v.length > 0 && v.every(path),
};

function checkFields(obj: Record<string, unknown>, spec: Record<string, Check>, at: string): string[] {
  const problems: string[] = [];
  for (const key of Object.keys(obj)) if (!(key in spec)) problems.push(`${at}.${key}: unknown field`);
  for (const [key, check] of Object.entries(spec)) {
    if (!(key in obj)) problems.push(`${at}.${key}: missing`);
    else if (!check(obj[key])) problems.push(`${at}.${key}: bad value ${JSON.stringify(obj[key])}`);
  }
  return problems;
}

/** Problems of one plugin configuration; `at` is where it sits in its file. */
export function pluginConfigProblems(config: unknown, at: string): string[] {
  if (config instanceof Error) return [`${at}: not JSON (${config.message})`];
  if (config === null || typeof config !== "object" || Array.isArray(config)) return [`${at}: not an object`];
  const obj = config as Record<string, unknown>;
  const problems = checkFields(obj, TOP, at);
  if (TOP.controlPlane?.(obj.controlPlane))
    problems.push(
      ...checkFields(obj.controlPlane as Record<string, unknown>, CONTROL_PLANE, `${at}.controlPlane`),
    );
  return problems;
}
