// The closing section of the report: where kvroute is not the best router in this run
// (computed from the rows), and the causes found by reading the routing core and by the
// sensitivity runs — each cause printed only when the run shows its symptom.
import { clearlyBetter, type ResultRow, SUBJECT, standingsOf } from "./report.ts";

export function closingNotes(rows: readonly ResultRow[], sensitivity: readonly ResultRow[]): string[] {
  const notes: string[] = [];
  const behind: string[] = [];
  for (const w of [...new Set(rows.map((r) => r.workload))]) {
    for (const s of standingsOf(rows.filter((r) => r.workload === w))) {
      if (s.betterTtft.length === 0 && s.betterThroughput.length === 0) continue;
      const who = [...new Set([...s.betterTtft, ...s.betterThroughput].map((r) => r.policy))].join(", ");
      behind.push(`${w} @ ${s.qps} QPS (behind ${who})`);
    }
  }
  if (behind.length === 0) {
    notes.push(
      "kvroute is best or tied within 2% on TTFT p90 and throughput at every rate of every workload.",
    );
    return notes;
  }
  notes.push(`kvroute is not the best router (beyond a 2% tie band) at: ${behind.join("; ")}.`);
  // Per sensitivity workload: the default kvroute row and each variant's TTFT p90 there.
  const effect = (label: string): string[] => {
    const out: string[] = [];
    for (const base of sensitivity.filter((r) => r.policy === SUBJECT)) {
      const v = sensitivity.find((r) => r.workload === base.workload && r.policy === `${SUBJECT} (${label})`);
      if (v !== undefined && clearlyBetter(v.metrics.ttftP90, base.metrics.ttftP90, true))
        out.push(
          `${base.workload} @ ${base.qps} QPS ${Math.round(base.metrics.ttftP90)} → ${Math.round(v.metrics.ttftP90)} ms`,
        );
    }
    return out;
  };
  const lighterQueue = effect("inflightWeight 0.5");
  if (lighterQueue.length > 0) {
    notes.push(
      "Why, on shared-prefix bursts: the core (filter/core/route-decision.ts) prices every queued request — waiting, " +
        "plus every request this gateway sent since the last load report — at a flat QUEUED_TOKENS = 512 prefill " +
        "tokens. In a cache-friendly burst most of those just-sent requests are short cached prefills that start within " +
        "a step, so after a handful of sends the penalty outweighs a group's whole shared prefix and kvroute spills the " +
        "group onto a second rank, paying a cold prefill that delays everything queued behind it (hence a lower hit rate " +
        `than the text-prefix routers). Halving the queue weight (inflightWeight 0.5), TTFT p90: ${lighterQueue.join("; ")}. ` +
        "What would fix it: price each queued request by its own uncached work (the gateway knows promptBytes and " +
        "cachedChunks of its own sends) instead of a constant, and drop a sent request from the local count once the " +
        "engine has had a step to admit it; or lower the default inflightWeight.",
    );
  }
  const fresh = effect("load every 50 ms");
  if (fresh.length > 0) {
    notes.push(
      `Load freshness matters too — load republished every 50 ms instead of 250 ms, TTFT p90: ${fresh.join("; ")}. ` +
        "SGLang's router counts its in-flight requests live and the Dynamo oracle reads the engines directly, while " +
        "kvroute sees running/waiting as of the last scrape (plus its own sends since).",
    );
  }
  const unshared = standingsOf(rows.filter((r) => r.workload === "no-sharing"));
  if (unshared.some((s) => s.betterTtft.length > 0)) {
    notes.push(
      "Without sharing (the control) the requests are alike and round robin is optimal; kvroute's residual gap comes " +
        "from its load view — running/waiting as of the last scrape plus its own sends since then — under which a rank " +
        "that finished requests in between still looks busy. A live per-slot in-flight count (requests minus finished, " +
        "which the filter already tracks for reports) would close it.",
    );
  }
  const unchanged = sensitivity
    .filter((r) => r.policy === SUBJECT)
    .filter((base) =>
      ["events 0 ms late", "events 500 ms late"].every((label) => {
        const v = sensitivity.find(
          (r) => r.workload === base.workload && r.policy === `${SUBJECT} (${label})`,
        );
        return v !== undefined && Math.abs(v.metrics.hitRate - base.metrics.hitRate) < 0.005;
      }),
    )
    .map((r) => r.workload);
  if (unchanged.length > 0) {
    notes.push(
      `KV event delay (0 / 50 / 500 ms) barely moves kvroute on ${unchanged.join(", ")}: speculative entries (2 s TTL) ` +
        "hold each new prefix on the rank it was sent to until the engine's events confirm it (compare the 'no " +
        "speculative entries' rows).",
    );
  }
  return notes;
}

/** Observations on the baselines that explain their lines (each only when the run shows it). */
export function baselineNotes(rows: readonly ResultRow[]): string[] {
  const notes: string[] = [];
  const unshared = rows.filter((r) => r.workload === "no-sharing");
  const gaie = unshared.filter((r) => r.policy === "gaie-approx");
  const rr = unshared.filter((r) => r.policy === "round-robin");
  if (gaie.some((g) => rr.some((x) => x.qps === g.qps && g.metrics.ttftP90 > 1.5 * x.metrics.ttftP90))) {
    notes.push(
      "GAIE's scorer herds when nothing is shared: its queue and KV-utilisation scores come from 50 ms-old metrics and " +
        "it keeps no in-flight count, so every request of a 50 ms window goes to the same best-looking rank.",
    );
  }
  const dyn = rows.filter((r) => r.policy === "dynamo-oracle");
  const ideal = rows.filter((r) => r.policy === "ideal-bound");
  if (
    dyn.some((d) =>
      ideal.some(
        (i) => i.workload === d.workload && i.qps === d.qps && d.metrics.hitRate < i.metrics.hitRate - 0.1,
      ),
    )
  ) {
    notes.push(
      "The Dynamo oracle knows every cache exactly yet caches less: at overlap weight 1 its cost adds every active " +
        "block on a rank to the prefill it would save, so a rank busy with one group's long sequences looks expensive " +
        "and the next request of that group goes elsewhere. That is the published formula at its defaults, not an " +
        "information problem.",
    );
  }
  return notes;
}
