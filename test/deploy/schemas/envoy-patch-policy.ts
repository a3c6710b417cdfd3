// EnvoyPatchPolicy spec, checked against envoyproxy/gateway v1.9.0 api/v1alpha1/envoypatchpolicy_types.go.
// All of it. Unlike the other Envoy Gateway policies it takes one targetRef (a
// LocalPolicyTargetReference: no sectionName) and has no targetRefs or targetSelectors.

import { anyJson, int32, list, object, oneOf, string } from "./build.ts";
import { localPolicyTargetReference } from "./gateway-api.ts";

const operation = object(
  {
    op: oneOf("add", "remove", "replace", "move", "copy", "test"),
    path: string(),
    jsonPath: string(),
    from: string(),
    value: anyJson,
  },
  ["op"],
);

const jsonPatch = object(
  {
    type: oneOf(
      "type.googleapis.com/envoy.config.listener.v3.Listener",
      "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
      "type.googleapis.com/envoy.config.cluster.v3.Cluster",
      "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
      "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
    ),
    name: string(),
    operation,
  },
  ["type", "name", "operation"],
);

export const envoyPatchPolicySpec = object(
  {
    type: oneOf("JSONPatch"),
    jsonPatches: list(jsonPatch),
    targetRef: localPolicyTargetReference,
    priority: int32(),
  },
  ["type", "targetRef"],
);
