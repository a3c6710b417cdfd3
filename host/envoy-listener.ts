// Reads what the Node gateway needs from an Envoy bootstrap (the shipped envoy/envoy.yaml, or a
// test's variant of it): the first listener's route table with each route's cluster, timeout and
// typed_per_filter_config; the static clusters, with override_host load balancing or ORIGINAL_DST;
// and the HTTP filters after the Wasm filter that the host models (policy-filters.ts). So the
// gateway that stands for Envoy in the demo and the tests routes by the same file Envoy loads.
// A piece the host does not model is an error naming it, never silently dropped.
import type { PolicyFilter } from "./policy-filters.ts";
import { durationMs, policyFilterFromEnvoy } from "./policy-filters.ts";
import { ENVOY_DEFAULT_ROUTE_TIMEOUT_MS, type HeaderMatch, type RouteEntry } from "./routes.ts";
import type { ClusterEndpoint, ClusterSpec } from "./upstream-cluster.ts";

type Json = Record<string, unknown>;

export interface ListenerRouting {
  /** Headers the connection manager's early header mutation removes, before routing and every filter. */
  earlyRemoveHeaders: string[];
  routes: RouteEntry[];
  clusters: Record<string, ClusterSpec>;
  policyFilters: PolicyFilter[];
}

const OVERRIDE_HOST = "envoy.load_balancing_policies.override_host";
const WASM_TYPE = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm";
const ROUTER = "envoy.filters.http.router";
/** Route match fields the host models; any other path specifier is refused. */
const MODELLED_MATCH = new Set(["prefix", "path", "headers"]);

function notModelled(what: string): never {
  throw new Error(`${what} is not modelled by the Node host`);
}

/** The first listener's HTTP connection manager config. */
export function connectionManagerOf(bootstrap: Json): { listener: Json; hcm: Json } {
  const listener = (bootstrap.static_resources as { listeners: Json[] }).listeners[0] as Json;
  const chain = (listener.filter_chains as Json[])[0] as Json;
  return { listener, hcm: ((chain.filters as Json[])[0] as Json).typed_config as Json };
}

function routeOf(r: Json, at: string): RouteEntry {
  const match = (r.match as Json | undefined) ?? {};
  for (const k of Object.keys(match)) if (!MODELLED_MATCH.has(k)) notModelled(`${at}: match.${k}`);
  const action = r.route as Json | undefined;
  if (action === undefined || typeof action.cluster !== "string")
    throw new Error(`${at}: only route actions with a single cluster are modelled`);
  const headers: HeaderMatch[] = ((match.headers as Json[] | undefined) ?? []).map((h) => ({
    name: h.name as string,
    present: h.present_match as boolean | undefined,
    exact:
      ((h.string_match as Json | undefined)?.exact as string | undefined) ??
      (h.exact_match as string | undefined),
  }));
  return {
    name: (r.name as string | undefined) ?? at,
    match: { prefix: match.prefix as string | undefined, path: match.path as string | undefined, headers },
    cluster: action.cluster,
    timeoutMs: action.timeout === undefined ? ENVOY_DEFAULT_ROUTE_TIMEOUT_MS : durationMs(action.timeout),
    perFilterConfig: (r.typed_per_filter_config as Record<string, unknown> | undefined) ?? {},
  };
}

function endpointsOf(c: Json): ClusterEndpoint[] {
  const la = c.load_assignment as { endpoints?: Json[] } | undefined;
  return (la?.endpoints ?? []).flatMap((locality) =>
    ((locality.lb_endpoints as Json[] | undefined) ?? []).map((e) => {
      const sa = ((e.endpoint as Json).address as Json).socket_address as Json;
      return {
        address: { host: sa.address as string, port: sa.port_value as number },
        priority: (locality.priority as number | undefined) ?? 0,
      };
    }),
  );
}

function clusterOf(c: Json): ClusterSpec {
  const name = c.name as string;
  if (c.type === "ORIGINAL_DST") {
    const cfg = c.original_dst_lb_config as Json | undefined;
    if (cfg?.use_http_header !== true)
      throw new Error(`cluster ${name}: ORIGINAL_DST without use_http_header is not modelled`);
    return {
      endpoints: [],
      originalDstHeader: (cfg.http_header_name as string | undefined) ?? "x-envoy-original-dst-host",
    };
  }
  const spec: ClusterSpec = { endpoints: endpointsOf(c) };
  const policies = ((c.load_balancing_policy as Json | undefined)?.policies as Json[] | undefined) ?? [];
  const first = policies[0]?.typed_extension_config as Json | undefined;
  if (first?.name === OVERRIDE_HOST) {
    const sources = ((first.typed_config as Json).override_host_sources as Json[] | undefined) ?? [];
    const header = sources.find((s) => typeof s.header === "string")?.header as string | undefined;
    if (header === undefined || sources.length !== 1)
      throw new Error(`cluster ${name}: override_host is modelled with exactly one header source`);
    spec.overrideHostHeader = header;
  }
  return spec;
}

/** The routing of the bootstrap's first listener, as Node gateway options (gateway.ts). */
export function listenerRouting(bootstrap: Json): ListenerRouting {
  const { hcm } = connectionManagerOf(bootstrap);
  const earlyRemoveHeaders = earlyRemovals(hcm.early_header_mutation_extensions as Json[] | undefined);
  const vhosts = ((hcm.route_config as Json).virtual_hosts as Json[] | undefined) ?? [];
  if (vhosts.length !== 1)
    throw new Error(`the Node host models one virtual host, the config has ${vhosts.length}`);
  const vhost = vhosts[0] as Json;
  const routes = ((vhost.routes as Json[] | undefined) ?? []).map((r, i) =>
    routeOf(r, `${vhost.name}/routes[${i}]`),
  );
  const clusters: Record<string, ClusterSpec> = {};
  for (const c of (bootstrap.static_resources as { clusters: Json[] }).clusters)
    clusters[c.name as string] = clusterOf(c);
  const filters = hcm.http_filters as Json[];
  // By type, not name: Envoy Gateway names its filter envoy.filters.http.wasm/<policy IR name>.
  const wasmAt = filters.findIndex((f) => (f.typed_config as Json | undefined)?.["@type"] === WASM_TYPE);
  const policyFilters: PolicyFilter[] = [];
  for (const f of filters.slice(wasmAt + 1)) {
    if (f.name === ROUTER) break;
    if (f.disabled === true) notModelled(`HTTP filter ${f.name}: disabled (enabled per route)`);
    const pf = policyFilterFromEnvoy(f.name as string, f.typed_config as Json);
    if (pf === null) notModelled(`HTTP filter ${f.name} after the Wasm filter`);
    policyFilters.push(pf);
    for (const r of routes) checkPerRoute(f.name as string, r.perFilterConfig[f.name as string]);
  }
  return { earlyRemoveHeaders, routes, clusters, policyFilters };
}

const EARLY_HEADER_MUTATION =
  "type.googleapis.com/envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation";

/** early_header_mutation_extensions (Envoy Gateway's earlyRequestHeaders): removals are modelled. */
function earlyRemovals(extensions: Json[] | undefined): string[] {
  const out: string[] = [];
  for (const e of extensions ?? []) {
    const cfg = e.typed_config as Json;
    if (cfg["@type"] !== EARLY_HEADER_MUTATION) notModelled(`early header mutation ${e.name}`);
    for (const m of (cfg.mutations as Json[] | undefined) ?? []) {
      if (typeof m.remove !== "string") notModelled(`early header mutation ${JSON.stringify(m)}`);
      out.push(m.remove);
    }
  }
  return out;
}

/** RBAC's matcher trees (what Envoy Gateway v1.9 writes for a SecurityPolicy) are refused, not passed. */
function checkPerRoute(filter: string, config: unknown): void {
  const c = config as Json | undefined;
  const wrapped = (c?.config as Json | undefined) ?? c;
  for (const rbac of [c, wrapped, wrapped?.rbac as Json | undefined])
    if (rbac?.matcher !== undefined || rbac?.shadow_matcher !== undefined)
      notModelled(`${filter}: an RBAC matcher (rules are)`);
}
