// Routing quality in virtual time (issue 8 §1): every policy × workload × rate on the simulated
// cluster, kvroute's real routing core and control-plane index in the loop. Writes
// bench/results/quality.md and the PNG charts next to it. Deterministic for a seed.
//   npx tsx bench/quality.bench.ts [--quick] [--seed N] [--kv-delay-ms N] [--out DIR]
import { mkdirSync, writeFileSync } from "node:fs";
import { baselineNotes, closingNotes } from "./quality/analysis.ts";
import { writeCharts } from "./quality/charts.ts";
import { benchConfig, kvrouteVariants, policies, sensitivityWorkloads, workloads } from "./quality/config.ts";
import { runOne } from "./quality/harness.ts";
import type { PolicyFactory } from "./quality/policies/types.ts";
import { BOUND, type ResultRow, renderReport, SUBJECT } from "./quality/report.ts";
import { benchTokenizer } from "./quality/tokens.ts";
import type { Workload } from "./quality/workloads/types.ts";

const argv = process.argv.slice(2);
const quick = argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
const option = (name: string, fallback: number): number => {
  const i = argv.indexOf(name);
  const v = i >= 0 ? Number(argv[i + 1]) : fallback;
  if (!Number.isFinite(v)) throw new Error(`${name} needs a number`);
  return v;
};
const seed = option("--seed", 1);
const kvDelayMs = option("--kv-delay-ms", 50);
const outAt = argv.indexOf("--out");
const resultsDir =
  outAt >= 0 ? `${argv[outAt + 1] ?? "."}/` : new URL("./results/", import.meta.url).pathname;

const started = performance.now();
const config = benchConfig(quick, seed, kvDelayMs);
const tok = benchTokenizer();
const wls = workloads(tok, config);
const pols = policies(config);
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
  command: `npx tsx bench/quality.bench.ts${quick ? " --quick" : ""} --seed ${seed} --kv-delay-ms ${kvDelayMs}`,
  wallS: (performance.now() - started) / 1000,
  notes,
  charts,
});
writeFileSync(`${resultsDir}quality.md`, report);
console.log(
  `wrote ${resultsDir}quality.md and ${charts.join(", ")} in ${((performance.now() - started) / 1000).toFixed(0)} s`,
);
