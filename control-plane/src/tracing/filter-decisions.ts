// The inline filter has no exporter: its decisions reach the control plane in the report
// stream (docs/wire-format.md §6), one finished request each — slot, outcome, predicted and
// served cache, TTFT, duration. Each becomes a span under the span of the report that carried
// it, timed from its reported duration (it ended at most one report interval before).
import { context, type Span, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { FinishedRequest, Report } from "../reports/report-codec.ts";
import { tracer } from "./tracer.ts";

export interface SlotNames {
  /** The slot's key (ip:port/rank) and pool, when the slot table knows its id. */
  slot(id: number): { key: string; pool: string } | undefined;
  outcome(code: number): string;
}

function decisionSpan(f: FinishedRequest, gateway: string, names: SlotNames, nowMs: number): Span {
  const slot = names.slot(f.slot);
  return tracer.startSpan(
    "kvroute.filter.decision",
    {
      kind: SpanKind.INTERNAL,
      startTime: nowMs - f.durationMs,
      attributes: {
        "kvroute.gateway": gateway,
        "kvroute.slot": slot?.key ?? String(f.slot),
        "kvroute.pool": slot?.pool ?? "unknown",
        "kvroute.outcome": names.outcome(f.outcome),
        "kvroute.prompt_bytes": f.promptBytes,
        "kvroute.predicted_cached_bytes": f.cachedBytes,
        "kvroute.ttft_ms": f.ttftMs,
        "http.response.status_code": f.status,
        ...(f.servedCachedTokens === undefined
          ? {}
          : { "kvroute.served_cached_tokens": f.servedCachedTokens }),
        ...(f.priority === undefined ? {} : { "kvroute.priority": f.priority }),
        ...(f.requestId === "" ? {} : { "kvroute.request_id": f.requestId }),
      },
    },
    context.active(),
  );
}

/** One span per finished request of a report, ended now; call it under the report's span. */
export function traceFilterDecisions(report: Report, names: SlotNames, nowMs = Date.now()): void {
  if (report.finished.length === 0) return;
  // Under a report span that is not recorded (no SDK, or not sampled) they would not be either.
  if (trace.getSpan(context.active())?.isRecording() !== true) return;
  for (const f of report.finished) {
    const span = decisionSpan(f, report.gateway, names, nowMs);
    if (f.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end(nowMs);
  }
}
