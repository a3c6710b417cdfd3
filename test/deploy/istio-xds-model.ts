// What istiod does with kvroute's EnvoyFilters on an ingress gateway, modelled from istio/istio
// 1.29.2 closely enough to check which generated resource each patch lands on:
//   - model.BuildSubsetKey / ParseSubsetKey: an outbound cluster is named outbound|<port>|<subset>|<host>.
//   - cluster_traffic_policy.go: a Service's cluster is EDS over ADS with lb_policy LEAST_REQUEST
//     (the default) and an empty common_lb_config (locality_weighted_lb_config only with
//     localityLbSetting distribute/failover or ENABLE_LOCALITY_WEIGHTED_LB_CONFIG).
//   - envoyfilter/cluster_patch.go: clusterMatch (name exact; else subset, service and portNumber
//     against the parsed name), ApplyClusterMerge (merge.Merge), InsertedClusters (ADD).
//   - envoyfilter/listener_patch.go listenerMatch: portNumber against the listener's socket port;
//     HTTP_FILTER INSERT_BEFORE lands before the named sub-filter of the named network filter.
//   - route/route.go translateRoute: a VirtualService HTTP route without matches is prefix "/" to
//     its destination's cluster, with its timeout (also max_grpc_timeout; "0s" when unset) and
//     retry/retry.go's default retry policy when it sets no retries.
//   - pkg/proto/merge: Go proto merge — set scalars overwrite, messages merge field by field, lists
//     append, maps merge, a Duration is replaced; a proto3 zero value is not "set" and so never
//     overwrites. In JSON: false, 0 and "" do not overwrite. Oneofs are not modelled.
// Only the patch forms kvroute ships are understood; any other throws.

type Obj = Record<string, unknown>;
type Patch = { applyTo: string; match?: Obj; patch: { operation: string; value?: unknown } };

const HCM = "envoy.filters.network.http_connection_manager";

export function outboundClusterName(host: string, port: number, subset = ""): string {
  return `outbound|${port}|${subset}|${host}`;
}

function parseSubsetKey(name: string): { direction: string; subset: string; host: string; port: number } {
  const [direction = "", port = "", subset = "", host = ""] = name.split("|");
  return { direction, subset, host, port: Number(port) };
}

/** A Service port's cluster on the gateway, before EnvoyFilters. */
export function generatedServiceCluster(host: string, port: number): Obj {
  const name = outboundClusterName(host, port);
  return {
    name,
    type: "EDS",
    eds_cluster_config: {
      service_name: name,
      eds_config: { ads: {}, initial_fetch_timeout: "0s", resource_api_version: "V3" },
    },
    connect_timeout: "10s",
    lb_policy: "LEAST_REQUEST",
    common_lb_config: {},
    circuit_breakers: {
      thresholds: [
        { max_connections: 4294967295, max_pending_requests: 4294967295, max_requests: 4294967295 },
      ],
    },
  };
}

/** The EDS answer for a Service port's cluster: its ready pods' ip:port, in one locality here. */
export function serviceEndpoints(clusterName: string, addresses: string[]): Obj {
  return {
    cluster_name: clusterName,
    endpoints: [
      {
        locality: { region: "region-a", zone: "zone-a" },
        lb_endpoints: addresses.map((a) => {
          const at = a.lastIndexOf(":");
          const socket = { address: a.slice(0, at), port_value: Number(a.slice(at + 1)) };
          return { endpoint: { address: { socket_address: socket } }, load_balancing_weight: 1 };
        }),
        load_balancing_weight: addresses.length,
      },
    ],
  };
}

/** A VirtualService HTTP route (one destination, no matches, no retries set) as istiod writes it. */
export function generatedVirtualServiceRoute(http: Obj): Obj {
  const route = http.route as Array<{ destination: { host: string; port: { number: number } } }>;
  if (http.match !== undefined || http.retries !== undefined || route.length !== 1)
    throw new Error("only a single-destination HTTP route without matches or retries is modelled");
  const { host, port } = (route[0] as (typeof route)[number]).destination;
  const timeout = (http.timeout as string | undefined) ?? "0s";
  return {
    ...(http.name === undefined ? {} : { name: http.name }),
    match: { prefix: "/" },
    route: {
      cluster: outboundClusterName(host, port.number),
      timeout,
      max_grpc_timeout: timeout,
      retry_policy: {
        retry_on: "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes",
        num_retries: 2,
        retry_host_predicate: [
          {
            name: "envoy.retry_host_predicates.previous_hosts",
            typed_config: {
              "@type":
                "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate",
            },
          },
        ],
        host_selection_retry_max_attempts: 5,
      },
    },
    decorator: { operation: `${host}:${port.number}/*` },
  };
}

/** An ingress gateway listener for one port (istiod names it 0.0.0.0_<port>), router only. */
export function gatewayListener(port: number): Obj {
  return {
    name: `0.0.0.0_${port}`,
    address: { socket_address: { address: "0.0.0.0", port_value: port } },
    filter_chains: [
      {
        filters: [
          {
            name: HCM,
            typed_config: {
              "@type":
                "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
              stat_prefix: `outbound_0.0.0.0_${port}`,
              rds: {
                route_config_name: `http.${port}`,
                config_source: { ads: {}, resource_api_version: "V3" },
              },
              http_filters: [
                {
                  name: "envoy.filters.http.router",
                  typed_config: {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
                  },
                },
              ],
            },
          },
        ],
      },
    ],
  };
}

const isZero = (v: unknown) => v === false || v === 0 || v === "";

/** merge.Merge(dst, src) on the JSON forms; returns dst. */
export function protoMerge(dst: Obj, src: Obj): Obj {
  for (const [k, v] of Object.entries(src)) {
    const d = dst[k];
    if (Array.isArray(v)) dst[k] = [...((d as unknown[] | undefined) ?? []), ...structuredClone(v)];
    else if (v !== null && typeof v === "object") {
      if (d !== null && typeof d === "object" && !Array.isArray(d)) protoMerge(d as Obj, v as Obj);
      else dst[k] = structuredClone(v);
    } else if (!isZero(v)) dst[k] = v;
  }
  return dst;
}

function patchesOf(envoyFilters: Obj[], applyTo: string): Patch[] {
  return envoyFilters
    .flatMap((f) => ((f.spec as Obj).configPatches as Patch[]) ?? [])
    .filter((p) => p.applyTo === applyTo && ["GATEWAY", "ANY"].includes(String(p.match?.context ?? "ANY")));
}

export function clusterMatch(cluster: Obj, match: Obj | undefined): boolean {
  const m = match?.cluster as
    | { name?: string; service?: string; subset?: string; portNumber?: number }
    | undefined;
  if (m === undefined) return true;
  if (m.name !== undefined && m.name !== "") return m.name === cluster.name;
  const key = parseSubsetKey(String(cluster.name));
  if (m.subset && m.subset !== key.subset) return false;
  if (m.service && m.service !== key.host) return false;
  return !m.portNumber || m.portNumber === key.port;
}

/** The gateway's clusters after every CLUSTER patch of these EnvoyFilters (MERGE, then ADD). */
export function patchedClusters(clusters: Obj[], envoyFilters: Obj[]): Obj[] {
  const patches = patchesOf(envoyFilters, "CLUSTER");
  const out = clusters.map((c) => structuredClone(c));
  for (const c of out)
    for (const p of patches.filter((p) => p.patch.operation === "MERGE"))
      if (clusterMatch(c, p.match)) protoMerge(c, p.patch.value as Obj);
  for (const p of patches) {
    if (p.patch.operation === "ADD") out.push(structuredClone(p.patch.value as Obj));
    else if (p.patch.operation !== "MERGE") throw new Error(`CLUSTER ${p.patch.operation} is not modelled`);
  }
  return out;
}

export function listenerMatch(listener: Obj, match: Obj | undefined): boolean {
  const m = match?.listener as { name?: string; portNumber?: number } | undefined;
  if (m === undefined) return true;
  if (m.name && m.name !== listener.name) return false;
  const port = ((listener.address as Obj).socket_address as Obj).port_value;
  return !m.portNumber || m.portNumber === port;
}

/** A listener after every LISTENER MERGE and HTTP_FILTER INSERT_BEFORE patch of these EnvoyFilters. */
export function patchedListener(listener: Obj, envoyFilters: Obj[]): Obj {
  const out = structuredClone(listener);
  for (const p of patchesOf(envoyFilters, "LISTENER")) {
    if (p.patch.operation !== "MERGE") throw new Error(`LISTENER ${p.patch.operation} is not modelled`);
    if (listenerMatch(out, p.match)) protoMerge(out, p.patch.value as Obj);
  }
  for (const p of patchesOf(envoyFilters, "HTTP_FILTER")) {
    if (p.patch.operation !== "INSERT_BEFORE")
      throw new Error(`HTTP_FILTER ${p.patch.operation} is not modelled`);
    if (!listenerMatch(out, p.match)) continue;
    const chainMatch = ((p.match?.listener as Obj | undefined)?.filterChain as Obj | undefined)?.filter as
      | { name?: string; subFilter?: { name?: string } }
      | undefined;
    for (const chain of out.filter_chains as Obj[])
      for (const f of chain.filters as Obj[]) {
        if (chainMatch?.name !== undefined && f.name !== chainMatch.name) continue;
        const filters = (f.typed_config as Obj).http_filters as Obj[];
        const at = filters.findIndex((h) => h.name === chainMatch?.subFilter?.name);
        if (at >= 0) filters.splice(at, 0, structuredClone(p.patch.value as Obj));
      }
  }
  return out;
}
