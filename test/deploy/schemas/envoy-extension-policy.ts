// EnvoyExtensionPolicy spec, checked against envoyproxy/gateway v1.9.0 api/v1alpha1/envoyextensionypolicy_types.go and wasm_types.go.
// In depth: wasm[] (all of Wasm, WasmCodeSource, the HTTP and image sources, their TLS); by name
// and type: extProc, lua, dynamicModule. CEL rules left out: which target-reference combination is
// allowed, code.type naming the source that is set, pullSecretRef.kind == Secret.

import { anyJson, boolean, list, object, oneOf, string, unmodeled } from "./build.ts";
import { policyTargetReferences, secretObjectReference } from "./gateway-api.ts";

const tls = object({ caCertificateRef: secretObjectReference }, ["caCertificateRef"]);

const code = object(
  {
    // The field marker also lists ConfigMap, but the type's own enum (HTTP, Image) applies too.
    type: oneOf("HTTP", "Image"),
    http: object({ url: string(), sha256: string(), tls }, ["url"]),
    image: object({ url: string(), sha256: string(), pullSecretRef: secretObjectReference, tls }, ["url"]),
    pullPolicy: oneOf("IfNotPresent", "Always"),
  },
  ["type"],
);

const wasm = object(
  {
    name: string(),
    rootID: string(),
    code,
    config: anyJson,
    failOpen: boolean,
    env: object({ hostKeys: list(string()) }),
  },
  ["code"],
);

export const envoyExtensionPolicySpec = object({
  ...policyTargetReferences,
  // MergeType is a free string upstream; a CEL rule refuses Replace, which leaves these two.
  mergeType: oneOf("StrategicMerge", "JSONMerge"),
  wasm: list(wasm, { maxItems: 16 }),
  extProc: { ...unmodeled("array"), maxItems: 16 },
  lua: { ...unmodeled("array"), maxItems: 16 },
  dynamicModule: { ...unmodeled("array"), maxItems: 16 },
});
