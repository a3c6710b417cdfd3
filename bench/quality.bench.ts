// Routing quality in virtual time (issue 8 §1, issue 15, issue 33): every policy × workload × rate
// × seed × cost model on the simulated cluster. kvroute's rows come from the shipped filter
// (build/kvroute.wasm) in the Proxy-Wasm host — several gateways of several worker threads —
// synced from its control plane, all on the simulator's clock (quality/kvroute/). Writes
// quality.md (per cost model: paired per-seed decisions against every peer, medians over seeds)
// and the PNG charts (to bench/results/ unless --out); --quick writes quality-quick.md and its
// charts beside them, so the two runs' reports coexist. Deterministic for a seed list.
//   npx tsx bench/quality.bench.ts [--quick] [--seeds N | --seed-list A,B,..] [--profile h200-measured,h100-derived]
//     [--kv-delay-ms N] [--out DIR] [--gateways N] [--threads N] [--latency-ms N]
//     [--only kvroute,round-robin] [--no-sensitivity] [--rows FILE.jsonl] [--shard K/N] [--report-only]
//     [--geometry]
// (through `npm run bench -- quality`, write values as --flag=N.)
// Seeds: the report seeds (config.ts REPORT_SEEDS, never used for tuning) unless --seed-list
// names others; --seeds N takes the first N of them. --rows keeps every finished run in FILE (one
// JSON line) and reads back the runs it already has for the same configuration and build, so a
// stopped run resumes; --shard K/N measures only every N-th run from the K-th (0-based) and writes
// no report — run N shards side by side on one rows file, then once more without --shard to write
// the report from it. --report-only writes the report from the rows file and measures nothing.
// --geometry (with the rows complete) also measures kvroute as one gateway of all the geometry's
// threads at every point where it trails a peer; the report reads those runs back. With --shard
// too, each shard measures its share of those runs and writes no report.
import { mkdirSync, writeFileSync } from "node:fs";
import type { LatencyProfileName } from "../control-plane/sim/latency.ts";
import { baselineNotes, closingNotes } from "./quality/analysis.ts";
import { writeCharts } from "./quality/charts.ts";
import {
  BENCH_PROFILES,
  benchConfig,
  DEVELOPMENT_SEEDS,
  kvrouteVariants,
  policies,
  REPORT_SEEDS,
  sensitivityWorkloads,
  workloads,
} from "./quality/config.ts";
import { runOne } from "./quality/harness.ts";
import { kvrouteGeometry, kvroutePolicy } from "./quality/policies/kvroute.ts";
import type { PolicyFactory, RoutingPolicy } from "./quality/policies/types.ts";
import { BOUND, pointsOf, type ResultRow, renderReport, SUBJECT } from "./quality/report.ts";
import { RowStore } from "./quality/row-store.ts";
import { SeededWorkloads } from "./quality/seeded-workloads.ts";
import { digestOf, PEER_EXCEPT, PEER_SOURCES, SUBJECT_SOURCES } from "./quality/source-digest.ts";
import { pairedStandings, trailingPeers } from "./quality/standing.ts";
import { benchTokenizer } from "./quality/tokens.ts";
import type { Workload } from "./quality/workloads/types.ts";

const argv = process.argv.slice(2);
const quick = argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
/** `--name value` or `--name=value`. */
const text = (name: string): string | undefined => {
  const eq = argv.find((a) => a.startsWith(`${name}=`));
  if (eq !== undefined) return eq.slice(name.length + 1);
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const option = (name: string, fallback: number): number => {
  const t = text(name);
  const v = t === undefined ? fallback : Number(t);
  if (!Number.isFinite(v)) throw new Error(`${name} needs a number`);
  return v;
};
const seedList = text("--seed-list")?.split(",").map(Number);
const seeds = seedList ?? REPORT_SEEDS.slice(0, option("--seeds", REPORT_SEEDS.length));
if (seeds.some((x) => DEVELOPMENT_SEEDS.includes(x)))
  console.log(`note: seeds ${seeds.join(",")} include development seeds; the report will say so`);
const profiles = (text("--profile")?.split(",") ?? BENCH_PROFILES) as LatencyProfileName[];
const sensitivityOn = !argv.includes("--no-sensitivity");
/** Write the report from the rows file alone: measure nothing, leave out runs it lacks. */
const reportOnly = argv.includes("--report-only");
/** Also measure kvroute as one gateway (oneGatewayVariant) where it trails a peer in the rows. */
const geometryOn = argv.includes("--geometry");
const kvDelayMs = option("--kv-delay-ms", 50);
kvrouteGeometry.gateways = option("--gateways", kvrouteGeometry.gateways);
kvrouteGeometry.threadsPerGateway = option("--threads", kvrouteGeometry.threadsPerGateway);
kvrouteGeometry.latencyMs = option("--latency-ms", kvrouteGeometry.latencyMs);
const only = text("--only")?.split(",");
const out = text("--out");
const resultsDir = out !== undefined ? `${out}/` : new URL("./results/", import.meta.url).pathname;
/** The report's file name (and its charts' prefix): the quick ladder's beside the full run's. */
const reportName = quick ? "quality-quick" : "quality";
const shardText = text("--shard");
const shard = shardText === undefined ? undefined : parseShard(shardText);
// A row read back must come from the same sources (source-digest.ts); peers' rows do not depend on
// the filter, the control plane or kvroute's geometry, so they survive changes to those.
const peerKey = JSON.stringify({ quick, kvDelayMs, sources: digestOf(PEER_SOURCES, PEER_EXCEPT) });
const subjectKey = JSON.stringify({
  quick,
  kvDelayMs,
  ...kvrouteGeometry,
  sources: digestOf([...PEER_SOURCES, ...SUBJECT_SOURCES]),
});
const store = new RowStore(text("--rows"), (policy) =>
  policy === SUBJECT || policy.startsWith(`${SUBJECT} (`) ? subjectKey : peerKey,
);
if (store.size > 0) console.log(`${store.size} runs read back from ${store.path}`);
function parseShard(t: string): { k: number; n: number } {
  const m = /^(\d+)\/(\d+)$/.exec(t);
  const k = Number(m?.[1]);
  const n = Number(m?.[2]);
  if (m === null || k >= n) throw new Error(`--shard needs K/N with 0 <= K < N, not ${t}`);
  return { k, n };
}
/** Runs in the order they are met; a shard measures only its own, the others are skipped. */
let task = 0;
/** Runs of the main loop neither stored nor measured by this process (another shard's, or left out). */
let missing = 0;

const started = performance.now();
const tok = benchTokenizer();
const rows: ResultRow[] = [];
const sensitivity: ResultRow[] = [];
let config = benchConfig(quick, seeds[0] as number, kvDelayMs, profiles[0]);
let wls: Workload[] = [];
const pols = policies(config).filter((p) => only === undefined || only.includes(p.name));

/** Runs one point (or reads it back); a bound (the ideal policy) replaces the run's metrics with its own. */
function measure(
  w: Workload,
  qps: number,
  p: PolicyFactory,
  seed: number,
  always = false,
): ResultRow | undefined {
  const profile = config.profile;
  const mine = shard === undefined || task++ % shard.n === shard.k;
  const stored = store.get(profile, w.name, qps, p.name, seed);
  if (stored !== undefined || !mine || (reportOnly && !always)) return stored;
  // The seed's workloads, built now if this is its first run measured: not part of the run's time.
  seeded.all(config);
  const t0 = performance.now();
  let created: RoutingPolicy | undefined;
  const capture: PolicyFactory = {
    ...p,
    create: (ctx) => {
      created = p.create(ctx);
      return created;
    },
  };
  const out = runOne(w.run(qps), capture, config.cluster, seed, tok.wordIds);
  const metrics = created?.bound?.(out.metrics) ?? out.metrics;
  const wallS = (performance.now() - t0) / 1000;
  const counters = Object.entries(out.counters)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ");
  console.log(
    `${profile} seed ${seed} ${w.name} @ ${qps} QPS ${p.name.padEnd(18)} TTFT p50/p90/p99 ${metrics.ttftP50.toFixed(0)}/` +
      `${metrics.ttftP90.toFixed(0)}/${metrics.ttftP99.toFixed(0)} ms  ${metrics.outputTokPerS.toFixed(0)} tok/s  ` +
      `hit ${(metrics.hitRate * 100).toFixed(1)}%${metrics.saturated ? "  backlog grew" : ""}` +
      `${counters === "" ? "" : `  [${counters}]`}  (${wallS.toFixed(1)} s)`,
  );
  const row: ResultRow = {
    profile,
    workload: w.name,
    qps,
    policy: p.name,
    seed,
    metrics,
    unfinished: out.unfinished,
    wallS,
    counters: out.counters,
  };
  store.add(row);
  return row;
}

const found = (r: ResultRow | undefined): r is ResultRow => r !== undefined;

/**
 * The same filter as one gateway with all the default geometry's worker threads (every decider on
 * one board): run where kvroute trails a peer (--geometry), it tells the cost of deciding on
 * independent gateways — which see each other's requests only through their reports — from the
 * cost of the rule itself. (Here, not in config.ts: that file is part of every row's digest.)
 */
function oneGatewayVariant(c: typeof config): PolicyFactory {
  const threads = kvrouteGeometry.gateways * kvrouteGeometry.threadsPerGateway;
  return kvroutePolicy(
    {
      workers: c.cluster.workers,
      ranksPerWorker: c.cluster.ranksPerWorker,
      speculative: true,
      gateways: 1,
      threadsPerGateway: threads,
    },
    `${SUBJECT} (1 gateway × ${threads} threads)`,
  );
}

/** Each seed's own workloads (its arrivals), built when one of its runs is measured: a run read
 * back from the rows file needs only the name and the ladder (~25–50 s a build at full size). */
const seeded = new SeededWorkloads((c) => {
  const t0 = performance.now();
  const built = workloads(tok, c);
  console.log(
    `seed ${c.seed} ${c.profile}: workloads ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  return built;
});
// Seeds outermost, so a run stopped early still holds whole seeds of every profile.
for (const seed of seeds) {
  for (const profile of profiles) {
    config = benchConfig(quick, seed, kvDelayMs, profile);
    // Names and rate ladders depend on neither the seed nor the profile: read once.
    if (wls.length === 0) wls = seeded.ladders(config);
    for (const named of wls)
      for (const qps of named.qps)
        for (const p of pols) {
          const r = measure(seeded.of(config, named), qps, p, seed);
          if (r === undefined) missing++;
          else rows.push(r);
        }
    // Sensitivity: kvroute variants at each chosen workload's heaviest rate, beside the default.
    if (!sensitivityOn) continue;
    for (const name of sensitivityWorkloads(config)) {
      const w = wls.find((x) => x.name === name);
      if (w === undefined) continue;
      const qps = Math.max(...w.qps);
      const here = rows.filter(
        (r) => r.seed === seed && r.profile === profile && r.workload === name && r.qps === qps,
      );
      sensitivity.push(...here.filter((r) => r.policy === SUBJECT || r.policy === BOUND));
      if (only !== undefined && !only.includes(SUBJECT)) continue;
      for (const p of kvrouteVariants(config))
        sensitivity.push(...[measure(seeded.of(config, w), qps, p, seed)].filter(found));
    }
  }
}
/**
 * Where kvroute trails a peer: the same filter as one gateway, on the same seeds (read back from the
 * rows; measured with --geometry after the rows are complete). Each run on its own seed's arrivals
 * (seeded-workloads.ts), its name and ladder from `wls`. With --shard, a shard measures its share:
 * every shard reads the same complete rows, so all find the same trailing points in the same order.
 */
function oneGatewayRuns(points: ReturnType<typeof pointsOf>): ResultRow[] {
  const runs: ResultRow[] = [];
  const reportConfig = config;
  for (const profile of profiles) {
    const trailing = pairedStandings(points.filter((p) => p.profile === profile)).filter(
      (s) => !s.saturated && trailingPeers(s).length > 0,
    );
    // Seed by seed, so each seed's workloads are built once and dropped before the next seed's
    // (SeededWorkloads keeps one build: eight full-size builds outgrow an 8 GB heap).
    const seedsHere = [...new Set(trailing.flatMap((s) => s.subject.runs.map((r) => r.seed)))];
    for (const seed of seedsHere.sort((a, b) => a - b))
      for (const s of trailing) {
        if (!s.subject.runs.some((r) => r.seed === seed)) continue;
        config = benchConfig(quick, seed, kvDelayMs, profile);
        const named = wls.find((x) => x.name === s.workload);
        if (named === undefined) continue;
        const r = measure(seeded.of(config, named), s.qps, oneGatewayVariant(config), seed, geometryOn);
        if (r !== undefined) runs.push(r);
      }
  }
  config = reportConfig;
  return runs;
}

if (shard !== undefined) {
  if (geometryOn) {
    // The trailing points come from every run's row: with some missing, shards could disagree on
    // them and so on which runs are whose.
    if (missing > 0) {
      console.error(`--geometry with --shard needs every run's row in the rows file; ${missing} missing`);
      process.exit(1);
    }
    oneGatewayRuns(pointsOf(rows));
  }
  console.log(`shard ${shard.k}/${shard.n} done; write the report with the same flags and no --shard`);
  process.exit(0);
}

mkdirSync(resultsDir, { recursive: true });
// From stored rows, a profile's partly measured seeds stay out: every point of a profile is then
// compared over the same seeds.
if (reportOnly) {
  const cells = new Set(rows.map((r) => `${r.profile}\u0000${r.workload}\u0000${r.qps}\u0000${r.policy}`));
  const complete = (profile: string, seed: number) =>
    [...cells]
      .filter((c) => c.startsWith(`${profile}\u0000`))
      .every((c) =>
        rows.some(
          (r) => r.seed === seed && `${r.profile}\u0000${r.workload}\u0000${r.qps}\u0000${r.policy}` === c,
        ),
      );
  const keep = new Map<string, boolean>();
  const whole = (r: ResultRow) => {
    const k = `${r.profile}\u0000${r.seed}`;
    if (!keep.has(k)) keep.set(k, complete(r.profile, r.seed));
    return keep.get(k) as boolean;
  };
  rows.splice(0, rows.length, ...rows.filter(whole));
}
const points = pointsOf(rows);
const sensitivityPoints = pointsOf(sensitivity);
const geometryPoints = pointsOf(oneGatewayRuns(points));
const charts = new Map<string, string[]>();
const notes = new Map<string, string[]>();
for (const profile of profiles) {
  const mine = points.filter((p) => p.profile === profile);
  // Charts show medians over seeds; the bound has no throughput (NaN stays out of the chart).
  const medianRows: ResultRow[] = mine.map((p) => ({
    profile,
    workload: p.workload,
    qps: p.qps,
    policy: p.policy,
    seed: 0,
    unfinished: p.unfinished,
    wallS: 0,
    metrics: {
      ...(p.runs[0] as ResultRow).metrics,
      ttftP90: p.ttftP90.median,
      hitRate: p.hitRate.median,
      outputTokPerS: Number.isNaN(p.outputTokPerS.median) ? 0 : p.outputTokPerS.median,
    },
  }));
  charts.set(profile, await writeCharts(medianRows, resultsDir, `${reportName}-${profile}`));
  const unfinished = [...rows, ...sensitivity].filter((r) => r.profile === profile && r.unfinished > 0);
  notes.set(profile, [
    ...closingNotes(
      mine,
      sensitivityPoints.filter((p) => p.profile === profile),
      geometryPoints.filter((p) => p.profile === profile),
    ),
    ...baselineNotes(mine),
    ...unfinished.map(
      (r) =>
        `${r.workload} @ ${r.qps} QPS, ${r.policy}, seed ${r.seed}: ${r.unfinished} requests unfinished at the safety stop.`,
    ),
  ]);
}
const report = renderReport({
  config,
  seeds,
  heldOut: seeds.every((x) => REPORT_SEEDS.includes(x)),
  profiles,
  sensitivity,
  workloads: wls,
  policies: pols,
  rows,
  command:
    `npx tsx bench/quality.bench.ts${quick ? " --quick" : ""} --seed-list ${seeds.join(",")} --profile ${profiles.join(",")}` +
    ` --kv-delay-ms ${kvDelayMs} --gateways ${kvrouteGeometry.gateways} --threads ${kvrouteGeometry.threadsPerGateway}` +
    ` --latency-ms ${kvrouteGeometry.latencyMs}${sensitivityOn ? "" : " --no-sensitivity"}`,
  // From stored rows the bench's own time is the runs' (measured by several shards at once).
  wallS: reportOnly ? rows.reduce((sum, r) => sum + r.wallS, 0) : (performance.now() - started) / 1000,
  fromRows: reportOnly,
  notes,
  charts,
});
writeFileSync(`${resultsDir}${reportName}.md`, report);
console.log(
  `wrote ${resultsDir}${reportName}.md and ${[...charts.values()].flat().join(", ")} in ${((performance.now() - started) / 1000).toFixed(0)} s`,
);
