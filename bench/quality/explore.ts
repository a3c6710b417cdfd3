// Tries kvroute variants (scoring weights, plugin timings, gateway geometry) against chosen peers
// on chosen points of the quality bench, one line per run — how a scoring change is measured on
// every workload before it ships. Not a bench of its own (npm run bench skips it): a lab tool.
//   npx tsx bench/quality/explore.ts [--full] [--seeds 1,2] [--points no-sharing@192,rag@96|all]
//     [--peers round-robin,dynamo] [--profile h200-measured]
//     [--variants '{"default":{},"t0.1":{"routing":{"temperature":0.1}}}'] [--split-ms 1000]
// Variants are KvrouteOptions overrides (routing, load, plugin, gateways, threadsPerGateway, ...).
// --split-ms N also prints each run's TTFT p90 / p99 over the requests that arrived before N ms of
// virtual time and over those after: whether a gap is the cold start (empty caches, no report yet
// between gateways) or the steady state.
// Only development seeds (config.ts DEVELOPMENT_SEEDS): the report seeds stay held out, so a
// change chosen here is judged on seeds it was not chosen on.
import type { LatencyProfileName } from "../../control-plane/sim/latency.ts";
import { benchConfig, DEVELOPMENT_SEEDS, policies, REPORT_SEEDS, workloads } from "./config.ts";
import { runOne } from "./harness.ts";
import { percentile } from "./metrics.ts";
import { type KvrouteOptions, kvroutePolicy } from "./policies/kvroute.ts";
import type { PolicyFactory } from "./policies/types.ts";
import { benchTokenizer } from "./tokens.ts";

const argv = process.argv.slice(2);
const text = (name: string): string | undefined => {
  const eq = argv.find((a) => a.startsWith(`${name}=`));
  if (eq !== undefined) return eq.slice(name.length + 1);
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const quick = !argv.includes("--full");
const seeds = (text("--seeds") ?? `${DEVELOPMENT_SEEDS[0]}`).split(",").map(Number);
const held = seeds.filter((x) => REPORT_SEEDS.includes(x) || !DEVELOPMENT_SEEDS.includes(x));
if (held.length > 0)
  throw new Error(
    `explore uses development seeds only (${DEVELOPMENT_SEEDS.join(",")}), not ${held.join(",")}`,
  );
const profile = (text("--profile") ?? "h200-measured") as LatencyProfileName;
const pointsArg = text("--points") ?? "all";
const peers = (text("--peers") ?? "").split(",").filter((p) => p !== "");
const variants = JSON.parse(text("--variants") ?? '{"kvroute":{}}') as Record<
  string,
  Partial<KvrouteOptions>
>;

const splitText = text("--split-ms");
const splitMs = splitText === undefined ? undefined : Number(splitText);
if (splitMs !== undefined && !(splitMs > 0)) throw new Error("--split-ms needs a positive number of ms");

/** TTFT p90 / p99 of the requests that arrived in [from, to) ms, and how many there were. */
function ttftBetween(
  results: readonly { arrivalMs: number; ttftMs: number }[],
  from: number,
  to: number,
): string {
  const ttft = results
    .filter((r) => r.arrivalMs >= from && r.arrivalMs < to)
    .map((r) => r.ttftMs)
    .sort((a, b) => a - b);
  if (ttft.length === 0) return "none";
  return `${percentile(ttft, 90).toFixed(0)}/${percentile(ttft, 99).toFixed(0)} ms (${ttft.length})`;
}

const tok = benchTokenizer();
const rows: { point: string; name: string; p90: number[]; p99: number[]; hit: number[] }[] = [];
const row = (point: string, name: string) => {
  let r = rows.find((x) => x.point === point && x.name === name);
  if (r === undefined) {
    r = { point, name, p90: [], p99: [], hit: [] };
    rows.push(r);
  }
  return r;
};

for (const seed of seeds) {
  const config = benchConfig(quick, seed, 50, profile);
  const wls = workloads(tok, config);
  const peerPolicies = policies(config).filter((p) => peers.includes(p.name));
  const chosen =
    pointsArg === "all"
      ? wls.flatMap((w) => w.qps.map((q) => ({ w, qps: q })))
      : pointsArg.split(",").map((p) => {
          const [name, qps] = p.split("@");
          const w = wls.find((x) => x.name === name);
          if (w === undefined) throw new Error(`no workload ${name}: ${wls.map((x) => x.name).join(", ")}`);
          return { w, qps: Number(qps) };
        });
  for (const { w, qps } of chosen) {
    const point = `${w.name}@${qps}`;
    const candidates: PolicyFactory[] = [
      ...peerPolicies,
      ...Object.entries(variants).map(([name, v]) =>
        kvroutePolicy(
          {
            workers: config.cluster.workers,
            ranksPerWorker: config.cluster.ranksPerWorker,
            speculative: true,
            ...v,
          },
          name,
        ),
      ),
    ];
    for (const p of candidates) {
      const t0 = performance.now();
      const out = runOne(w.run(qps), p, config.cluster, seed, tok.wordIds);
      const m = out.metrics;
      const r = row(point, p.name);
      r.p90.push(m.ttftP90);
      r.p99.push(m.ttftP99);
      r.hit.push(m.hitRate);
      console.log(
        `seed ${seed} ${point.padEnd(40)} ${p.name.padEnd(22)} TTFT p50/p90/p99 ${m.ttftP50.toFixed(0)}/` +
          `${m.ttftP90.toFixed(0)}/${m.ttftP99.toFixed(0)} ms  hit ${(m.hitRate * 100).toFixed(1)}%  ` +
          `requests per rank ${m.requestsPerRank.join("/")}  (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
      );
      if (splitMs !== undefined)
        console.log(
          `    TTFT p90/p99 arriving before ${splitMs} ms ${ttftBetween(out.results, 0, splitMs)}, ` +
            `after ${ttftBetween(out.results, splitMs, Number.POSITIVE_INFINITY)}`,
        );
    }
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
console.log(`\nmeans over seeds ${seeds.join(",")}: point | name | TTFT p90 | p99 | hit`);
for (const r of rows)
  console.log(
    `${r.point.padEnd(40)} ${r.name.padEnd(22)} ${mean(r.p90).toFixed(0).padStart(6)} ${mean(r.p99).toFixed(0).padStart(6)} ${(mean(r.hit) * 100).toFixed(1).padStart(6)}%`,
  );
