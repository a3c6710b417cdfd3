// Runs a gateway's translated route, filters and cluster through the Node host — the product's
// reading of an Envoy bootstrap (host/envoy-listener.ts listenerRouting) and its request path
// (host/routing.ts RouteTableRouting: selectRoute, the policy filters after the Wasm filter with
// the picked route's config, then the route cluster's choose) — so a test asks what happens to a
// request, not what the YAML looks like.
import { listenerRouting } from "../../host/envoy-listener.ts";
import { HeaderMap } from "../../host/header-map.ts";
import { DESTINATION_HEADER, type RoutedRequest, RouteTableRouting } from "../../host/routing.ts";
import { UpstreamCluster } from "../../host/upstream-cluster.ts";

type Obj = Record<string, unknown>;

const HCM_TYPE =
  "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

/** An EDS cluster with its ClusterLoadAssignment inlined: what Envoy holds once EDS has answered. */
export function withEndpoints(cluster: Obj, loadAssignment: Obj): Obj {
  const { eds_cluster_config: _eds, ...rest } = cluster;
  return { ...rest, type: "STATIC", load_assignment: loadAssignment };
}

/**
 * A bootstrap with one static listener — the given HTTP connection manager's filters, its RDS
 * swapped for an inline route table of `routes` — and these static clusters.
 */
export function bootstrapOf(hcm: Obj, routes: Obj[], clusters: Obj[]): Obj {
  const { rds: _rds, ...inline } = hcm;
  return {
    static_resources: {
      listeners: [
        {
          name: "gateway",
          address: { socket_address: { address: "0.0.0.0", port_value: 10080 } },
          filter_chains: [
            {
              filters: [
                {
                  name: "envoy.filters.network.http_connection_manager",
                  typed_config: {
                    ...inline,
                    "@type": HCM_TYPE,
                    route_config: {
                      name: "gateway",
                      virtual_hosts: [{ name: "llm", domains: ["*"], routes }],
                    },
                  },
                },
              ],
            },
          ],
        },
      ],
      clusters,
    },
  };
}

/** The HTTP connection manager of a listener: default_filter_chain (HTTP) or filter_chains[0]. */
export function hcmOf(listener: Obj): Obj {
  const chain = (listener.default_filter_chain ?? (listener.filter_chains as Obj[])[0]) as Obj;
  return ((chain.filters as Obj[])[0] as Obj).typed_config as Obj;
}

export interface Gateway {
  /** A request as the filters after the Wasm filter and the router see it. */
  send(headers: Record<string, string>, remoteIp: string): RoutedRequest;
  close(): void;
}

/** The Node host's routing of a bootstrap. */
export function nodeHostGateway(bootstrap: Obj): Gateway {
  const routing = listenerRouting(bootstrap);
  const clusters = new Map(
    Object.entries(routing.clusters).map(([n, spec]) => [n, new UpstreamCluster(n, spec)]),
  );
  const table = new RouteTableRouting({
    routes: routing.routes,
    clusters,
    policyFilters: routing.policyFilters,
  });
  return {
    send: (headers, remoteIp) =>
      table.resolve(
        new HeaderMap([[":method", "POST"], [":path", "/v1/chat/completions"], ...Object.entries(headers)]),
        remoteIp,
      ),
    close: () => {
      for (const c of clusters.values()) c.close();
    },
  };
}

/** Where a request went: host:port, or null when nothing was chosen (a local reply). */
export const targetOf = (r: RoutedRequest): string | null =>
  r.choice.target === null ? null : `${r.choice.target.host}:${r.choice.target.port}`;

/**
 * The shape the artifacts had before 355893c: a first route for requests that carry the
 * destination header, to an ORIGINAL_DST cluster following it (the filter's header write re-picks
 * the route, so routed requests took this one).
 */
export function withAddedDestinationRoute(bootstrap: Obj): Obj {
  const out = structuredClone(bootstrap);
  const sr = out.static_resources as { listeners: Obj[]; clusters: Obj[] };
  sr.clusters.push({
    name: "kvroute_original_dst",
    type: "ORIGINAL_DST",
    lb_policy: "CLUSTER_PROVIDED",
    connect_timeout: "2s",
    original_dst_lb_config: { use_http_header: true, http_header_name: DESTINATION_HEADER },
  });
  const hcm = hcmOf(sr.listeners[0] as Obj);
  const vhost = ((hcm.route_config as Obj).virtual_hosts as Obj[])[0] as Obj;
  (vhost.routes as Obj[]).unshift({
    name: "kvroute-destination",
    match: { prefix: "/", headers: [{ name: DESTINATION_HEADER, present_match: true }] },
    route: { cluster: "kvroute_original_dst", timeout: "0s" },
  });
  return out;
}
