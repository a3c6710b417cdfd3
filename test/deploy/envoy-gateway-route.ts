// What Envoy Gateway makes of an HTTPRoute rule with kvroute's BackendTrafficPolicy and an
// operator's authorization on it, modelled from envoyproxy/gateway v1.9.0:
//   - internal/gatewayapi/helpers.go irRouteDestinationName: one cluster per rule,
//     httproute/<ns>/<name>/rule/<idx>; every backendRef of the rule is a locality of it
//     (irDestinationSettingName <cluster>/backend/<i>, the locality's region in its EDS).
//   - internal/xds/translator/cluster.go buildXdsCluster: an EDS cluster over ADS; with a
//     loadBalancer.endpointOverride, buildEndpointOverrideLoadBalancingPolicy sets
//     load_balancing_policy to override_host (one header source per extractFrom entry) whose
//     fallback is the policy of the BTP's type (LeastRequest when none), and clears
//     common_lb_config's locality_config_specifier.
//   - internal/xds/translator/route.go: a rule without matches gets prefix "/", its route action
//     the rule's cluster; wasm.go enables each Wasm filter on the route with an empty FilterConfig;
//     authorization.go (SecurityPolicy) adds an RBAC filter to the HCM without rules and the
//     route's own RBACPerRoute under envoy.filters.http.rbac.
// Simplification: Envoy Gateway writes a SecurityPolicy's rules as an RBAC `matcher` tree; the
// Node host reads the equivalent `rules` form only, so callers pass rules (same per-route lookup).

type Obj = Record<string, unknown>;

const LB = "envoy.load_balancing_policies";
const LB_TYPE = "type.googleapis.com/envoy.extensions.load_balancing_policies";

/** The fallback of buildEndpointOverrideLoadBalancingPolicy for a BTP loadBalancer.type. */
const FALLBACK: Record<string, [string, string]> = {
  LeastRequest: ["least_request", "least_request.v3.LeastRequest"],
  RoundRobin: ["round_robin", "round_robin.v3.RoundRobin"],
  Random: ["random", "random.v3.Random"],
  ConsistentHash: ["maglev", "maglev.v3.Maglev"],
};

export const RBAC_FILTER = "envoy.filters.http.rbac";

export function ruleClusterName(route: Obj, ruleIndex: number): string {
  const meta = route.metadata as { namespace: string; name: string };
  return `httproute/${meta.namespace}/${meta.name}/rule/${ruleIndex}`;
}

/** cluster.load_balancing_policy for a BTP's loadBalancer with endpointOverride. */
export function endpointOverridePolicy(loadBalancer: Obj): Obj {
  const override = loadBalancer.endpointOverride as { extractFrom: Array<{ header?: string }> } | undefined;
  if (override === undefined) throw new Error("no endpointOverride: not the override_host translation");
  const fallback = FALLBACK[String(loadBalancer.type ?? "LeastRequest")];
  if (fallback === undefined) throw new Error(`fallback for ${String(loadBalancer.type)} is not modelled`);
  return {
    policies: [
      {
        typed_extension_config: {
          name: `${LB}.override_host`,
          typed_config: {
            "@type": `${LB_TYPE}.override_host.v3.OverrideHost`,
            override_host_sources: override.extractFrom.map((s) =>
              s.header === undefined ? {} : { header: s.header },
            ),
            fallback_policy: {
              policies: [
                {
                  typed_extension_config: {
                    name: `${LB}.${fallback[0]}`,
                    typed_config: { "@type": `${LB_TYPE}.${fallback[1]}` },
                  },
                },
              ],
            },
          },
        },
      },
    ],
  };
}

/** The rule's EDS cluster as generated with the BTP's loadBalancer. */
export function generatedRuleCluster(route: Obj, ruleIndex: number, btp: Obj): Obj {
  const name = ruleClusterName(route, ruleIndex);
  return {
    name,
    type: "EDS",
    eds_cluster_config: { service_name: name, eds_config: { ads: {}, resource_api_version: "V3" } },
    connect_timeout: "10s",
    dns_lookup_family: "V4_PREFERRED",
    per_connection_buffer_limit_bytes: 32768,
    common_lb_config: {},
    ignore_health_on_host_removal: true,
    circuit_breakers: { thresholds: [{ max_retries: 1024 }] },
    load_balancing_policy: endpointOverridePolicy((btp.spec as Obj).loadBalancer as Obj),
  };
}

/** The rule's ClusterLoadAssignment: one locality per backendRef, holding that backend's endpoints. */
export function generatedLoadAssignment(clusterName: string, backends: string[][]): Obj {
  return {
    cluster_name: clusterName,
    endpoints: backends.map((addresses, i) => ({
      locality: { region: `${clusterName}/backend/${i}` },
      load_balancing_weight: 1,
      lb_endpoints: addresses.map((a) => {
        const at = a.lastIndexOf(":");
        return {
          endpoint: {
            address: { socket_address: { address: a.slice(0, at), port_value: Number(a.slice(at + 1)) } },
          },
          load_balancing_weight: 1,
        };
      }),
    })),
  };
}

/** The xDS route of a rule without matches, with its Wasm filters enabled and its RBACPerRoute. */
export function generatedRuleRoute(
  route: Obj,
  ruleIndex: number,
  wasmFilterNames: string[],
  rbac?: Obj,
): Obj {
  const cluster = ruleClusterName(route, ruleIndex);
  const perFilter: Obj = {};
  for (const name of wasmFilterNames)
    perFilter[name] = { "@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig", config: {} };
  if (rbac !== undefined)
    perFilter[RBAC_FILTER] = {
      "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute",
      rbac,
    };
  return {
    name: `${cluster}/match/0/*`,
    match: { prefix: "/" },
    route: { cluster, upgrade_configs: [{ upgrade_type: "websocket" }] },
    typed_per_filter_config: perFilter,
  };
}

/** The HCM's RBAC filter a SecurityPolicy authorization adds: no rules, the route's config decides. */
export function generatedRbacFilter(): Obj {
  return {
    name: RBAC_FILTER,
    typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC" },
  };
}
