// What happens to a request between the Wasm filter and the upstream connection: the route is
// picked from the headers as the filter left them (routes.ts), the policy filters after the Wasm
// filter run with that route's config (policy-filters.ts), and the route's cluster chooses a host
// (upstream-cluster.ts: plain balancing, override_host, or ORIGINAL_DST).
//
// Two shapes:
//   - a route table (what envoy/envoy.yaml configures, read by envoy-listener.ts);
//   - the older shorthand without one, for host tests: x-gateway-destination-endpoint present →
//     an ORIGINAL_DST pick from the header, else the default cluster; no timeout, no policies.
import type { HeaderMap } from "./header-map.ts";
import type { PolicyFilter, PolicyReply } from "./policy-filters.ts";
import { type RouteEntry, selectRoute } from "./routes.ts";
import { type HostChoice, UpstreamCluster } from "./upstream-cluster.ts";

export const DESTINATION_HEADER = "x-gateway-destination-endpoint";

export interface RoutedRequest {
  /** A local reply that ends the request (policy denial, no route, unknown cluster). */
  reply?: PolicyReply;
  route: RouteEntry | null;
  cluster: string;
  choice: HostChoice;
  /** The route's timeout (0: none). */
  timeoutMs: number;
}

export interface Routing {
  resolve(h: HeaderMap, remoteIp: string): RoutedRequest;
}

export interface RouteTableOptions {
  routes: RouteEntry[];
  clusters: ReadonlyMap<string, UpstreamCluster>;
  /** HTTP filters after the Wasm filter, in chain order. */
  policyFilters: PolicyFilter[];
}

export class RouteTableRouting implements Routing {
  constructor(private readonly o: RouteTableOptions) {
    for (const r of o.routes)
      if (!o.clusters.has(r.cluster))
        throw new Error(`route ${r.name} names cluster ${r.cluster}, which is not defined`);
  }

  resolve(h: HeaderMap, remoteIp: string): RoutedRequest {
    const route = selectRoute(this.o.routes, h);
    const none: HostChoice = { target: null };
    if (route === null)
      return {
        reply: { status: 404, body: "", details: "route_not_found" },
        route,
        cluster: "",
        choice: none,
        timeoutMs: 0,
      };
    for (const f of this.o.policyFilters) {
      const reply = f.decodeHeaders(h, route, { remoteIp });
      if (reply !== null) return { reply, route, cluster: route.cluster, choice: none, timeoutMs: 0 };
    }
    const cluster = this.o.clusters.get(route.cluster) as UpstreamCluster;
    return { route, cluster: route.cluster, choice: cluster.choose(h), timeoutMs: route.timeoutMs };
  }
}

export class ShorthandRouting implements Routing {
  /** The ORIGINAL_DST cluster the destination header picks from (upstream-cluster.ts). */
  private readonly originalDst = new UpstreamCluster("original_dst", {
    endpoints: [],
    originalDstHeader: DESTINATION_HEADER,
  });

  constructor(private readonly defaultCluster: { name: string; cluster: UpstreamCluster } | null) {}

  resolve(h: HeaderMap): RoutedRequest {
    if (h.get(DESTINATION_HEADER) !== undefined)
      return { route: null, cluster: "original_dst", choice: this.originalDst.choose(h), timeoutMs: 0 };
    return {
      route: null,
      cluster: this.defaultCluster?.name ?? "",
      choice: { target: this.defaultCluster?.cluster.pick() ?? null },
      timeoutMs: 0,
    };
  }
}
