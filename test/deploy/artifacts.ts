// Finds the pieces of the shipped artifacts that tests check: every YAML document under envoy/
// and deploy/ (examples/ included), the Envoy configuration objects inside them (with the Envoy
// type each must be), every embedded plugin configuration of the kvroute filter, the clusters each
// file defines, and anything that adds routing or an ORIGINAL_DST cluster.
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

type Obj = Record<string, unknown>;

/** Every cluster a file defines, by name: Bootstrap static clusters, Istio CLUSTER ADD, Envoy Gateway whole-cluster adds. */
export function definedClusters(file: YamlFile): Map<string, Obj> {
  const out = new Map<string, Obj>();
  for (const doc of file.docs) {
    const spec = doc.spec as Obj | undefined;
    const add = (c: unknown) => out.set(String((c as Obj).name), c as Obj);
    if (doc.kind === undefined)
      for (const c of ((doc.static_resources as Obj | undefined)?.clusters as Obj[] | undefined) ?? [])
        add(c);
    if (doc.kind === "EnvoyFilter")
      for (const p of (spec?.configPatches ?? []) as Array<{ applyTo: string; patch: Obj }>)
        if (p.applyTo === "CLUSTER" && p.patch.operation === "ADD") add(p.patch.value);
    if (doc.kind === "EnvoyPatchPolicy")
      for (const p of (spec?.jsonPatches ?? []) as Array<{ type: string; operation: Obj }>)
        if (
          p.type.endsWith("envoy.config.cluster.v3.Cluster") &&
          p.operation.op === "add" &&
          p.operation.path === ""
        )
          add(p.operation.value);
  }
  return out;
}

const ROUTE_TYPES = [
  "envoy.config.route.v3.RouteConfiguration",
  "envoy.config.route.v3.VirtualHost",
  "envoy.config.route.v3.Route",
];

/**
 * Every place a file adds or edits routing: Istio patches on routes, virtual hosts or route
 * configurations, Envoy Gateway patches on a RouteConfiguration, any Envoy piece of a route type,
 * and every route of a Bootstrap beyond its first. Each as `file: path (what)`.
 */
export function routeEdits(file: YamlFile): string[] {
  const out: string[] = [];
  file.docs.forEach((doc, d) => {
    const spec = doc.spec as Obj | undefined;
    if (doc.kind === "EnvoyFilter")
      ((spec?.configPatches ?? []) as Obj[]).forEach((p, i) => {
        if (["HTTP_ROUTE", "VIRTUAL_HOST", "ROUTE_CONFIGURATION"].includes(String(p.applyTo)))
          out.push(`${file.file}: [${d}].spec.configPatches[${i}] (${String(p.applyTo)})`);
      });
    if (doc.kind === "EnvoyPatchPolicy")
      ((spec?.jsonPatches ?? []) as Obj[]).forEach((p, i) => {
        if (String(p.type).endsWith("RouteConfiguration"))
          out.push(`${file.file}: [${d}].spec.jsonPatches[${i}] (RouteConfiguration)`);
      });
  });
  for (const piece of envoyPieces(file))
    if (ROUTE_TYPES.includes(piece.typeName)) out.push(`${file.file}: ${piece.path} (${piece.typeName})`);
  return out;
}

/** Paths of every ORIGINAL_DST cluster (or original_dst_lb_config) anywhere in a file's documents. */
export function originalDstSites(file: YamlFile): string[] {
  const out: string[] = [];
  const walk = (node: unknown, path: string): void => {
    if (Array.isArray(node))
      node.forEach((n, i) => {
        walk(n, `${path}[${i}]`);
      });
    else if (node !== null && typeof node === "object")
      for (const [k, v] of Object.entries(node as Obj)) {
        if ((k === "type" && v === "ORIGINAL_DST") || k === "original_dst_lb_config")
          out.push(`${path}.${k}`);
        walk(v, `${path}.${k}`);
      }
  };
  file.docs.forEach((doc, d) => {
    walk(doc, `${file.file}: [${d}]`);
  });
  return out;
}

/**
 * A cluster's override_host policy: its header sources and its fallback policy's name; null when
 * the cluster's first load-balancing policy is another one (Envoy uses the first it supports).
 */
export function overrideHostPolicy(cluster: Obj): { headers: unknown[]; fallback: unknown } | null {
  const policies = (cluster.load_balancing_policy as { policies?: Obj[] } | undefined)?.policies ?? [];
  const first = policies[0]?.typed_extension_config as Obj | undefined;
  if (first?.name !== "envoy.load_balancing_policies.override_host") return null;
  const config = first.typed_config as { override_host_sources: Obj[]; fallback_policy: { policies: Obj[] } };
  return {
    headers: config.override_host_sources.map((s) => s.header),
    fallback: (config.fallback_policy.policies[0]?.typed_extension_config as Obj | undefined)?.name,
  };
}
