// The operator's route policies as Envoy Gateway generates them, applied to envoy/envoy.yaml's
// shape for the route-policy tests of the Node host (route-policies.test.ts) and of a real Envoy
// (envoy.test.ts): an RBAC and a local rate limit filter AFTER the Wasm filter (Envoy Gateway's
// order, internal/xds/translator/httpfilters.go) with empty listener-level configs and the rules
// in the route's typed_per_filter_config, and the route's timeout. twoRouteShape is the shape the
// artifacts had before: a first, header-matched route to an ORIGINAL_DST cluster.
type Json = Record<string, unknown>;
type Routes = { name: string; typed_per_filter_config?: Json; route: Json }[];

const RBAC = "envoy.filters.http.rbac";
const RATE_LIMIT = "envoy.filters.http.local_ratelimit";
export const TRUSTED = { "x-client": "trusted" };

export function routesOf(cfg: Json): Routes {
  const listener = (cfg.static_resources as { listeners: Json[] }).listeners[0] as Json;
  const hcm = (((listener.filter_chains as Json[])[0] as Json).filters as Json[])[0]?.typed_config as Json;
  return ((hcm.route_config as Json).virtual_hosts as Json[])[0]?.routes as Routes;
}

export function filtersOf(cfg: Json): Json[] {
  const listener = (cfg.static_resources as { listeners: Json[] }).listeners[0] as Json;
  const hcm = (((listener.filter_chains as Json[])[0] as Json).filters as Json[])[0]?.typed_config as Json;
  return hcm.http_filters as Json[];
}

/** Envoy Gateway's shape of a SecurityPolicy / BackendTrafficPolicy on the route. */
export function withPolicies(o: { rateLimit?: number; timeout?: string }) {
  return (cfg: Json) => {
    const filters = filtersOf(cfg);
    const router = filters.findIndex((f) => f.name === "envoy.filters.http.router");
    filters.splice(
      router,
      0,
      {
        name: RBAC,
        typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC" },
      },
      {
        name: RATE_LIMIT,
        typed_config: {
          "@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
          stat_prefix: "http_local_rate_limiter",
        },
      },
    );
    const route = routesOf(cfg).find((r) => r.name === "inference") as Routes[number];
    route.typed_per_filter_config = {
      [RBAC]: {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute",
        rbac: {
          rules: {
            action: "ALLOW",
            policies: {
              trusted: {
                permissions: [{ any: true }],
                principals: [{ header: { name: "x-client", string_match: { exact: "trusted" } } }],
              },
            },
          },
        },
      },
      ...(o.rateLimit === undefined
        ? {}
        : {
            [RATE_LIMIT]: {
              "@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
              stat_prefix: "http_local_rate_limiter",
              token_bucket: { max_tokens: o.rateLimit, tokens_per_fill: o.rateLimit, fill_interval: "3600s" },
              filter_enabled: { default_value: { numerator: 100, denominator: "HUNDRED" } },
              filter_enforced: { default_value: { numerator: 100, denominator: "HUNDRED" } },
            },
          }),
    };
    if (o.timeout !== undefined) route.route.timeout = o.timeout;
  };
}

/** The artifacts' shape before: a first route for requests with a destination, to ORIGINAL_DST. */
export function twoRouteShape(cfg: Json): void {
  (cfg.static_resources as { clusters: Json[] }).clusters.push({
    name: "kvroute_original_dst",
    type: "ORIGINAL_DST",
    lb_policy: "CLUSTER_PROVIDED",
    original_dst_lb_config: { use_http_header: true, http_header_name: "x-gateway-destination-endpoint" },
  });
  routesOf(cfg).unshift({
    name: "kvroute-destination",
    match: { prefix: "/", headers: [{ name: "x-gateway-destination-endpoint", present_match: true }] },
    route: { cluster: "kvroute_original_dst", timeout: "0s" },
  } as Routes[number]);
}
