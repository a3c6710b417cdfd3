// What gateway reports tell an operator, counted as reports arrive: accepted and rejected
// reports, finished requests per pool and routing outcome, shed requests per pool and priority,
// prompt and cached bytes (the pool's hit ratio), upstream connection failures, a per-slot recent
// cached ratio, predicted vs served cached tokens per slot, and the hit-rate time series of the
// dashboard. Plain numbers; prometheus.ts and status.ts read them.
import type { IncomingMessage, ServerResponse } from "node:http";
import { NO_SLOT, type Report, SESSION_KEPT, SESSION_MOVED, SESSION_NEW } from "../reports/report-codec.ts";
import { emptyServedCache, observeServed, type ServedCache } from "../reports/served-cache.ts";
import { HitRateSeries } from "./hit-rate-series.ts";
import type { RouteHandler } from "./http-server.ts";
import { isCacheHit, OUTCOME_SHED, outcomeName, priorityName } from "./outcomes.ts";

export interface PoolReportCounters {
  byOutcome: Record<string, number>;
  /** Requests the gateways shed (429, outcome `shed`), per priority level name. */
  shedByPriority: Record<string, number>;
  promptBytes: number;
  cachedBytes: number;
}

export interface SlotRecent {
  requests: number;
  upstreamFailures: number;
  /** Exponentially weighted cached/prompt bytes of the slot's recent requests. */
  cachedRatio: number;
  /** Predicted vs served cached tokens of every request routed to the slot. */
  served: ServedCache;
}

/** Weight of the newest request in a slot's recent cached ratio (≈ the last 10 requests). */
const RECENT_WEIGHT = 0.1;

function sessionOutcomeName(outcome: number): string {
  if (outcome === SESSION_NEW) return "new";
  if (outcome === SESSION_KEPT) return "kept";
  if (outcome === SESSION_MOVED) return "moved";
  return "unknown";
}

/** Why a report was refused, from the status the report handler answered. */
function rejectReason(status: number): string {
  if (status === 400) return "bad_report";
  if (status === 401) return "unauthorized";
  if (status === 413) return "too_large";
  return "internal";
}

export class ReportStats {
  accepted = 0;
  readonly rejected: Record<string, number> = {};
  readonly pools = new Map<string, PoolReportCounters>();
  readonly slots = new Map<number, SlotRecent>();
  readonly hitRate = new HitRateSeries();
  /** Reported session routes by outcome (new, kept, moved). */
  readonly sessions: Record<string, number> = {};

  constructor(private readonly poolOf: (slot: number) => string) {}

  observe(report: Report, nowMs = Date.now()): void {
    this.accepted++;
    for (const s of report.sessions ?? []) {
      const outcome = sessionOutcomeName(s.outcome);
      this.sessions[outcome] = (this.sessions[outcome] ?? 0) + 1;
    }
    for (const f of report.finished) {
      const pool = this.poolOf(f.slot);
      let p = this.pools.get(pool);
      if (p === undefined) {
        p = { byOutcome: {}, shedByPriority: {}, promptBytes: 0, cachedBytes: 0 };
        this.pools.set(pool, p);
      }
      const outcome = outcomeName(f.outcome);
      p.byOutcome[outcome] = (p.byOutcome[outcome] ?? 0) + 1;
      if (f.outcome === OUTCOME_SHED) {
        // Its slot only names the pool: no engine saw it, so no slot's recent figures change.
        const level = priorityName(f.priority ?? 0);
        p.shedByPriority[level] = (p.shedByPriority[level] ?? 0) + 1;
        continue;
      }
      p.promptBytes += f.promptBytes;
      p.cachedBytes += f.cachedBytes;
      this.hitRate.add(pool, nowMs, f.promptBytes, f.cachedBytes, isCacheHit(f.outcome));

      let s = this.slots.get(f.slot);
      if (s === undefined) {
        s = { requests: 0, upstreamFailures: 0, cachedRatio: 0, served: emptyServedCache() };
        this.slots.set(f.slot, s);
      }
      const ratio = f.promptBytes > 0 ? Math.min(1, f.cachedBytes / f.promptBytes) : 0;
      s.cachedRatio = s.requests === 0 ? ratio : (1 - RECENT_WEIGHT) * s.cachedRatio + RECENT_WEIGHT * ratio;
      s.requests++;
      if (f.status === 0) s.upstreamFailures++;
      if (f.slot !== NO_SLOT) observeServed(s.served, f);
    }
  }

  /** Wraps the report handler's apply step: count, then apply. */
  observing(apply: (report: Report, remoteAddress: string, body: Uint8Array) => void) {
    return (report: Report, remoteAddress: string, body: Uint8Array): void => {
      this.observe(report);
      apply(report, remoteAddress, body);
    };
  }

  /** Wraps the POST /v1/report route to count refused reports by the status it answered. */
  counting(handler: RouteHandler): RouteHandler {
    return (req: IncomingMessage, res: ServerResponse, url: URL) => {
      res.once("finish", () => {
        if (res.statusCode >= 400) {
          const reason = rejectReason(res.statusCode);
          this.rejected[reason] = (this.rejected[reason] ?? 0) + 1;
        }
      });
      return handler(req, res, url);
    };
  }
}
