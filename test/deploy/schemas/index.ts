// The Istio, Envoy Gateway, Gateway API and GAIE kinds our artifacts ship, each with the schema of
// its spec. Envoy Gateway's and Gateway API's are complete structural schemas (types, enums,
// bounds, required fields, no unknown field); Istio's list field names only, because
// @kubernetes-models/istio checks the rest. Two groups define a kind named Gateway (Gateway API's
// and Istio's), so a kind is found by its name and then its apiVersion.
import type { Schema } from "../crd-schema.ts";
import { backendTrafficPolicySpec } from "./backend-traffic-policy.ts";
import { anything, fields, object, unmodeled } from "./build.ts";
import { clientTrafficPolicySpec } from "./client-traffic-policy.ts";
import { envoyExtensionPolicySpec } from "./envoy-extension-policy.ts";
import { envoyFilterSpecFields } from "./envoy-filter.ts";
import { envoyPatchPolicySpec } from "./envoy-patch-policy.ts";
import { gatewaySpec } from "./gateway.ts";
import { httpRouteSpec } from "./http-route.ts";
import { inferencePoolSpec } from "./inference-pool.ts";
import { istioGatewaySpecFields } from "./istio-gateway.ts";
import { virtualServiceSpecFields } from "./virtual-service.ts";
import { wasmPluginSpecFields } from "./wasm-plugin.ts";

export interface KindSchema {
  kind: string;
  apiVersion: string;
  /** The object without apiVersion, kind and metadata: spec (and status). */
  body: Schema;
  /** What checks types, enums and required fields: this schema, or Istio's generated models. */
  typesCheckedBy: "schema" | "@kubernetes-models/istio";
}

const structural = (kind: string, apiVersion: string, spec: Schema): KindSchema => ({
  kind,
  apiVersion,
  body: object({ spec, status: unmodeled("object") }, ["spec"]),
  typesCheckedBy: "schema",
});

const envoyGateway = (kind: string, spec: Schema) => structural(kind, "gateway.envoyproxy.io/v1alpha1", spec);

const istio = (kind: string, apiVersion: string, spec: Schema): KindSchema => ({
  kind,
  apiVersion,
  body: fields({ spec, status: anything }),
  typesCheckedBy: "@kubernetes-models/istio",
});

export const KIND_SCHEMAS: readonly KindSchema[] = [
  envoyGateway("EnvoyExtensionPolicy", envoyExtensionPolicySpec),
  envoyGateway("EnvoyPatchPolicy", envoyPatchPolicySpec),
  envoyGateway("ClientTrafficPolicy", clientTrafficPolicySpec),
  envoyGateway("BackendTrafficPolicy", backendTrafficPolicySpec),
  istio("WasmPlugin", "extensions.istio.io/v1alpha1", wasmPluginSpecFields),
  istio("EnvoyFilter", "networking.istio.io/v1alpha3", envoyFilterSpecFields),
  istio("Gateway", "networking.istio.io/v1", istioGatewaySpecFields),
  istio("VirtualService", "networking.istio.io/v1", virtualServiceSpecFields),
  // deploy/gaie: the pool kvroute picks for, and the route to it; envoy/*/examples: the listeners.
  structural("InferencePool", "inference.networking.k8s.io/v1", inferencePoolSpec),
  structural("HTTPRoute", "gateway.networking.k8s.io/v1", httpRouteSpec),
  structural("Gateway", "gateway.networking.k8s.io/v1", gatewaySpec),
];

/**
 * The kinds named `kind` (one, or two for Gateway), the one of `apiVersion` first; empty for kinds
 * not modelled here.
 */
export function kindSchemas(kind: string, apiVersion: string): KindSchema[] {
  const candidates = KIND_SCHEMAS.filter((k) => k.kind === kind);
  return candidates.sort((a, b) => Number(b.apiVersion === apiVersion) - Number(a.apiVersion === apiVersion));
}
