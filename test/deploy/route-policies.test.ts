// The translated shape keeps the route's policies. For each gateway, what it generates from the
// artifacts for the route that serves the engines — Envoy Gateway for HTTPRoute llm with the
// BackendTrafficPolicy and a SecurityPolicy-style per-route RBAC (envoy-gateway-route.ts), Istio
// for the VirtualService after the EnvoyFilter MERGE on its cluster (istio-xds-model.ts) — is
// validated against Envoy's protos, put into a bootstrap, read by the Node host and asked:
//   - a request the filter routed (it wrote x-gateway-destination-endpoint, which re-picks the
//     route) takes the same route as one it did not route, and goes to the endpoint it named;
//   - a header naming an address outside the cluster stays inside it;
//   - the route's RBAC denies the clients it denies, routed or not.
// The same questions against the shape the artifacts had before (an added header-matched route)
// show what went wrong there: the routed request changed route and lost the route's policies.
import { describe, expect, it } from "vitest";
import { durationMs } from "../../host/policy-filters.ts";
import { DESTINATION_HEADER } from "../../host/routing.ts";
import { loadYamlFiles, type YamlFile } from "./artifacts.ts";
import {
  applyListenerPatches,
  earlyHeaderMutation,
  generatedListener,
  generatedWasmFilter,
} from "./envoy-gateway-model.ts";
import {
  generatedLoadAssignment,
  generatedRbacFilter,
  generatedRuleCluster,
  generatedRuleRoute,
} from "./envoy-gateway-route.ts";
import { validateEnvoy } from "./envoy-proto.ts";
import {
  gatewayListener,
  generatedServiceCluster,
  generatedVirtualServiceRoute,
  outboundClusterName,
  patchedClusters,
  patchedListener,
  serviceEndpoints,
} from "./istio-xds-model.ts";
import {
  bootstrapOf,
  hcmOf,
  nodeHostGateway,
  targetOf,
  withAddedDestinationRoute,
  withEndpoints,
} from "./route-check.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests walk parsed YAML whose shape they assert
type Obj = Record<string, any>;

const files = loadYamlFiles("envoy");
const byName = (file: string) => files.find((f) => f.file === file) as YamlFile;
const one = (file: string, kind: string, name?: string) =>
  byName(file).docs.find(
    (d) => d.kind === kind && (name === undefined || (d as Obj).metadata.name === name),
  ) as Obj;

/** The engines behind the route's cluster (three pods of the Service). */
const ENDPOINTS = ["10.0.1.11:8000", "10.0.1.12:8000", "10.0.1.13:8000"];
/** An address no engine has: the cloud metadata service. */
const OUTSIDE = "169.254.169.254:80";
/** The route admits clients from 10.0.0.0/8 (a SecurityPolicy authorization by client CIDR). */
const ALLOWED = "10.20.0.5";
const DENIED = ["192.0.2.7", "11.0.0.1"]; // the second: just past the /8
/** The request as the Wasm filter left it: unrouted, routed to an engine, routed outside the cluster. */
const HEADERS: Record<string, string>[] = [
  {},
  { [DESTINATION_HEADER]: ENDPOINTS[1] as string },
  { [DESTINATION_HEADER]: OUTSIDE },
];
const RBAC = {
  rules: {
    action: "ALLOW",
    policies: {
      "internal-clients": {
        permissions: [{ any: true }],
        principals: [{ remote_ip: { address_prefix: "10.0.0.0", prefix_len: 8 } }],
      },
    },
  },
};

const expectValid = (type: string, value: unknown) =>
  expect(validateEnvoy(`envoy.config.${type}`, value), type).toEqual([]);

/**
 * Envoy Gateway, HTTPS example: HTTPRoute llm with extension-policy.yaml's Wasm filter (patched by
 * the example's EnvoyPatchPolicy), backend-traffic-policy.yaml on its cluster,
 * client-traffic-policy.yaml's early header removal, and an RBAC per route after the Wasm filter.
 */
function envoyGatewayBootstrap(): Obj {
  const example = "envoy/envoy-gateway/examples/https.yaml";
  const eep = one("envoy/envoy-gateway/extension-policy.yaml", "EnvoyExtensionPolicy");
  const httpRoute = one(example, "HTTPRoute");
  const gateway = one(example, "Gateway");
  const [gwListener] = gateway.spec.listeners;
  const wasm: Obj = generatedWasmFilter(eep, 0);
  const listener = generatedListener(
    `${gateway.metadata.namespace}/${gateway.metadata.name}/${gwListener.name}`,
    [wasm],
    {
      https: { hostnames: [gwListener.hostname] },
      policyFilters: [generatedRbacFilter()],
      earlyHeaderMutation: earlyHeaderMutation(
        one("envoy/envoy-gateway/client-traffic-policy.yaml", "ClientTrafficPolicy"),
      ),
    },
  );
  expect(applyListenerPatches(listener, one(example, "EnvoyPatchPolicy"))).toBe(2);
  const btp = one("envoy/envoy-gateway/backend-traffic-policy.yaml", "BackendTrafficPolicy");
  const cluster: Obj = generatedRuleCluster(httpRoute, 0, btp);
  const endpoints = generatedLoadAssignment(cluster.name, [ENDPOINTS]);
  const route = generatedRuleRoute(httpRoute, 0, [wasm.name], RBAC);
  expectValid("listener.v3.Listener", listener);
  expectValid("cluster.v3.Cluster", cluster);
  expectValid("endpoint.v3.ClusterLoadAssignment", endpoints);
  expectValid("route.v3.Route", route);
  // Envoy Gateway's own filter name (envoy.filters.http.wasm/<IR name>): the host finds the Wasm
  // filter by its type.
  return bootstrapOf(structuredClone(hcmOf(listener)), [route], [withEndpoints(cluster, endpoints)]);
}

/**
 * Istio, HTTPS example: the VirtualService's route to the engines' cluster after envoyfilter.yaml's
 * cluster MERGE, the example's listener EnvoyFilter, and an operator's RBAC per route — Istio's own
 * AuthorizationPolicy is listener-wide, so the route-bound policy here is an RBAC filter inserted
 * after kvroute's with the route's config in typed_per_filter_config (an EnvoyFilter HTTP_ROUTE
 * MERGE), next to the route's own timeout and retries.
 */
function istioBootstrap(): Obj {
  const example = "envoy/istio/examples/https.yaml";
  const vs = one(example, "VirtualService");
  const [http] = vs.spec.http;
  const listenerFilter = one(example, "EnvoyFilter", "kvroute-listener");
  const port = listenerFilter.spec.configPatches[0].match.listener.portNumber;
  const operatorRbac = {
    spec: {
      configPatches: [
        {
          applyTo: "HTTP_FILTER",
          match: {
            context: "GATEWAY",
            listener: {
              portNumber: port,
              filterChain: {
                filter: {
                  name: "envoy.filters.network.http_connection_manager",
                  subFilter: { name: "envoy.filters.http.router" },
                },
              },
            },
          },
          patch: { operation: "INSERT_BEFORE", value: generatedRbacFilter() },
        },
      ],
    },
  };
  const filters = [
    one("envoy/istio/envoyfilter.yaml", "EnvoyFilter", "kvroute-clusters"),
    listenerFilter,
    operatorRbac,
  ];
  const { host, port: servicePort } = http.route[0].destination;
  const name = outboundClusterName(host, servicePort.number);
  const cluster = patchedClusters([generatedServiceCluster(host, servicePort.number)], filters).find(
    (c) => c.name === name,
  ) as Obj;
  const listener = patchedListener(gatewayListener(port), filters);
  const endpoints = serviceEndpoints(name, ENDPOINTS);
  const route = generatedVirtualServiceRoute(http);
  route.typed_per_filter_config = {
    "envoy.filters.http.rbac": {
      "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute",
      rbac: RBAC,
    },
  };
  expectValid("listener.v3.Listener", listener);
  expectValid("cluster.v3.Cluster", cluster);
  expectValid("endpoint.v3.ClusterLoadAssignment", endpoints);
  expectValid("route.v3.Route", route);
  return bootstrapOf(hcmOf(listener), [route], [withEndpoints(cluster, endpoints)]);
}

const SHAPES: Array<[string, () => Obj]> = [
  ["Envoy Gateway", envoyGatewayBootstrap],
  ["Istio", istioBootstrap],
];

describe("the translated shape keeps the route's policies", () => {
  for (const [gateway, bootstrapFor] of SHAPES) {
    it(`${gateway}: the bootstrap holding the translated route is valid Envoy configuration`, () => {
      expectValid("bootstrap.v3.Bootstrap", bootstrapFor());
    });

    it(`${gateway}: a routed request keeps the route and goes to the endpoint the filter named`, () => {
      const gw = nodeHostGateway(bootstrapFor());
      try {
        const unrouted = gw.send({}, ALLOWED);
        expect(unrouted.reply).toBeUndefined();
        expect(ENDPOINTS).toContain(targetOf(unrouted));
        for (const endpoint of ENDPOINTS) {
          const routed = gw.send({ [DESTINATION_HEADER]: endpoint }, ALLOWED);
          expect(routed.route, endpoint).toBe(unrouted.route);
          expect(routed.timeoutMs).toBe(unrouted.timeoutMs);
          expect(targetOf(routed)).toBe(endpoint);
        }
      } finally {
        gw.close();
      }
    });

    it(`${gateway}: a destination outside the cluster stays inside it`, () => {
      const gw = nodeHostGateway(bootstrapFor());
      try {
        const unrouted = gw.send({}, ALLOWED);
        for (const value of [OUTSIDE, "10.0.1.11:8001", "10.0.1.11", `${OUTSIDE},`]) {
          const r = gw.send({ [DESTINATION_HEADER]: value }, ALLOWED);
          expect(r.route, value).toBe(unrouted.route);
          expect(ENDPOINTS, value).toContain(targetOf(r));
        }
        // override_host reads a list: the first entry the cluster holds wins.
        const listed = gw.send({ [DESTINATION_HEADER]: `${OUTSIDE}, ${ENDPOINTS[2]}` }, ALLOWED);
        expect(targetOf(listed)).toBe(ENDPOINTS[2]);
      } finally {
        gw.close();
      }
    });

    it(`${gateway}: the route's RBAC denies the clients it denies, routed or not`, () => {
      const gw = nodeHostGateway(bootstrapFor());
      try {
        for (const header of HEADERS) {
          for (const client of DENIED) {
            const r = gw.send(header, client);
            expect(r.reply?.status, `${client} ${JSON.stringify(header)}`).toBe(403);
            expect(targetOf(r)).toBeNull();
          }
          expect(gw.send(header, ALLOWED).reply, JSON.stringify(header)).toBeUndefined();
        }
      } finally {
        gw.close();
      }
    });

    it(`${gateway}: the old shape — an added header-matched route — lost the route and its policies`, () => {
      const gw = nodeHostGateway(withAddedDestinationRoute(bootstrapFor()));
      try {
        const unrouted = gw.send({}, ALLOWED);
        const routed = gw.send({ [DESTINATION_HEADER]: ENDPOINTS[0] as string }, ALLOWED);
        expect(routed.route?.name).not.toBe(unrouted.route?.name);
        expect(routed.timeoutMs).not.toBe(unrouted.timeoutMs);
        // Denied without the header, let through with it; and sent wherever the header says.
        for (const client of DENIED) {
          expect(gw.send({}, client).reply?.status).toBe(403);
          expect(gw.send({ [DESTINATION_HEADER]: ENDPOINTS[0] as string }, client).reply).toBeUndefined();
        }
        expect(targetOf(gw.send({ [DESTINATION_HEADER]: OUTSIDE }, ALLOWED))).toBe(OUTSIDE);
      } finally {
        gw.close();
      }
    });
  }

  it("Istio: the route keeps the VirtualService's timeout, routed or not", () => {
    const [http] = one("envoy/istio/examples/https.yaml", "VirtualService").spec.http;
    const gw = nodeHostGateway(istioBootstrap());
    try {
      for (const header of HEADERS) expect(gw.send(header, ALLOWED).timeoutMs).toBe(durationMs(http.timeout));
    } finally {
      gw.close();
    }
  });
});
