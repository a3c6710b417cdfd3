// The closing section of the report: where kvroute is behind another router in this run (its
// 95% interval lies on the worse side of that router's), and the causes found by reading the
// routing core and by the sensitivity runs — each cause printed only when the run shows its
// symptom, and only when the intervals separate.
import { separatedBetter } from "./metrics.ts";
import { kvrouteGeometry } from "./policies/kvroute.ts";
import { BOUND, type Point, SUBJECT, standingsOf } from "./report.ts";

export function closingNotes(points: readonly Point[], sensitivity: readonly Point[]): string[] {
  const notes: string[] = [];
  const behind: string[] = [];
  for (const w of [...new Set(points.map((p) => p.workload))]) {
    for (const s of standingsOf(points.filter((p) => p.workload === w))) {
      const who = [
        ...s.better.ttftP90,
        ...s.better.ttftP99,
        ...(s.regime === "saturated" ? s.better.outputTokPerS : []),
      ];
      if (who.length === 0) continue;
      behind.push(`${w} @ ${s.qps} QPS (behind ${[...new Set(who.map((p) => p.policy))].join(", ")})`);
    }
  }
  if (behind.length === 0) {
    notes.push(
      "kvroute is best or tied (95% intervals overlap) on TTFT p90 and p99 at every rate of every workload, and on " +
        "throughput wherever the cluster was not arrival-bound.",
    );
    return notes;
  }
  notes.push(`kvroute is behind another router (intervals separate) at: ${behind.join("; ")}.`);
  // Per sensitivity workload: a variant whose TTFT p90 interval separates below the default's.
  const effect = (label: string): string[] => {
    const out: string[] = [];
    for (const base of sensitivity.filter((p) => p.policy === SUBJECT)) {
      const v = sensitivity.find((p) => p.workload === base.workload && p.policy === `${SUBJECT} (${label})`);
      if (v !== undefined && separatedBetter(v.ttftP90, base.ttftP90, true))
        out.push(
          `${base.workload} @ ${base.qps} QPS ${Math.round(base.ttftP90.median)} → ${Math.round(v.ttftP90.median)} ms`,
        );
    }
    return out;
  };
  const lighterQueue = effect("inflightWeight 0.5");
  if (lighterQueue.length > 0) {
    notes.push(
      "The queue term weighs too much here: the core (filter/core/queued-work.ts) prices its own gateway's " +
        "unanswered requests at their uncached prompt, but the engine's waiting requests and other gateways' unseen " +
        "ones at a flat QUEUED_TOKENS = 512 prefill tokens each, their prompts unknown. A lighter queue weight " +
        `(inflightWeight 0.5 instead of the default 0.75), TTFT p90 (medians): ${lighterQueue.join("; ")}.`,
    );
  }
  const fresh = effect("load every 50 ms");
  if (fresh.length > 0) {
    notes.push(
      `Load freshness matters — load republished every 50 ms instead of 250 ms, TTFT p90 (medians): ${fresh.join("; ")}. ` +
        "SGLang's router and vLLM's balancer count their own in-flight requests live and Dynamo counts its active " +
        "sequences at every decision, while kvroute sees running/waiting as of the last scrape, plus its own gateway's requests since.",
    );
  }
  const oneDecider = effect("1 gateway × 1 thread");
  const reports = effect("reports every 100 ms");
  if (oneDecider.length > 0) {
    notes.push(
      "Independent deciders cost kvroute here: every peer is one router that sees each of its decisions at once, " +
        "while kvroute's gateways see each other's requests only through their reports (every 500 ms) and the " +
        `engines' scrapes. One gateway of one thread instead of ${kvrouteGeometry.gateways} × ` +
        `${kvrouteGeometry.threadsPerGateway}, TTFT p90 (medians): ` +
        `${oneDecider.join("; ")}` +
        (reports.length > 0
          ? `; reports every 100 ms instead: ${reports.join("; ")}.`
          : "; reports every 100 ms do not separate from the default, so the report interval is not the cause."),
    );
  }
  return notes;
}

/** Observations on the baselines that explain their lines (each only when the run shows it). */
export function baselineNotes(points: readonly Point[]): string[] {
  const notes: string[] = [];
  const unshared = points.filter((p) => p.workload === "no-sharing");
  const gaie = unshared.filter((p) => p.policy === "gaie-approx");
  const rr = unshared.filter((p) => p.policy === "round-robin");
  if (gaie.some((g) => rr.some((x) => x.qps === g.qps && g.ttftP90.lo > 1.5 * x.ttftP90.hi))) {
    notes.push(
      "GAIE's scorer herds when nothing is shared: its queue and KV-utilisation scores come from 50 ms-old metrics and " +
        "it keeps no in-flight count, so every request of a 50 ms window goes to the same best-looking rank.",
    );
  }
  const bound = points.filter((p) => p.policy === BOUND);
  if (bound.length > 0) {
    notes.push(
      "The ideal bound's TTFT is a floor (each request alone on an idle rank with the best hit any router could get), " +
        "so its distance to the routers is queueing and herding, not cache misses alone.",
    );
  }
  return notes;
}
