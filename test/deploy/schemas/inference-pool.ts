// InferencePool (GAIE), checked against kubernetes-sigs/gateway-api-inference-extension v1.5.0 api/v1/inferencepool_types.go
// and shared_types.go (read in 2026; the version in which endpointPickerRef became optional):
// selector.matchLabels (required, 1–64 labels), targetPorts 1–8 `{number}` (1–65535; their
// uniqueness is a CEL rule, not checked here), appProtocol http | kubernetes.io/h2c,
// endpointPickerRef {group, kind, name, port {number}, failureMode FailOpen | FailClose} (`port`
// required for kind Service is a CEL rule: test/deploy/gaie.test.ts checks it instead).
import { int32, list, object, oneOf, string } from "./build.ts";
import { group, kind, objectName } from "./gateway-api.ts";

export const portNumber = int32({ minimum: 1, maximum: 65535 });
// Label keys are not checked (a structural schema has no propertyNames); values are.
const labelValue = string({ maxLength: 63, pattern: "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$" });

export const inferencePoolSpec = object(
  {
    selector: object(
      {
        matchLabels: {
          type: "object",
          additionalProperties: labelValue,
          minProperties: 1,
          maxProperties: 64,
        },
      },
      ["matchLabels"],
    ),
    targetPorts: list(object({ number: portNumber }, ["number"]), {
      minItems: 1,
      maxItems: 8,
      "x-kubernetes-list-type": "atomic",
    }),
    appProtocol: oneOf("http", "kubernetes.io/h2c"),
    endpointPickerRef: object(
      {
        group,
        kind,
        name: objectName,
        port: object({ number: portNumber }, ["number"]),
        failureMode: oneOf("FailOpen", "FailClose"),
      },
      ["name"],
    ),
  },
  ["selector", "targetPorts"],
);
