// bench/results/quality.md: the configuration (seeds, cluster, workloads, policies) and one table
// per workload with every policy at every rate — medians over seeds with 95% intervals — then
// the leaders and kvroute's standing per rate against the DESIGN §9 target (best or tied on TTFT
// p90 and p99). "Best" only when intervals separate; throughput only where not arrival-bound;
// the ideal bound is a ceiling/floor, not a competitor.
import type { BenchConfig } from "./config.ts";
import { medianInterval, type RunMetrics, type SeedInterval, separatedBetter } from "./metrics.ts";
import type { PolicyFactory } from "./policies/types.ts";
import type { Workload } from "./workloads/types.ts";

export interface ResultRow {
  /** The engines' cost model (latency.ts LATENCY_PROFILES). */
  profile: string;
  workload: string;
  qps: number;
  policy: string;
  /** The seed of this run (workload content, arrivals, tie breaks). */
  seed: number;
  metrics: RunMetrics;
  unfinished: number;
  /** Wall-clock seconds this run took (not a result; shows the bench's own cost). */
  wallS: number;
  /** The policy's own counts (kvroute: requests the filter did not route; Dynamo: queued). */
  counters?: Record<string, number>;
}

export const BOUND = "ideal-bound";
export const SUBJECT = "kvroute";

/** One (workload, rate, policy) over its seeds: medians with 95% intervals. */
export interface Point {
  workload: string;
  qps: number;
  policy: string;
  runs: ResultRow[];
  ttftP50: SeedInterval;
  ttftP90: SeedInterval;
  ttftP99: SeedInterval;
  e2eP50: SeedInterval;
  e2eP90: SeedInterval;
  hitRate: SeedInterval;
  outputTokPerS: SeedInterval;
  /** Seeds in which the backlog grew (the cluster, not the arrivals, set the pace). */
  saturatedSeeds: number;
  /** Seeds whose run was long enough to judge (backlogGrowth not NaN). */
  judgedSeeds: number;
  unfinished: number;
}

/** Groups per-seed rows into points, in first-seen order. */
export function pointsOf(rows: readonly ResultRow[]): Point[] {
  const groups = new Map<string, ResultRow[]>();
  for (const r of rows) {
    const key = `${r.workload}\u0000${r.qps}\u0000${r.policy}`;
    const g = groups.get(key);
    if (g === undefined) groups.set(key, [r]);
    else g.push(r);
  }
  return [...groups.values()].map((runs) => {
    const first = runs[0] as ResultRow;
    const of = (pick: (m: RunMetrics) => number) => medianInterval(runs.map((r) => pick(r.metrics)));
    return {
      workload: first.workload,
      qps: first.qps,
      policy: first.policy,
      runs,
      ttftP50: of((m) => m.ttftP50),
      ttftP90: of((m) => m.ttftP90),
      ttftP99: of((m) => m.ttftP99),
      e2eP50: of((m) => m.e2eP50),
      e2eP90: of((m) => m.e2eP90),
      hitRate: of((m) => m.hitRate),
      outputTokPerS: of((m) => m.outputTokPerS),
      saturatedSeeds: runs.filter((r) => r.metrics.saturated).length,
      judgedSeeds: runs.filter((r) => !Number.isNaN(r.metrics.backlogGrowth)).length,
      unfinished: runs.reduce((n, r) => n + r.unfinished, 0),
    };
  });
}

const ms = (v: number) =>
  Number.isNaN(v) ? "–" : v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v)}`;
const pct = (v: number) => (Number.isNaN(v) ? "–" : `${(v * 100).toFixed(1)}%`);
const num = (v: number) => (Number.isNaN(v) ? "–" : `${Math.round(v)}`);

/** "median (lo–hi)", or the median alone with one seed. */
export function withInterval(i: SeedInterval, f: (v: number) => string): string {
  if (Number.isNaN(i.median)) return "–";
  return i.n < 2 ? f(i.median) : `${f(i.median)} (${f(i.lo)}–${f(i.hi)})`;
}

export function resultTable(points: readonly Point[]): string {
  const out = [
    "| QPS | policy | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | E2E p90 ms | out tok/s | hit rate | backlog grew (seeds judged) | requests per rank (first seed) |",
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
  ];
  for (const p of points) {
    const name = p.policy === SUBJECT ? `**${p.policy}**` : p.policy;
    const unfinished = p.unfinished > 0 ? ` (${p.unfinished} unfinished)` : "";
    const bound = p.policy === BOUND;
    out.push(
      `| ${p.qps} | ${name}${unfinished} | ${ms(p.ttftP50.median)} | ${withInterval(p.ttftP90, ms)} | ` +
        `${withInterval(p.ttftP99, ms)} | ${withInterval(p.e2eP90, ms)} | ${withInterval(p.outputTokPerS, num)} | ` +
        `${withInterval(p.hitRate, pct)} | ${bound ? "–" : `${p.saturatedSeeds}/${p.judgedSeeds} of ${p.runs.length}`} | ` +
        `${bound ? "–" : (p.runs[0]?.metrics.requestsPerRank.join(" ") ?? "")} |`,
    );
  }
  return out.join("\n");
}

/**
 * Whether throughput can be ranked at a rate: "saturated" when some router's backlog grew in
 * most seeds there; "arrival-bound" when no router's did and most runs were long enough to
 * tell; "too short" otherwise (the runs never filled, so neither can be said).
 */
export function throughputRegime(points: readonly Point[]): "saturated" | "arrival-bound" | "too short" {
  const routers = points.filter((p) => p.policy !== BOUND);
  if (routers.some((p) => p.saturatedSeeds * 2 > p.runs.length)) return "saturated";
  return routers.every((p) => p.judgedSeeds * 2 > p.runs.length) ? "arrival-bound" : "too short";
}

export type Metric = "ttftP90" | "ttftP99" | "outputTokPerS" | "hitRate";
const LOWER_IS_BETTER: Record<Metric, boolean> = {
  ttftP90: true,
  ttftP99: true,
  outputTokPerS: false,
  hitRate: false,
};

/** The router with the best median, and every router whose interval overlaps its interval. */
export function leaders(
  points: readonly Point[],
  metric: Metric,
): { best: Point; tied: Point[] } | undefined {
  const routers = points.filter((p) => p.policy !== BOUND && !Number.isNaN(p[metric].median));
  if (routers.length === 0) return undefined;
  const lower = LOWER_IS_BETTER[metric];
  const best = routers.reduce((a, b) =>
    (lower ? b[metric].median < a[metric].median : b[metric].median > a[metric].median) ? b : a,
  );
  const tied = routers.filter((p) => p !== best && !separatedBetter(best[metric], p[metric], lower));
  return { best, tied };
}

export interface Standing {
  qps: number;
  subject: Point;
  /** Routers whose interval lies entirely on the better side of kvroute's. */
  better: Record<Metric, Point[]>;
  /** Routers whose interval overlaps kvroute's. */
  tied: Record<Metric, Point[]>;
  regime: "saturated" | "arrival-bound" | "too short";
}

export function standingsOf(points: readonly Point[]): Standing[] {
  const out: Standing[] = [];
  for (const qps of [...new Set(points.map((p) => p.qps))]) {
    const here = points.filter((p) => p.qps === qps);
    const routers = here.filter((p) => p.policy !== BOUND);
    const subject = routers.find((p) => p.policy === SUBJECT);
    if (subject === undefined) continue;
    const others = routers.filter((p) => p !== subject);
    const better = {} as Record<Metric, Point[]>;
    const tied = {} as Record<Metric, Point[]>;
    for (const m of Object.keys(LOWER_IS_BETTER) as Metric[]) {
      better[m] = others.filter((p) => separatedBetter(p[m], subject[m], LOWER_IS_BETTER[m]));
      tied[m] = others.filter(
        (p) =>
          !separatedBetter(p[m], subject[m], LOWER_IS_BETTER[m]) &&
          !separatedBetter(subject[m], p[m], LOWER_IS_BETTER[m]),
      );
    }
    out.push({ qps, subject, better, tied, regime: throughputRegime(here) });
  }
  return out;
}

function verdict(s: Standing, m: Metric, f: (v: number) => string): string {
  if (s.better[m].length > 0)
    return `behind ${s.better[m].map((p) => `${p.policy} ${f(p[m].median)}`).join(", ")}`;
  if (s.tied[m].length === 0) return "best (its interval separates from every router's)";
  return `tied with ${s.tied[m].map((p) => p.policy).join(", ")} (intervals overlap)`;
}

/** Per rate: where kvroute stands; "best" only when intervals separate, "tied" otherwise. */
export function standings(points: readonly Point[]): string[] {
  return standingsOf(points).map((s) => {
    const p = s.subject;
    const tput =
      s.regime === "arrival-bound"
        ? "throughput not ranked: arrival-bound (no router's backlog grew, so throughput is the offered load)"
        : s.regime === "too short"
          ? "throughput not ranked: the runs are shorter than 4× an unqueued request's E2E, so saturation cannot be told"
          : `throughput ${num(p.outputTokPerS.median)} tok/s — ${verdict(s, "outputTokPerS", num)}`;
    return (
      `- ${s.qps} QPS: TTFT p90 ${ms(p.ttftP90.median)} ms — ${verdict(s, "ttftP90", ms)}; TTFT p99 ` +
      `${ms(p.ttftP99.median)} ms — ${verdict(s, "ttftP99", ms)}; ${tput}; hit rate ${pct(p.hitRate.median)}`
    );
  });
}

/** Per rate: which router leads on TTFT p90 — one name when its interval separates, else the tied group. */
export function leaderLines(points: readonly Point[]): string[] {
  return [...new Set(points.map((p) => p.qps))].flatMap((qps) => {
    const l = leaders(
      points.filter((p) => p.qps === qps),
      "ttftP90",
    );
    if (l === undefined) return [];
    return l.tied.length === 0
      ? [
          `- ${qps} QPS: best TTFT p90 is ${l.best.policy} (${ms(l.best.ttftP90.median)} ms; intervals separate)`,
        ]
      : [
          `- ${qps} QPS: TTFT p90 tied between ${[l.best, ...l.tied].map((p) => `${p.policy} ${ms(p.ttftP90.median)}`).join(", ")} (intervals overlap)`,
        ];
  });
}

/** One cell of the summary: kvroute's standing on a metric at one rate. */
function standingCell(s: Standing, m: "ttftP90" | "ttftP99"): string {
  const mine = s.subject[m].median;
  if (s.better[m].length > 0) {
    const best = s.better[m].reduce((a, b) => (b[m].median < a[m].median ? b : a));
    return `trails ${best.policy} by ${ms(mine - best[m].median)}`;
  }
  return s.tied[m].length === 0 ? "**leads**" : "tied";
}

/**
 * Where kvroute leads, ties and trails: per workload and rate, TTFT p90 and p99 against every
 * router (leads = its interval separates below all; trails = some router's separates below it),
 * and its hit rate's distance to the ceiling (the ideal bound) in points.
 */
export function summaryTable(points: readonly Point[]): string {
  const out = [
    "| workload | QPS | TTFT p90 | TTFT p99 | hit rate − ceiling (points) |",
    "|---|---:|---|---|---:|",
  ];
  for (const w of [...new Set(points.map((p) => p.workload))]) {
    const here = points.filter((p) => p.workload === w);
    for (const s of standingsOf(here)) {
      const bound = here.find((p) => p.qps === s.qps && p.policy === BOUND);
      const gap = bound === undefined ? Number.NaN : (s.subject.hitRate.median - bound.hitRate.median) * 100;
      out.push(
        `| ${w} | ${s.qps} | ${standingCell(s, "ttftP90")} | ${standingCell(s, "ttftP99")} | ` +
          `${Number.isNaN(gap) ? "–" : gap.toFixed(1)} |`,
      );
    }
  }
  return out.join("\n");
}

export interface ReportInput {
  config: BenchConfig;
  seeds: readonly number[];
  /** kvroute variants at the heaviest rate of some workloads, with the default kvroute and the bound. */
  sensitivity: readonly ResultRow[];
  workloads: readonly Workload[];
  policies: readonly PolicyFactory[];
  rows: readonly ResultRow[];
  command: string;
  wallS: number;
  notes: readonly string[];
  charts: readonly string[];
}

export function renderReport(r: ReportInput): string {
  const c = r.config.cluster;
  const points = pointsOf(r.rows);
  const coverage = medianInterval(r.seeds.map((x) => x)).coverage;
  const lines = [
    "# Routing quality — kvroute vs published baselines (simulator, virtual time)",
    "",
    `Generated by \`${r.command}\` (${r.config.quick ? "**quick** mode: fewer requests, rates and seeds; shapes kept" : "full run"}). ` +
      `Seeds **${r.seeds.join(", ")}**; the same seeds give the same tables. Bench wall time ${r.wallS.toFixed(0)} s.`,
    "",
    "## Setup",
    "",
    `- Cluster: ${c.workers} workers × ${c.ranksPerWorker} DP ranks = ${c.workers * c.ranksPerWorker} slots (control-plane/sim virtual time; ` +
      "cost model of an 8B model on one H100: 5.75 ms per step + 17.25 µs per uncached prefill token + attention over cached " +
      "and earlier tokens + 6 µs per decoding sequence + the KV bytes each decode reads, docs/simulator.md); " +
      `KV capacity ${c.numGpuBlocks} blocks × ${c.blockSize} tokens = ${(c.numGpuBlocks * c.blockSize).toLocaleString("en")} tokens per rank` +
      `${r.config.quick ? ` (470k × ${r.config.llmdGroups}/150, scaled with the llm-d workload)` : " (an 8B model on one H100)"}; ` +
      `max ${c.maxNumSeqs} sequences, ${c.maxNumBatchedTokens} batched tokens per step.`,
    "- Prompts: Qwen3 chat template rendered with the real tokenizer files; token ids from the real tokenizer. Answer " +
      "lengths are drawn per request (the engine stops there; the body carries the client's larger max_tokens). " +
      `The engines' KV events reach every event-driven router (kvroute's control plane, Dynamo's and llm-d's indexes) ${c.kvEventDelayMs} ms ` +
      `(virtual) after publication; vLLM's balancer sees stats every ${c.statsIntervalMs} ms; the harness ticks every ${c.tickMs} ms. ` +
      "Each peer is one router that sees every request the moment it routes it; kvroute is what ships: several " +
      "gateways of several worker threads, each deciding on its own from its shared data and the control plane's " +
      "images (the kvroute policy line says how many).",
    "- Metrics: TTFT and E2E percentiles (linear interpolation); output tokens per second of virtual time from first arrival " +
      "to last finish; hit rate = cached prompt tokens / prompt tokens.",
    `- Statistics: every point runs once per seed; cells show the median over seeds and, in brackets, a distribution-free ` +
      `interval for the median (order statistics; ${(coverage * 100).toFixed(1)}% coverage with ${r.seeds.length} seeds). ` +
      "A router is called best only when its interval separates from every other router's; otherwise the routers whose " +
      "intervals overlap are tied. Throughput is ranked only at rates where some router's backlog grew (requests in the " +
      "system at 90% of the arrival window ≥ 1.5 × those at 50% + 8) in most seeds; where none grew the cluster kept up " +
      "with arrivals and throughput is the offered load, and where the runs were shorter than 4× an unqueued request's E2E " +
      "saturation cannot be told — the report says which instead of ranking.",
    "- The ideal bound is not a router: its hit rate is a ceiling and its TTFT / E2E are floors no router can pass on this " +
      "simulator (bench/quality/policies/ideal.ts, docs/peers.md); it has no throughput.",
    "",
    "Workloads:",
    "",
    ...r.workloads.map((w) => `- **${w.name}** — ${w.describe}; QPS ${w.qps.join(", ")}.`),
    "",
    "Policies (each peer's upstream file and commit: docs/peers.md and the policy file's header):",
    "",
    ...r.policies.map((p) => `- **${p.name}** — ${p.describe}.`),
    "",
    ...r.charts.map((f) => `![${f}](${f})`),
    "",
    "## Where kvroute leads, ties and trails",
    "",
    `Per rate, on medians over seeds: **leads** = its interval (${(coverage * 100).toFixed(1)}% coverage) separates below every router's; tied = no ` +
      "router's interval separates below it; trails X by N = X's interval separates below it, N ms apart (medians). " +
      "The last column is kvroute's hit rate less the ideal bound's (the hit-rate ceiling).",
    "",
    summaryTable(points),
    "",
  ];
  for (const w of r.workloads) {
    const here = points.filter((p) => p.workload === w.name);
    lines.push(
      `## ${w.name}`,
      "",
      resultTable(here),
      "",
      "Leaders on TTFT p90 (routers only):",
      "",
      ...leaderLines(here),
      "",
      "Where kvroute stands:",
      "",
      ...standings(here),
      "",
    );
  }
  if (r.sensitivity.length > 0) {
    lines.push(
      "## What kvroute's result depends on",
      "",
      "kvroute variants at the heaviest rate of a workload, next to the default and the ideal bound (same seeds, same arrivals):",
      "",
    );
    const sens = pointsOf(r.sensitivity);
    for (const w of [...new Set(sens.map((x) => x.workload))]) {
      lines.push(`### ${w}`, "", resultTable(sens.filter((x) => x.workload === w)), "");
    }
  }
  if (r.notes.length > 0) lines.push("## Notes", "", ...r.notes.map((n) => `- ${n}`), "");
  return lines.join("\n");
}
