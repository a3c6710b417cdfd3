// HTTPRoute (the fields deploy/gaie uses), checked against kubernetes-sigs/gateway-api v1.6.1 apis/v1/httproute_types.go
// and shared_types.go: parentRefs, rules with matches (path type and value), backendRefs (group,
// kind, name, namespace, port, weight), timeouts; the other rule fields are named, not modeled.
import { int32, list, object, oneOf, string, unmodeled } from "./build.ts";
import { group, kind, namespace, objectName, sectionName } from "./gateway-api.ts";
import { portNumber } from "./inference-pool.ts";

const parentReference = object({ group, kind, namespace, name: objectName, sectionName, port: portNumber }, [
  "name",
]);

const backendRef = object(
  {
    group,
    kind,
    name: objectName,
    namespace,
    port: portNumber,
    weight: int32({ minimum: 0, maximum: 1000000 }),
    filters: unmodeled("array"),
  },
  ["name"],
);

const httpRouteMatch = object({
  path: object({
    type: oneOf("Exact", "PathPrefix", "RegularExpression"),
    value: string({ maxLength: 1024 }),
  }),
  headers: unmodeled("array"),
  queryParams: unmodeled("array"),
  method: oneOf("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"),
});

const duration = string({ pattern: "^([0-9]{1,5}(h|m|s|ms)){1,4}$" });

export const httpRouteSpec = object({
  parentRefs: list(parentReference, { maxItems: 32 }),
  hostnames: list(string({ minLength: 1, maxLength: 253 }), { maxItems: 16 }),
  rules: list(
    object({
      name: sectionName,
      matches: list(httpRouteMatch, { maxItems: 64 }),
      filters: unmodeled("array"),
      backendRefs: list(backendRef, { maxItems: 16 }),
      timeouts: object({ request: duration, backendRequest: duration }),
      retry: unmodeled("object"),
      sessionPersistence: unmodeled("object"),
    }),
    { maxItems: 16 },
  ),
});
