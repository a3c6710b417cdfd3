// The tracer kvroute's spans come from, and reading a parent context from request headers
// (W3C traceparent/tracestate through the propagator the SDK registers). Before the SDK starts,
// or without it, the API hands out non-recording spans: the call sites cost next to nothing.
import { type Context, propagation, ROOT_CONTEXT, type TextMapGetter, trace } from "@opentelemetry/api";

export const tracer = trace.getTracer("kvroute");

/** Header pairs as the endpoint picker holds them (lower-case names). */
export type HeaderPairs = ReadonlyArray<readonly [string, string]>;

const pairsGetter: TextMapGetter<HeaderPairs> = {
  keys: (carrier) => carrier.map(([k]) => k),
  get: (carrier, key) => carrier.find(([k]) => k === key)?.[1],
};

/** The trace a request's headers continue (its traceparent), or a new root. */
export function parentFromPairs(headers: HeaderPairs): Context {
  return propagation.extract(ROOT_CONTEXT, headers, pairsGetter);
}

export function headerOf(headers: HeaderPairs, name: string): string | undefined {
  return headers.find(([k]) => k === name)?.[1];
}
