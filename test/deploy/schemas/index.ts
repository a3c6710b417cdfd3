// The Istio, Envoy Gateway and GAIE kinds our artifacts ship, each with the schema of its spec. Envoy
// Gateway's are complete structural schemas (types, enums, bounds, required fields, no unknown
// field); Istio's list field names only, because @kubernetes-models/istio checks the rest.
import type { Schema } from "../crd-schema.ts";
import { anything, fields, object, unmodeled } from "./build.ts";
import { clientTrafficPolicySpec } from "./client-traffic-policy.ts";
import { envoyExtensionPolicySpec } from "./envoy-extension-policy.ts";
import { envoyFilterSpecFields } from "./envoy-filter.ts";
import { envoyPatchPolicySpec } from "./envoy-patch-policy.ts";
import { httpRouteSpec } from "./http-route.ts";
import { inferencePoolSpec } from "./inference-pool.ts";
import { wasmPluginSpecFields } from "./wasm-plugin.ts";

export interface KindSchema {
  apiVersion: string;
  /** The object without apiVersion, kind and metadata: spec (and status). */
  body: Schema;
  /** What checks types, enums and required fields: this schema, or Istio's generated models. */
  typesCheckedBy: "schema" | "@kubernetes-models/istio";
}

const envoyGateway = (spec: Schema): KindSchema => ({
  apiVersion: "gateway.envoyproxy.io/v1alpha1",
  body: object({ spec, status: unmodeled("object") }, ["spec"]),
  typesCheckedBy: "schema",
});

const istio = (apiVersion: string, spec: Schema): KindSchema => ({
  apiVersion,
  body: fields({ spec, status: anything }),
  typesCheckedBy: "@kubernetes-models/istio",
});

export const KIND_SCHEMAS: ReadonlyMap<string, KindSchema> = new Map([
  ["EnvoyExtensionPolicy", envoyGateway(envoyExtensionPolicySpec)],
  ["EnvoyPatchPolicy", envoyGateway(envoyPatchPolicySpec)],
  ["ClientTrafficPolicy", envoyGateway(clientTrafficPolicySpec)],
  ["WasmPlugin", istio("extensions.istio.io/v1alpha1", wasmPluginSpecFields)],
  ["EnvoyFilter", istio("networking.istio.io/v1alpha3", envoyFilterSpecFields)],
  // deploy/gaie: the pool kvroute picks for, and the route to it.
  [
    "InferencePool",
    {
      apiVersion: "inference.networking.k8s.io/v1",
      body: object({ spec: inferencePoolSpec, status: unmodeled("object") }, ["spec"]),
      typesCheckedBy: "schema",
    },
  ],
  [
    "HTTPRoute",
    {
      apiVersion: "gateway.networking.k8s.io/v1",
      body: object({ spec: httpRouteSpec, status: unmodeled("object") }, ["spec"]),
      typesCheckedBy: "schema",
    },
  ],
]);
