// bench/results/quality.md (quality-quick.md for --quick): the configuration (seeds, cluster,
// workloads, policies), then per cost profile kvroute's standing against every peer at every
// point — leads / ties / trails decided per seed by the paired test of paired.ts, with the median
// paired difference — and one table per workload with every policy at every rate (medians over
// seeds, 95% intervals). Saturated points are reported as such; the ideal bound is a
// ceiling/floor, not a competitor.
import type { BenchConfig } from "./config.ts";
import { medianInterval, type SeedInterval } from "./metrics.ts";
import { PAIRED_LEVEL, type PairedComparison, SATURATION_FACTOR } from "./paired.ts";
import { BOUND, type Point, pointsOf, type ResultRow, SUBJECT } from "./points.ts";
import type { PolicyFactory } from "./policies/types.ts";
import {
  PAIRED_METRICS,
  type PairedMetric,
  type PairedStanding,
  pairedOn,
  pairedStandings,
  saturatedAt,
} from "./standing.ts";
import type { Workload } from "./workloads/types.ts";

export { BOUND, type Point, pointsOf, type ResultRow, SUBJECT };

const ms = (v: number) =>
  Number.isNaN(v) ? "–" : v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v)}`;
/** A duration in running text: `ms` with its unit (it already says "s" from 10 s up). */
export const msUnit = (v: number) => (Number.isNaN(v) || v >= 10_000 ? ms(v) : `${ms(v)} ms`);
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

const METRIC_NAME: Record<PairedMetric, string> = { ttftP90: "TTFT p90", ttftP99: "TTFT p99" };

const signed = (v: number, f: (x: number) => string) => (v > 0 ? `+${f(v)}` : v < 0 ? `−${f(-v)}` : f(0));
/** "+12 ms (+8%)": the median paired difference, kvroute − peer. */
export function effect(c: PairedComparison): string {
  return `${signed(c.medianDiffMs, msUnit)} (${signed(c.medianDiffShare * 100, (x) => `${x.toFixed(0)}%`)})`;
}

/** A paired comparison on `m` in running text: "p90 trails +7 ms (+16%)". */
export function pairedCell(m: PairedMetric, c: PairedComparison): string {
  return `${m === "ttftP90" ? "p90" : "p99"} ${c.verdict} ${effect(c)}`;
}

/**
 * Each kvroute variant against the default at a sensitivity point, paired per seed like the
 * peers (variant − default): the tables' medians and intervals are for reading, these decide.
 */
export function variantLines(here: readonly Point[], saturated: boolean): string[] {
  const base = here.find((p) => p.policy === SUBJECT);
  if (base === undefined) return [];
  return [
    `Each variant against the default, paired per seed (variant − ${SUBJECT}, exact Wilcoxon signed-rank at ${PAIRED_LEVEL})` +
      (saturated
        ? " — **a saturated point**: every router's TTFT there is its backlog, so these differences say little of the rule:"
        : ":"),
    "",
    ...here
      .filter((p) => p !== base && p.policy !== BOUND)
      .map(
        (p) =>
          `- ${p.policy}: TTFT ${PAIRED_METRICS.map((m) => pairedCell(m, pairedOn(p, base, m))).join(", ")}`,
      ),
  ];
}

/** One summary cell: saturated, or the counts and every trailing peer with its effect. */
function summaryCell(s: PairedStanding, m: PairedMetric): string {
  const cs = s.peers.map((c) => ({ name: c.peer.policy, c: c.byMetric[m] }));
  const count = (v: string) => cs.filter((x) => x.c.verdict === v).length;
  const trails = cs.filter((x) => x.c.verdict === "trails");
  const best = cs.reduce<{ name: string; c: PairedComparison } | undefined>(
    (a, x) => (a === undefined || x.c.medianDiffMs > a.c.medianDiffMs ? x : a),
    undefined,
  );
  if (s.saturated) return `saturated (${msUnit(s.subject[m].median)})`;
  const head =
    trails.length === 0 && count("ties") === 0
      ? `**leads all ${cs.length}**`
      : `${count("leads")} leads · ${count("ties")} ties · ${count("trails")} trails`;
  if (trails.length > 0) return `${head}: ${trails.map((x) => `${x.name} ${effect(x.c)}`).join(", ")}`;
  // The hardest peer: kvroute's largest deficit among ties, or its smallest margin.
  return best === undefined ? head : `${head}; hardest peer ${best.name} ${effect(best.c)}`;
}

/** Per profile: workload × rate → kvroute's standing on TTFT p90 and p99, and what it did not route. */
export function pairedSummaryTable(standings: readonly PairedStanding[]): string {
  const out = [
    "| workload | QPS | TTFT p90 (kvroute − peer, median over seeds) | TTFT p99 | kvroute not routed |",
    "|---|---:|---|---|---:|",
  ];
  for (const s of standings)
    out.push(
      `| ${s.workload} | ${s.qps} | ${summaryCell(s, "ttftP90")} | ${summaryCell(s, "ttftP99")} | ${s.unrouted} |`,
    );
  return out.join("\n");
}

/** Counts over the non-saturated points: where kvroute leads or ties every peer. */
export function standingTotals(standings: readonly PairedStanding[]): string {
  const open = standings.filter((s) => !s.saturated);
  const parts = PAIRED_METRICS.map((m) => {
    const clean = open.filter((s) => s.peers.every((c) => c.byMetric[m].verdict !== "trails")).length;
    const trails = open.reduce(
      (n, s) => n + s.peers.filter((c) => c.byMetric[m].verdict === "trails").length,
      0,
    );
    return `${METRIC_NAME[m]}: leads or ties every peer at ${clean} of ${open.length} non-saturated points (${trails} point–peer pairs trail)`;
  });
  return `${parts.join("; ")}; ${standings.length - open.length} saturated points set apart.`;
}

/** Per rate of one workload: every peer's paired comparison on both metrics. */
function pairedLines(standings: readonly PairedStanding[]): string[] {
  return standings.map((s) => {
    const per = s.peers.map((c) => {
      const cells = PAIRED_METRICS.map((m) => {
        const x = c.byMetric[m];
        return `${pairedCell(m, x)} (${x.lower}/${x.pairs} lower, p ${x.test.p.toFixed(3)})`;
      });
      return `${c.peer.policy}: ${cells.join(", ")}`;
    });
    const sat = s.saturated
      ? ` **saturated** (every router's TTFT p90 > ${SATURATION_FACTOR} × the unloaded floor ${msUnit(s.floorP90)})`
      : "";
    return `- ${s.qps} QPS${sat}${s.unrouted > 0 ? `; kvroute did not route ${s.unrouted} requests` : ""} — ${per.join("; ")}`;
  });
}

export interface ReportInput {
  config: BenchConfig;
  seeds: readonly number[];
  /** The seeds are config.ts REPORT_SEEDS (held out from tuning). */
  heldOut: boolean;
  profiles: readonly string[];
  /** kvroute variants at the heaviest rate of some workloads, with the default kvroute and the bound. */
  sensitivity: readonly ResultRow[];
  workloads: readonly Workload[];
  policies: readonly PolicyFactory[];
  rows: readonly ResultRow[];
  command: string;
  wallS: number;
  /** Written from a rows file (--report-only): wallS is the sum of the runs' own wall times. */
  fromRows?: boolean;
  /** Notes per profile. */
  notes: ReadonlyMap<string, readonly string[]>;
  /** Chart files per profile. */
  charts: ReadonlyMap<string, readonly string[]>;
}

/** One cost profile: seeds present, the paired summary, charts, notes, and per workload the
 * table and the paired lines. */
function profileSection(r: ReportInput, points: readonly Point[], profile: string): string[] {
  const lines: string[] = [];
  const mine = points.filter((p) => p.profile === profile);
  const standings = pairedStandings(mine);
  const present = [...new Set(mine.flatMap((p) => p.runs.map((r) => r.seed)))].sort((a, b) => a - b);
  const complete = present.filter((seed) => mine.every((p) => p.runs.some((r) => r.seed === seed)));
  lines.push(
    `## Cost profile ${profile}: where kvroute leads, ties and trails`,
    "",
    `Seeds with every run of this profile: ${complete.join(", ") || "none"} (${complete.length})` +
      (complete.length < present.length
        ? `; partial: ${present.filter((x) => !complete.includes(x)).join(", ")}`
        : "") +
      (complete.length < 6
        ? `. **With fewer than 6 paired seeds no difference can reach p < ${PAIRED_LEVEL}: every comparison here is a tie by construction, not by evidence.**`
        : "."),
    "",
    standingTotals(standings),
    "",
    pairedSummaryTable(standings),
    "",
    ...(r.charts.get(profile) ?? []).map((f) => `![${f}](${f})`),
    "",
  );
  const notes = r.notes.get(profile) ?? [];
  if (notes.length > 0)
    lines.push(
      `### Why kvroute trails where it does (${profile}, from this run)`,
      "",
      ...notes.map((n) => `- ${n}`),
      "",
    );
  for (const w of r.workloads) {
    const here = mine.filter((p) => p.workload === w.name);
    if (here.length === 0) continue;
    lines.push(
      `### ${profile} — ${w.name}`,
      "",
      resultTable(here),
      "",
      "Paired per seed (kvroute − peer; verdict, median difference, seeds where kvroute was lower, exact p):",
      "",
      ...pairedLines(standings.filter((s) => s.workload === w.name)),
      "",
    );
  }
  return lines;
}

export function renderReport(r: ReportInput): string {
  const c = r.config.cluster;
  const points = pointsOf(r.rows);
  const coverage = medianInterval(r.seeds.map((x) => x)).coverage;
  const lines = [
    "# Routing quality — kvroute vs the routers people deploy (simulator, virtual time)",
    "",
    `Generated by \`${r.command}\` (${r.config.quick ? "**quick** mode: fewer requests and rates; shapes kept" : "full run"}). ` +
      `Seeds **${r.seeds.join(", ")}**${r.heldOut ? " — the report seeds, held out: no filter change was tuned on them (development seeds are 1–6, bench/quality/config.ts)" : " (**not** the held-out report seeds)"}; ` +
      `the same seeds give the same tables. Cost profiles: ${r.profiles.map((p) => `**${p}**`).join(", ")}. ${r.fromRows ? `Written from the rows file; the runs took ${(r.wallS / 3600).toFixed(1)} h of wall time in all (shards side by side).` : `Bench wall time ${r.wallS.toFixed(0)} s.`}`,
    "",
    "## Setup",
    "",
    `- Cluster: ${c.workers} workers × ${c.ranksPerWorker} DP ranks = ${c.workers * c.ranksPerWorker} slots (control-plane/sim virtual time). ` +
      "Step cost, per profile (docs/simulator.md, control-plane/sim/latency.ts): **h200-measured** is fitted to one engine step of an " +
      "8B model measured on an H200 (5.08 ms + 22.4 µs per prefill token + 1.37 ns per attention pair + 16.4 µs per decoding " +
      "sequence + 30.7 ns per context token read); **h100-derived** is llm-d's H100 fit plus derived context terms (5.75 ms + " +
      "17.25 µs per token + 1.06 ns per pair + 6 µs per sequence + 50.8 ns per context token). " +
      `KV capacity ${c.numGpuBlocks} blocks × ${c.blockSize} tokens = ${(c.numGpuBlocks * c.blockSize).toLocaleString("en")} tokens per rank` +
      `${r.config.quick ? ` (470k × ${r.config.llmdGroups}/150, scaled with the llm-d workload)` : " (an 8B model on one H100)"} under both profiles; ` +
      `max ${c.maxNumSeqs} sequences, ${c.maxNumBatchedTokens} batched tokens per step.`,
    "- Prompts: Qwen3 chat template rendered with the real tokenizer files; token ids from the real tokenizer. Answer " +
      "lengths are drawn per request. " +
      `The engines' KV events reach every event-driven router (kvroute's control plane, Dynamo's and llm-d's indexes) ${c.kvEventDelayMs} ms ` +
      `(virtual) after publication; vLLM's balancer sees stats every ${c.statsIntervalMs} ms; the harness ticks every ${c.tickMs} ms. ` +
      "Each peer is one router that sees every request the moment it routes it; kvroute is what ships: several " +
      "gateways of several worker threads, each deciding on its own from its shared data and the control plane's images.",
    "- Metrics: TTFT and E2E percentiles (linear interpolation) per run; a request a router's own queue held (Dynamo) " +
      "counts from its first arrival; hit rate = cached prompt tokens / prompt tokens.",
    `- **Statistics (paired).** Every router sees the same arrivals for a seed, so kvroute is compared with each peer seed by ` +
      `seed: the differences kvroute − peer of a run's TTFT p90 (and p99) over the ${r.seeds.length} seeds go to the exact ` +
      `two-sided Wilcoxon signed-rank test (zero differences dropped, mid-ranks for ties) at level ${PAIRED_LEVEL}: ` +
      `**leads** when p < ${PAIRED_LEVEL} and the median difference is negative, **trails** when p < ${PAIRED_LEVEL} and it is ` +
      "positive, **ties** otherwise. The effect size is the median over seeds of the difference, in ms and as a share of the " +
      `peer's value. With ${r.seeds.length} seeds the smallest possible p is ${(2 / 2 ** r.seeds.length).toFixed(4)}. ` +
      `A point is **saturated** when every router's median TTFT p90 is above ${SATURATION_FACTOR} × the ideal bound's (the ` +
      "unloaded floor: each request alone on an idle rank with the best hit any router could get): queueing, not routing, " +
      "sets TTFT there, and the point is reported as saturated, not as a tie. Tables show medians over seeds with a " +
      `distribution-free interval for the median (${(coverage * 100).toFixed(1)}% coverage) for reading, not for deciding.`,
    "- kvroute not routed: requests over all seeds that the shipped filter did not route (the harness then sends them " +
      "round robin), plus its fail-open / fail-closed / rejected counts. It must be 0 or explained.",
    "",
    "Workloads:",
    "",
    ...r.workloads.map((w) => `- **${w.name}** — ${w.describe}; QPS ${w.qps.join(", ")}.`),
    "",
    "Policies (each peer's upstream file, line and commit: docs/peers.md and the policy file's header):",
    "",
    ...r.policies.map((p) => `- **${p.name}** — ${p.describe}.`),
    "",
  ];
  for (const profile of r.profiles) lines.push(...profileSection(r, points, profile));
  if (r.sensitivity.length > 0) {
    lines.push(
      "## What kvroute's result depends on",
      "",
      "kvroute variants at the heaviest rate of a workload, next to the default and the ideal bound (same seeds, same arrivals):",
      "",
    );
    const sens = pointsOf(r.sensitivity);
    const standings = pairedStandings(points);
    for (const key of [...new Set(sens.map((x) => `${x.profile} — ${x.workload}`))]) {
      const here = sens.filter((x) => `${x.profile} — ${x.workload}` === key);
      lines.push(
        `### ${key}`,
        "",
        resultTable(here),
        "",
        ...variantLines(here, here[0] !== undefined && saturatedAt(standings, here[0])),
        "",
      );
    }
  }
  return lines.join("\n");
}
