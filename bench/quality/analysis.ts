// The closing section of the report: where kvroute is behind another router in this run (paired
// per seed, standing.ts), and the causes found by reading the routing core and by the
// sensitivity runs — each cause printed only when the run shows its symptom, and only when the
// paired test separates it.
import { BOUND, type Point, SUBJECT } from "./points.ts";
import { kvrouteGeometry } from "./policies/kvroute.ts";
import { effect, msUnit, pairedCell } from "./report.ts";
import {
  PAIRED_METRICS,
  type PairedStanding,
  pairedOn,
  pairedStandings,
  saturatedAt,
  trailingPeers,
} from "./standing.ts";

export function closingNotes(
  points: readonly Point[],
  sensitivity: readonly Point[],
  oneGateway: readonly Point[] = [],
): string[] {
  const notes: string[] = [];
  const behind: string[] = [];
  const standings = pairedStandings(points);
  for (const s of standings) {
    const who = trailingPeers(s);
    if (who.length === 0) continue;
    behind.push(`${s.workload} @ ${s.qps} QPS (behind ${who.map((p) => p.policy).join(", ")})`);
  }
  if (behind.length === 0) {
    notes.push(
      "kvroute leads or ties every peer on TTFT p90 and p99 at every non-saturated point (paired per seed, exact " +
        "Wilcoxon signed-rank at 0.05).",
    );
    return notes;
  }
  notes.push(`kvroute trails a peer (paired test) at: ${behind.join("; ")}.`);
  notes.push(
    ...evidenceNotes(standings),
    ...oneGatewayNotes(standings, oneGateway),
    ...idleRankNotes(points),
    ...rotationNotes(points, oneGateway),
  );
  // Per sensitivity workload: a variant that leads the default on TTFT p90, paired per seed, with
  // the paired effect (a significant sub-millisecond lead is not a cause); saturated points left
  // out, where every router's TTFT is its backlog and a variant's lead says nothing of the rule.
  const leadsOver = (label: string): string[] => {
    const out: string[] = [];
    for (const base of sensitivity.filter((p) => p.policy === SUBJECT)) {
      if (saturatedAt(standings, base)) continue;
      const v = sensitivity.find(
        (p) =>
          p.profile === base.profile && p.workload === base.workload && p.policy === `${SUBJECT} (${label})`,
      );
      if (v === undefined) continue;
      const c = pairedOn(v, base, "ttftP90");
      if (c.verdict === "leads")
        out.push(
          `${base.workload} @ ${base.qps} QPS ${msUnit(base.ttftP90.median)} → ${msUnit(v.ttftP90.median)}, ` +
            `paired ${effect(c)}`,
        );
    }
    return out;
  };
  const lighterQueue = leadsOver("inflightWeight 0.5");
  if (lighterQueue.length > 0) {
    notes.push(
      "The queue term weighs too much here: the core (filter/core/queued-work.ts) prices its own gateway's " +
        "unanswered requests at their uncached prompt, but the engine's waiting requests and other gateways' unseen " +
        "ones at a flat QUEUED_TOKENS = 512 prefill tokens each, their prompts unknown. A lighter queue weight " +
        `(inflightWeight 0.5 instead of the default 0.75), TTFT p90 (medians): ${lighterQueue.join("; ")}.`,
    );
  }
  const fresh = leadsOver("load every 50 ms");
  if (fresh.length > 0) {
    notes.push(
      `Fresher load — republished every 50 ms instead of 250 ms, TTFT p90 (medians): ${fresh.join("; ")}. ` +
        "SGLang's router and vLLM's balancer count their own in-flight requests live and Dynamo counts its active " +
        "sequences at every decision, while kvroute sees running/waiting as of the last scrape, plus its own gateway's requests since.",
    );
  }
  const oneDecider = leadsOver("1 gateway × 1 thread");
  const reports = leadsOver("reports every 100 ms");
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

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
/** Ranks that got no request in a run, median over the point's seeds. */
const idleRanks = (p: Point): number =>
  median(p.runs.map((r) => r.metrics.requestsPerRank.filter((n) => n === 0).length));
/** Peers kvroute trails (paired, either TTFT metric) at this point, unless saturated. */
function aheadOf(points: readonly Point[], subject: Point): Point[] {
  const here = points.filter(
    (p) => p.profile === subject.profile && p.workload === subject.workload && p.qps === subject.qps,
  );
  const s = pairedStandings(here)[0];
  return s === undefined ? [] : trailingPeers(s);
}

/**
 * The run's own evidence at every point where kvroute trails: its hit rate, how evenly it spread
 * requests, its E2E and its ranks left idle, against each peer ahead of it (medians over seeds).
 */
function evidenceNotes(standings: readonly PairedStanding[]): string[] {
  const lines: string[] = [];
  const pct = (v: number) => `${(v * 100).toFixed(1)}%`;
  const spread = (p: Point) => median(p.runs.map((r) => r.metrics.requestImbalance)).toFixed(2);
  for (const s of standings) {
    const ahead = trailingPeers(s);
    if (ahead.length === 0) continue;
    const k = s.subject;
    const vs = ahead
      .map(
        (p) =>
          `${p.policy} hit ${pct(p.hitRate.median)}, busiest rank ${spread(p)}× mean, E2E p90 ${Math.round(p.e2eP90.median)} ms, ` +
          `${idleRanks(p)} ranks unused`,
      )
      .join("; ");
    lines.push(
      `${s.workload} @ ${s.qps} QPS — kvroute hit ${pct(k.hitRate.median)}, busiest rank ${spread(k)}× mean, E2E p90 ` +
        `${Math.round(k.e2eP90.median)} ms, ${idleRanks(k)} ranks unused; ${vs}`,
    );
  }
  return lines.length === 0
    ? []
    : [`Evidence where kvroute trails (medians over seeds): ${lines.join(". ")}.`];
}

/**
 * Where kvroute trails: the same filter run as one gateway of all the geometry's worker threads
 * (one board for every decider) on the same seeds, paired against each peer ahead — whether the
 * gap is the rule's or the cost of deciding on gateways that see each other only through reports.
 */
function oneGatewayNotes(standings: readonly PairedStanding[], oneGateway: readonly Point[]): string[] {
  const lines: string[] = [];
  let name = "";
  for (const s of standings) {
    const ahead = trailingPeers(s);
    if (ahead.length === 0) continue;
    const g = oneGateway.find((p) => p.workload === s.workload && p.qps === s.qps);
    if (g === undefined) continue;
    name = g.policy;
    const vs = ahead.map((peer) => {
      const cells = PAIRED_METRICS.map((m) => pairedCell(m, pairedOn(g, peer, m)));
      return `against ${peer.policy} ${cells.join(", ")}`;
    });
    lines.push(
      `${s.workload} @ ${s.qps} QPS — TTFT p90 / p99 ${Math.round(g.ttftP90.median)} / ${Math.round(g.ttftP99.median)} ms ` +
        `(two gateways: ${Math.round(s.subject.ttftP90.median)} / ${Math.round(s.subject.ttftP99.median)}), ${vs.join("; ")}`,
    );
  }
  if (lines.length === 0) return [];
  return [
    `The same filter as one gateway (${name}: every decider reads one board, none waits for another gateway's ` +
      `report), on the same seeds, paired against the peers ahead (medians; kvroute − peer): ${lines.join(". ")}.`,
  ];
}

/**
 * Where kvroute trails a router that used every rank while kvroute left some idle in most seeds:
 * the cost prices a decoding sequence at DECODE_TOKENS prefill tokens, so a rank that holds a
 * shared prefix keeps winning new requests while ranks without it stay cold, and the busy ranks'
 * decode batches slow every step (the E2E column shows it).
 */
function idleRankNotes(points: readonly Point[]): string[] {
  const cases: string[] = [];
  const peers = new Set<string>();
  for (const k of points.filter((p) => p.policy === SUBJECT)) {
    const idle = idleRanks(k);
    if (idle === 0) continue;
    const full = aheadOf(points, k).filter((p) => idleRanks(p) === 0);
    if (full.length === 0) continue;
    for (const p of full) peers.add(p.policy);
    const e2e = full.map((p) => `${p.policy} ${Math.round(p.e2eP90.median)}`).join(", ");
    cases.push(
      `${k.workload} @ ${k.qps} QPS: ${idle} of ${k.runs[0]?.metrics.requestsPerRank.length} ranks idle, ` +
        `E2E p90 ${Math.round(k.e2eP90.median)} ms against ${e2e}`,
    );
  }
  if (cases.length === 0) return [];
  return [
    "kvroute keeps new requests on the ranks that already hold their shared prefix and leaves others cold, where " +
      "the routers ahead of it used every rank (median over seeds of the ranks that got no request; E2E p90 " +
      `medians): ${cases.join("; ")}. Its cost prices a decoding sequence at DECODE_TOKENS = 16 prefill tokens ` +
      "(filter/core/route-decision.ts), so a rank holding a shared prefix of P tokens wins until it decodes P / 16 " +
      "more sequences than an empty one (the multi-turn system prompt's 1,024 tokens: 64); the bigger decode " +
      "batches then slow every step of the busy ranks." +
      (peers.has("sglang-cache-aware")
        ? " SGLang's router sends a request whose match is under 30 % of its text to the least-loaded worker, " +
          "which warms every rank with the shared prefix early."
        : ""),
  ];
}

/**
 * Where round robin (or another load-only router) is ahead on a point with little sharing: a strict
 * rotation gives every rank its next request about when its last one is likely done, while kvroute
 * estimates that — the spread of its per-rank counts shows how even they are. Where the same filter
 * as one gateway (`oneGateway`) is still behind, the gap is the estimate itself, not the gateways'
 * delay in hearing of each other.
 */
function rotationNotes(points: readonly Point[], oneGateway: readonly Point[]): string[] {
  const cases: string[] = [];
  const alone: string[] = [];
  for (const k of points.filter((p) => p.policy === SUBJECT)) {
    const rr = aheadOf(points, k).find((p) => p.policy === "round-robin");
    if (rr === undefined) continue;
    cases.push(
      `${k.workload} @ ${k.qps} QPS: busiest rank ${median(k.runs.map((r) => r.metrics.requestImbalance)).toFixed(2)}× ` +
        `the mean, hit rate ${(k.hitRate.median * 100).toFixed(1)}%`,
    );
    const one = oneGateway.find(
      (p) => p.profile === k.profile && p.workload === k.workload && p.qps === k.qps,
    );
    if (one === undefined) continue;
    const vs = PAIRED_METRICS.map((m) => [m, pairedOn(one, rr, m)] as const);
    if (vs.some(([, c]) => c.verdict === "trails"))
      alone.push(
        `${k.workload} @ ${k.qps} QPS (one gateway − round robin, paired: ` +
          `${vs.map(([m, c]) => pairedCell(m, c)).join(", ")})`,
      );
  }
  if (cases.length === 0) return [];
  return [
    "Round robin is ahead where little is shared: a strict rotation gives every rank the same number of requests, " +
      "each about when the rank's last one is likely done. kvroute estimates that from its own queue — a queued " +
      "prompt less what its slot prefilled since it started on it, at the speed the slots answer at " +
      '(docs/operations.md "Queued prefill, aged") — but a gateway sees another gateway\'s unanswered prompts only ' +
      "as the engines' metrics and reports show them, at a fixed size each — its per-rank counts (medians over " +
      `seeds): ${cases.join("; ")}.` +
      (alone.length === 0
        ? ""
        : ` As one gateway it is still behind at ${alone.join("; ")}: there the gap is the estimate itself ` +
          "(engine metrics up to one scrape old, each waiting request at a fixed size), against a rotation that " +
          "needs no estimate when every prompt costs about the same."),
  ];
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
