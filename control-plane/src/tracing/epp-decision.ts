// A span per endpoint-picker decision, continuing the gateway's trace (the ext_proc request
// headers carry its traceparent when the gateway traces): which endpoint and rank the embedded
// filter picked. The picker calls this once, where it has decided (epp/exchange.ts); the span
// marks the decision's moment, its attributes say what was decided.
import { SpanKind } from "@opentelemetry/api";
import { tracingStarted } from "./sdk.ts";
import { type HeaderPairs, headerOf, parentFromPairs, tracer } from "./tracer.ts";

/** What the filter's headers say about the pick, as span attributes. */
const DECISION_HEADERS: ReadonlyArray<[header: string, attribute: string]> = [
  ["x-data-parallel-rank", "kvroute.rank"],
  ["x-dynamo-dp-rank", "kvroute.dynamo.dp_rank"],
  ["x-dynamo-worker-instance-id", "kvroute.dynamo.worker_id"],
  ["x-dynamo-prefill-instance-id", "kvroute.dynamo.prefill_worker_id"],
  ["x-dynamo-prefill-dp-rank", "kvroute.dynamo.prefill_dp_rank"],
];

/**
 * @param request the request headers as the gateway sent them (traceparent, :method, :path)
 * @param decided the headers the embedded filter passed on (its rank headers)
 * @param destination the endpoint(s) picked, as x-gateway-destination-endpoint says
 */
export function traceEppDecision(request: HeaderPairs, decided: HeaderPairs, destination: string): void {
  if (!tracingStarted()) return; // not even a no-op span on the picker's path
  const span = tracer.startSpan(
    "kvroute.epp.decision",
    {
      kind: SpanKind.SERVER,
      attributes: {
        "kvroute.destination": destination,
        "http.request.method": headerOf(request, ":method") ?? "",
        "url.path": headerOf(request, ":path") ?? "",
      },
    },
    parentFromPairs(request),
  );
  if (span.isRecording()) {
    const requestId = headerOf(request, "x-request-id");
    if (requestId !== undefined) span.setAttribute("kvroute.request_id", requestId);
    for (const [header, attribute] of DECISION_HEADERS) {
      const value = headerOf(decided, header);
      if (value !== undefined) span.setAttribute(attribute, value);
    }
  }
  span.end();
}
