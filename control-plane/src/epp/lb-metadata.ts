// The GAIE endpoint-picker protocol's metadata (kubernetes-sigs/gateway-api-inference-extension
// docs/proposals/004-endpoint-picker-protocol, v1.0): the pick goes back as dynamic metadata
// `envoy.lb` / `x-gateway-destination-endpoint` (the same value as the header); the gateway may
// restrict the pick with filter metadata `envoy.lb.subset_hint` /
// `x-gateway-destination-endpoint-subset` (a list of ip:port), and reports the endpoint that
// served the request as `envoy.lb` / `x-gateway-destination-endpoint-served`.
import type { ProcessingRequest, ProtoStruct, ProtoValue } from "./messages.ts";

export const DESTINATION_HEADER = "x-gateway-destination-endpoint";
export const LB_NAMESPACE = "envoy.lb";
export const SUBSET_NAMESPACE = "envoy.lb.subset_hint";
export const SUBSET_KEY = "x-gateway-destination-endpoint-subset";
export const SERVED_KEY = "x-gateway-destination-endpoint-served";

export function destinationMetadata(destination: string): ProtoStruct {
  return {
    fields: {
      [LB_NAMESPACE]: { structValue: { fields: { [DESTINATION_HEADER]: { stringValue: destination } } } },
    },
  };
}

/**
 * The subset the gateway allows, or null when it sent none. A list of strings (as the protocol
 * writes it) — an item that is not a string is skipped, as llm-d-router skips it — or one
 * comma-separated string; any other value yields an empty subset, so nothing is eligible and the
 * answer is 503 — never a pick outside what the gateway asked for.
 */
export function subsetHint(req: ProcessingRequest): string[] | null {
  const ns = req.metadata_context?.filter_metadata?.[SUBSET_NAMESPACE];
  const v = ns?.fields?.[SUBSET_KEY];
  if (v === undefined) return null;
  if (v.listValue !== undefined) {
    const out: string[] = [];
    for (const item of v.listValue.values ?? [])
      if (typeof item.stringValue === "string") out.push(item.stringValue.trim());
    return out;
  }
  if (typeof v.stringValue === "string")
    return v.stringValue
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
  return [];
}

/** The endpoint that served the request, when the gateway reports it. */
export function servedEndpoint(req: ProcessingRequest): string | null {
  const v: ProtoValue | undefined =
    req.metadata_context?.filter_metadata?.[LB_NAMESPACE]?.fields?.[SERVED_KEY];
  return typeof v?.stringValue === "string" ? v.stringValue : null;
}

/** A google.protobuf.Value (as proto-loader decodes it) as plain JSON. */
export function valueToJson(v: ProtoValue | undefined): unknown {
  if (v === undefined) return null;
  if (v.structValue !== undefined) return structToJson(v.structValue);
  if (v.listValue !== undefined) return (v.listValue.values ?? []).map(valueToJson);
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.numberValue !== undefined) return v.numberValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return null;
}

export function structToJson(s: ProtoStruct | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s?.fields ?? {})) out[k] = valueToJson(v);
  return out;
}

/** The request's filter_metadata as JSON (namespace → Struct), what the filter reads as `metadata`. */
export function filterMetadataJson(req: ProcessingRequest): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [ns, s] of Object.entries(req.metadata_context?.filter_metadata ?? {}))
    out[ns] = structToJson(s);
  return out;
}
