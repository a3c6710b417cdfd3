// Routing quality in virtual time (issue 8 §1): every policy × workload × rate on the simulated
// cluster. kvroute's rows come from the shipped filter (build/kvroute.wasm) in the Proxy-Wasm
// host — several gateways of several worker threads — synced from its control plane, all on the
// simulator's clock (quality/kvroute/). Writes quality.md and the PNG charts (to bench/results/
// unless --out). Deterministic for a seed.
//   npx tsx bench/quality.bench.ts [--quick] [--seed N] [--kv-delay-ms N] [--out DIR]
//     [--gateways N] [--threads N] [--latency-ms N] [--only kvroute,round-robin]
// (through `npm run bench -- quality`, write values as --flag=N.)
import { mkdirSync, writeFileSync } from "node:fs";
import { baselineNotes, closingNotes } from "./quality/analysis.ts";
import { writeCharts } from "./quality/charts.ts";
import { benchConfig, kvrouteVariants, policies, sensitivityWorkloads, workloads } from "./quality/config.ts";
import { runOne } from "./quality/harness.ts";
import { kvrouteGeometry } from "./quality/policies/kvroute.ts";
import type { PolicyFactory } from "./quality/policies/types.ts";
import { BOUND, type ResultRow, renderReport, SUBJECT } from "./quality/report.ts";
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
const seed = option("--seed", 1);
const kvDelayMs = option("--kv-delay-ms", 50);
kvrouteGeometry.gateways = option("--gateways", kvrouteGeometry.gateways);
kvrouteGeometry.threadsPerGateway = option("--threads", kvrouteGeometry.threadsPerGateway);
kvrouteGeometry.latencyMs = option("--latency-ms", kvrouteGeometry.latencyMs);
const only = text("--only")?.split(",");
const out = text("--out");
const resultsDir = out !== undefined ? `${out}/` : new URL("./results/", import.meta.url).pathname;

const started = performance.now();
const config = benchConfig(quick, seed, kvDelayMs);
const tok = benchTokenizer();
const wls = workloads(tok, config);
const pols = policies(config).filter((p) => only === undefined || only.includes(p.name));
console.log(`workloads ready in ${((performance.now() - started) / 1000).toFixed(1)} s (seed ${seed})`);

function measure(w: Workload, qps: number, p: PolicyFactory): ResultRow {
  const t0 = performance.now();
  const out = runOne(w.run(qps), p, config.cluster, seed, tok.wordIds);
  const wallS = (performance.now() - t0) / 1000;
  const m = out.metrics;
  console.log(
    `${w.name} @ ${qps} QPS ${p.name.padEnd(18)} TTFT p50/p90/p99 ${m.ttftP50.toFixed(0)}/${m.ttftP90.toFixed(0)}/` +
      `${m.ttftP99.toFixed(0)} ms  ${m.outputTokPerS.toFixed(0)} tok/s  hit ${(m.hitRate * 100).toFixed(1)}%  ` +
      `(${wallS.toFixed(1)} s)`,
  );
  return { workload: w.name, qps, policy: p.name, metrics: out.metrics, unfinished: out.unfinished, wallS };
}

const rows: ResultRow[] = [];
for (const w of wls) for (const qps of w.qps) for (const p of pols) rows.push(measure(w, qps, p));

// Sensitivity: kvroute variants at each chosen workload's heaviest rate, beside the default.
const sensitivity: ResultRow[] = [];
for (const name of sensitivityWorkloads(config)) {
  const w = wls.find((x) => x.name === name);
  if (w === undefined) continue;
  const qps = Math.max(...w.qps);
  const here = rows.filter((r) => r.workload === name && r.qps === qps);
  sensitivity.push(...here.filter((r) => r.policy === SUBJECT || r.policy === BOUND));
  if (only !== undefined && !only.includes(SUBJECT)) continue;
  for (const p of kvrouteVariants(config)) sensitivity.push(measure(w, qps, p));
}

mkdirSync(resultsDir, { recursive: true });
const charts = await writeCharts(rows, resultsDir);
const unfinished = [...rows, ...sensitivity].filter((r) => r.unfinished > 0);
const notes = [...closingNotes(rows, sensitivity), ...baselineNotes(rows)];
notes.push(
  ...unfinished.map(
    (r) =>
      `${r.workload} @ ${r.qps} QPS, ${r.policy}: ${r.unfinished} requests unfinished at the safety stop.`,
  ),
);
const report = renderReport({
  config,
  sensitivity,
  workloads: wls,
  policies: pols,
  rows,
  command:
    `npx tsx bench/quality.bench.ts${quick ? " --quick" : ""} --seed ${seed} --kv-delay-ms ${kvDelayMs}` +
    ` --gateways ${kvrouteGeometry.gateways} --threads ${kvrouteGeometry.threadsPerGateway}` +
    ` --latency-ms ${kvrouteGeometry.latencyMs}`,
  wallS: (performance.now() - started) / 1000,
  notes,
  charts,
});
writeFileSync(`${resultsDir}quality.md`, report);
console.log(
  `wrote ${resultsDir}quality.md and ${charts.join(", ")} in ${((performance.now() - started) / 1000).toFixed(0)} s`,
);
