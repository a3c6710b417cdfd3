// Gateway (Gateway API) spec, checked against kubernetes-sigs/gateway-api v1.6.1 apis/v1/gateway_types.go.
// (The standard-channel CRD bundled in Envoy Gateway v1.9.0's charts/gateway-crds-helm gives the
// bounds.) In depth: gatewayClassName and listeners (name, hostname, port, protocol, tls,
// allowedRoutes); by name and type: addresses, infrastructure, tls, allowedListeners. CEL rules
// left out: tls required for HTTPS, unique hostname/port/protocol combinations.
import { int32, list, object, oneOf, string, stringMap, unmodeled } from "./build.ts";
import { group, kind, secretObjectReference, sectionName } from "./gateway-api.ts";

const hostname = string({
  minLength: 1,
  maxLength: 253,
  pattern: "^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
});

const listener = object(
  {
    name: sectionName,
    hostname,
    port: int32({ minimum: 1, maximum: 65535 }),
    protocol: string({
      minLength: 1,
      maxLength: 255,
      pattern:
        "^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\\/[A-Za-z0-9]+$",
    }),
    tls: object({
      mode: oneOf("Terminate", "Passthrough"),
      certificateRefs: list(secretObjectReference, { maxItems: 64 }),
      options: { ...stringMap, maxProperties: 16 },
    }),
    allowedRoutes: object({
      namespaces: object({ from: oneOf("All", "Selector", "Same"), selector: unmodeled("object") }),
      kinds: list(object({ group, kind }, ["kind"]), { maxItems: 8 }),
    }),
  },
  ["name", "port", "protocol"],
);

export const gatewaySpec = object(
  {
    gatewayClassName: string({ minLength: 1, maxLength: 253 }),
    listeners: list(listener, {
      minItems: 1,
      maxItems: 64,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["name"],
    }),
    addresses: unmodeled("array"),
    infrastructure: unmodeled("object"),
    tls: unmodeled("object"),
    allowedListeners: unmodeled("object"),
  },
  ["gatewayClassName", "listeners"],
);
