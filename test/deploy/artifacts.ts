// Finds the pieces of the shipped artifacts that tests check: every YAML document under envoy/
// and deploy/, the Envoy configuration objects inside them (with the Envoy type each must be),
// and every embedded plugin configuration of the kvroute filter.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import protobuf from "protobufjs";
import { parseAllDocuments } from "yaml";
import { lookupType, validateEnvoy } from "./envoy-proto.ts";

export const REPO = new URL("../..", import.meta.url).pathname;

export type Doc = Record<string, unknown>;

export interface YamlFile {
  /** Repository-relative path, e.g. envoy/istio/envoyfilter.yaml. */
  file: string;
  docs: Doc[];
}

function yamlFilesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(REPO, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...yamlFilesUnder(path));
    else if (/\.ya?ml$/.test(entry.name)) out.push(path);
  }
  return out.sort();
}

/** Parses every document of a YAML text; YAML errors (duplicate keys included) throw with the file name. */
export function parseYaml(file: string, text: string): Doc[] {
  const docs = parseAllDocuments(text, { uniqueKeys: true });
  const list = Array.isArray(docs) ? docs : [docs];
  const errors = list.flatMap((d) => d.errors.map((e) => `${file}: ${e.message.split("\n")[0]}`));
  if (errors.length > 0) throw new Error(errors.join("\n"));
  return list.map((d) => d.toJS() as Doc).filter((d) => d !== null);
}

export function loadYamlFiles(dir: string): YamlFile[] {
  return yamlFilesUnder(dir).map((file) => ({
    file,
    docs: parseYaml(file, readFileSync(join(REPO, file), "utf8")),
  }));
}

export function readRepoFile(path: string): string {
  return readFileSync(join(REPO, path), "utf8");
}

export function relativeToRepo(path: string): string {
  return relative(REPO, path);
}

/** An Envoy configuration object inside an artifact, and the Envoy message type it must be. */
export interface EnvoyPiece {
  /** Path inside the YAML file: doc index, then fields, e.g. [0].spec.configPatches[2].patch.value */
  path: string;
  typeName: string;
  value: unknown;
}

/** Istio EnvoyFilter applyTo → the Envoy message a patch value must be. */
const ISTIO_APPLY_TO: Record<string, string> = {
  CLUSTER: "envoy.config.cluster.v3.Cluster",
  LISTENER: "envoy.config.listener.v3.Listener",
  FILTER_CHAIN: "envoy.config.listener.v3.FilterChain",
  NETWORK_FILTER: "envoy.config.listener.v3.Filter",
  HTTP_FILTER: "envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter",
  ROUTE_CONFIGURATION: "envoy.config.route.v3.RouteConfiguration",
  VIRTUAL_HOST: "envoy.config.route.v3.VirtualHost",
  HTTP_ROUTE: "envoy.config.route.v3.Route",
};

/**
 * The Envoy type at a JSON pointer inside a resource of type `rootType` (Envoy Gateway's
 * EnvoyPatchPolicy patches paths such as /virtual_hosts/0/routes/0), walking the protos.
 */
export function typeAtPointer(rootType: string, pointer: string): string {
  let type = lookupType(rootType);
  if (type === null) throw new Error(`unknown type ${rootType}`);
  let inList = false;
  for (const segment of pointer.split("/").slice(1)) {
    if (inList && (/^\d+$/.test(segment) || segment === "-")) {
      inList = false;
      continue;
    }
    const field: protobuf.Field | undefined = type.fields[segment];
    if (field === undefined)
      throw new Error(`${rootType}${pointer}: no field ${segment} in ${type.fullName}`);
    field.resolve();
    if (!(field.resolvedType instanceof protobuf.Type))
      throw new Error(`${rootType}${pointer}: ${segment} is not a message`);
    type = field.resolvedType;
    inList = field.repeated;
  }
  return type.fullName.replace(/^\./, "");
}

export function envoyPieces(file: YamlFile): EnvoyPiece[] {
  const pieces: EnvoyPiece[] = [];
  file.docs.forEach((doc, d) => {
    const spec = doc.spec as Record<string, unknown> | undefined;
    if (doc.kind === undefined && (doc.static_resources !== undefined || doc.admin !== undefined)) {
      pieces.push({ path: `[${d}]`, typeName: "envoy.config.bootstrap.v3.Bootstrap", value: doc });
    } else if (doc.kind === "EnvoyFilter") {
      ((spec?.configPatches ?? []) as Array<Record<string, unknown>>).forEach((p, i) => {
        const typeName = ISTIO_APPLY_TO[String(p.applyTo)];
        const value = (p.patch as Record<string, unknown> | undefined)?.value;
        if (typeName === undefined)
          throw new Error(
            `${file.file}: [${d}].spec.configPatches[${i}]: unsupported applyTo ${String(p.applyTo)}`,
          );
        if (value !== undefined)
          pieces.push({ path: `[${d}].spec.configPatches[${i}].patch.value`, typeName, value });
      });
    } else if (doc.kind === "EnvoyPatchPolicy") {
      ((spec?.jsonPatches ?? []) as Array<Record<string, unknown>>).forEach((p, i) => {
        const op = p.operation as { op: string; path: string; jsonPath?: string; value?: unknown };
        const rootType = String(p.type).replace(/^type\.googleapis\.com\//, "");
        // A jsonPath patch lands wherever the expression matches in the generated resource (inside
        // an Any here): envoy-artifacts.test.ts applies it to a model of that resource instead.
        if (op.value === undefined || op.jsonPath !== undefined) return;
        const typeName = op.path === "" ? rootType : typeAtPointer(rootType, op.path);
        pieces.push({ path: `[${d}].spec.jsonPatches[${i}].operation.value`, typeName, value: op.value });
      });
    }
  });
  return pieces;
}

/** Every problem of every Envoy piece of a file, as `file: path: message`. */
export function envoyProblems(file: YamlFile): string[] {
  return envoyPieces(file).flatMap((piece) =>
    validateEnvoy(piece.typeName, piece.value, piece.path).map((p) => `${file.file}: ${p}`),
  );
}

export interface PluginConfigSite {
  path: string;
  /** The parsed JSON, or the error that parsing it raised. */
  config: unknown;
}

const WASM_TYPE = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm";

function findWasmConfigs(node: unknown, path: string, out: PluginConfigSite[]): void {
  if (Array.isArray(node)) {
    node.forEach((n, i) => {
      findWasmConfigs(n, `${path}[${i}]`, out);
    });
    return;
  }
  if (node === null || typeof node !== "object") return;
  const obj = node as Record<string, unknown>;
  if (obj["@type"] === WASM_TYPE) {
    const configuration = (obj.config as Record<string, unknown> | undefined)?.configuration as
      | Record<string, unknown>
      | undefined;
    const at = `${path}.config.configuration.value`;
    try {
      out.push({ path: at, config: JSON.parse(String(configuration?.value)) });
    } catch (err) {
      out.push({ path: at, config: err });
    }
    return;
  }
  for (const [k, v] of Object.entries(obj)) findWasmConfigs(v, path === "" ? k : `${path}.${k}`, out);
}

/** Every kvroute plugin configuration in a file: Wasm filter configs, WasmPlugin, EnvoyExtensionPolicy. */
export function pluginConfigs(file: YamlFile): PluginConfigSite[] {
  const out: PluginConfigSite[] = [];
  file.docs.forEach((doc, d) => {
    const spec = doc.spec as Record<string, unknown> | undefined;
    if (doc.kind === "WasmPlugin") out.push({ path: `[${d}].spec.pluginConfig`, config: spec?.pluginConfig });
    else if (doc.kind === "EnvoyExtensionPolicy")
      ((spec?.wasm ?? []) as Array<Record<string, unknown>>).forEach((w, i) => {
        out.push({ path: `[${d}].spec.wasm[${i}].config`, config: w.config });
      });
    else findWasmConfigs(doc, `[${d}]`, out);
  });
  return out;
}
