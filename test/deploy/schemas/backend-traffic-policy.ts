// BackendTrafficPolicy spec, checked against envoyproxy/gateway v1.9.0 api/v1alpha1/backendtrafficpolicy_types.go, shared_types.go (ClusterSettings) and loadbalancer_types.go.
// In depth: loadBalancer (every field, endpointOverride included: kvroute's routing rides on it);
// by name and type: every other field of the spec and of the inlined ClusterSettings. Bounds and
// enums follow the generated CRD (charts/gateway-helm/charts/crds/crds/generated). CEL rules left
// out: the target-reference combination, type naming the sub-config that is set, slowStart only
// for some types, endpointOverride not with DynamicModule.

import {
  anyJson,
  boolean,
  int32,
  int64,
  list,
  object,
  oneOf,
  string,
  stringMap,
  unmodeled,
} from "./build.ts";
import { policyTargetReferences } from "./gateway-api.ts";

/** Gateway API's Duration (GEP-2257). */
const duration = string({ pattern: "^([0-9]{1,5}(h|m|s|ms)){1,4}$" });
const named = object({ name: string() }, ["name"]);

const consistentHash = object(
  {
    type: oneOf("SourceIP", "Header", "Headers", "Cookie", "QueryParams"),
    header: named,
    headers: list(named),
    cookie: object({ name: string(), ttl: duration, attributes: stringMap }, ["name"]),
    queryParams: list(named),
    tableSize: int64({ minimum: 2, maximum: 5000011 }),
  },
  ["type"],
);

const backendUtilization = object({
  blackoutPeriod: duration,
  weightExpirationPeriod: duration,
  weightUpdatePeriod: duration,
  errorUtilizationPenaltyPercent: int32({ minimum: 0 }),
  metricNamesForComputingUtilization: list(string()),
  keepResponseHeaders: boolean,
  outOfBand: object({
    reportingPeriod: duration,
    port: int32({ minimum: 1, maximum: 65535 }),
    authority: string({ minLength: 1, maxLength: 259, pattern: "^[^\\x00\\n\\r]*$" }),
  }),
});

/** Where Envoy's override_host reads the endpoint ("ip:port[,ip:port…]") from. */
const endpointOverride = object(
  { extractFrom: list(object({ header: string() }), { minItems: 1, maxItems: 10 }) },
  ["extractFrom"],
);

const zoneAware = object({
  preferLocal: object({
    force: object({ minEndpointsInZoneThreshold: int32() }),
    minEndpointsThreshold: int64(),
    percentageEnabled: int32({ minimum: 0, maximum: 100 }),
  }),
  weightedZones: list(object({ zone: string(), weight: int32() }, ["weight", "zone"]), {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["zone"],
  }),
});

export const loadBalancer = object(
  {
    type: oneOf(
      "ConsistentHash",
      "LeastRequest",
      "Random",
      "RoundRobin",
      "BackendUtilization",
      "DynamicModule",
    ),
    consistentHash,
    backendUtilization,
    dynamicModule: object(
      {
        name: string({ minLength: 1, maxLength: 253, pattern: "^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$" }),
        lbPolicyName: string({ minLength: 1, maxLength: 253 }),
        config: anyJson,
      },
      ["lbPolicyName", "name"],
    ),
    endpointOverride,
    slowStart: object({ window: duration }, ["window"]),
    zoneAware,
  },
  ["type"],
);

/** ClusterSettings, inlined into the spec. */
const clusterSettings = {
  loadBalancer,
  retry: unmodeled("object"),
  proxyProtocol: unmodeled("object"),
  tcpKeepalive: unmodeled("object"),
  healthCheck: unmodeled("object"),
  circuitBreaker: unmodeled("object"),
  timeout: unmodeled("object"),
  connection: unmodeled("object"),
  dns: unmodeled("object"),
  http2: unmodeled("object"),
};

export const backendTrafficPolicySpec = object({
  ...policyTargetReferences,
  ...clusterSettings,
  mergeType: string(),
  rateLimit: unmodeled("object"),
  bandwidthLimit: unmodeled("object"),
  faultInjection: unmodeled("object"),
  admissionControl: unmodeled("object"),
  useClientProtocol: boolean,
  compression: unmodeled("array"),
  compressor: unmodeled("array"),
  responseOverride: unmodeled("array"),
  httpUpgrade: unmodeled("array"),
  requestBuffer: unmodeled("object"),
  telemetry: unmodeled("object"),
  routingType: string(),
});
