// LoRA routing (docs/configuration.md "LoRA adapters"): many adapters over one base model with
// Zipf popularity (bench/quality/workloads/lora.ts) on the quality bench's simulated fleet with
// LoRA on (--max-loras places per rank, an adapter load charged to the step that needs it), routed
// by the shipped build/kvroute.wasm (KVROUTE_BENCH_FILTER_WASM names another build) in the Node
// Proxy-Wasm host behind its control plane — the quality harness's virtual-time loop — against
// the peers' behaviour: GAIE's picker with its lora-affinity scorer (policies/gaie-lora.ts) and
// vLLM's own DP balancer.
//
// As the quality report: on the held-out report seeds (config.ts REPORT_SEEDS; nothing is tuned on
// them), under both cost models (BENCH_PROFILES), and kvroute against each peer decided per rate
// seed by seed with the exact Wilcoxon signed-rank test (paired.ts) on TTFT p90 and p99. Reported
// per rate and router: medians over seeds of TTFT, cached share of the prompt, adapter loads.
//   tsx bench/lora.bench.ts [--quick] [--max-loras=N] [--seeds=1,2,…] [--profile=a,b]
//                           [--rates=16,32,…] [--only=kvroute,gaie-lora] [--gateways=G] [--threads=T]
// and, to explore (on development seeds, --seeds=1,2,3,…), a second kvroute row with
// --kvroute-load-ms=MS (scrape period), --lora-load-cost=T, --lora-full-cost=T (routing.lora).
import type { Engine } from "../control-plane/sim/engine.ts";
import type { LatencyProfileName } from "../control-plane/sim/latency.ts";
import { lognormalAround } from "../control-plane/sim/output-lengths.ts";
import { writeResult } from "./lib/results.ts";
import { BENCH_PROFILES, benchConfig, REPORT_SEEDS } from "./quality/config.ts";
import { runOne } from "./quality/harness.ts";
import { comparePaired, PAIRED_LEVEL, type PairedComparison } from "./quality/paired.ts";
import { gaieLoraPolicy } from "./quality/policies/gaie-lora.ts";
import { kvroutePolicy } from "./quality/policies/kvroute.ts";
import type { PolicyFactory } from "./quality/policies/types.ts";
import { vllmLegacyPolicy } from "./quality/policies/vllm-dp.ts";
import { benchTokenizer } from "./quality/tokens.ts";
import { adapterNames, LORA_DEFAULTS, loraWorkload } from "./quality/workloads/lora.ts";

const QUICK = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const numbers = (name: string) => arg(name)?.split(",").map(Number);
const flag = (name: string, fallback: number) => Number(arg(name) ?? fallback);
/** Adapter places per rank (vLLM --max-loras; multi-LoRA deployments raise the default 1). */
const MAX_LORAS = flag("max-loras", 4);
/** The simulator's default adapter load (from vLLM's CPU adapter cache). */
const LOAD_MS = 25;
const REQUESTS = QUICK ? 600 : 2000;
const RATES = numbers("rates") ?? (QUICK ? [24, 64] : [16, 32, 64, 96]);
const SEEDS = numbers("seeds") ?? REPORT_SEEDS;
const PROFILES = (arg("profile")?.split(",") ?? BENCH_PROFILES) as LatencyProfileName[];
/** --only=NAME[,NAME]: run only the policies whose names start with one of these. */
const ONLY = arg("only")?.split(",");

const tok = benchTokenizer();
const shape = benchConfig(QUICK, SEEDS[0] as number, 50).cluster;
const adapters = adapterNames(LORA_DEFAULTS.adapters);
// kvroute learns the adapters from its configuration here (the bench has no /v1/models).
/** --gateways=G, --threads=T: kvroute's deployment (default the harness's, 2 × 4); an exploration. */
const deployment = {
  ...(arg("gateways") !== undefined ? { gateways: flag("gateways", 2) } : {}),
  ...(arg("threads") !== undefined ? { threadsPerGateway: flag("threads", 4) } : {}),
};
const kvroute = kvroutePolicy(
  {
    workers: shape.workers,
    ranksPerWorker: shape.ranksPerWorker,
    speculative: true,
    pool: { adapters },
    ...deployment,
  },
  "kvroute",
);
// Variants from the command line (explorations): --kvroute-load-ms, --lora-load-cost, --lora-full-cost.
const variant = kvroutePolicy(
  {
    workers: shape.workers,
    ranksPerWorker: shape.ranksPerWorker,
    speculative: true,
    pool: { adapters },
    load: { scrapeIntervalMs: flag("kvroute-load-ms", 250) },
    routing: {
      lora: {
        loadCost: flag("lora-load-cost", 1024),
        fullCost: flag("lora-full-cost", Math.max(flag("lora-load-cost", 1024), 8192)),
      },
    },
  },
  "kvroute (variant)",
);
const policies: PolicyFactory[] = [
  kvroute,
  ...(process.argv.some((a) => /^--(kvroute-|lora-)/.test(a)) ? [variant] : []),
  gaieLoraPolicy(1),
  gaieLoraPolicy(4),
  vllmLegacyPolicy,
].filter((p) => !ONLY || ONLY.some((o) => p.name.startsWith(o)));

/** Wraps a policy to read the engines' adapter loads when its run ends. */
function counting(p: PolicyFactory, out: { loads: number }): PolicyFactory {
  return {
    ...p,
    create(ctx) {
      const engines: readonly Engine[] = ctx.cluster.engines;
      const inner = p.create(ctx);
      return {
        ...inner,
        choose: inner.choose?.bind(inner),
        close() {
          out.loads = engines.reduce((a, e) => a + e.adapterLoads, 0);
          inner.close?.();
        },
      };
    },
  };
}

interface Run {
  p50: number;
  p90: number;
  p99: number;
  hit: number;
  loads: number;
  tokPerS: number;
  unfinished: number;
  unrouted: number;
}

function measure(profile: LatencyProfileName, seed: number, qps: number, p: PolicyFactory): Run {
  const config = benchConfig(QUICK, seed, 50, profile);
  const cluster = { ...config.cluster, lora: { maxLoras: MAX_LORAS, loadMs: LOAD_MS } };
  const work = loraWorkload(tok, {
    ...LORA_DEFAULTS,
    requests: REQUESTS,
    output: lognormalAround(LORA_DEFAULTS.outputTokens),
    qps: [qps],
    seed,
  });
  const loads = { loads: 0 };
  const r = runOne(work.run(qps), counting(p, loads), cluster, seed, tok.wordIds);
  const m = r.metrics;
  return {
    p50: m.ttftP50,
    p90: m.ttftP90,
    p99: m.ttftP99,
    hit: m.hitRate,
    loads: loads.loads,
    tokPerS: m.outputTokPerS,
    unfinished: r.unfinished,
    unrouted: r.counters.unrouted ?? 0,
  };
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};
const fmt = (v: number) => (Number.isFinite(v) ? v.toFixed(0) : "—");
const verdict = (c: PairedComparison) =>
  c.verdict === "ties"
    ? `ties (${c.lower}/${c.pairs} lower)`
    : `${c.verdict} ${c.medianDiffMs > 0 ? "+" : ""}${c.medianDiffMs.toFixed(Math.abs(c.medianDiffMs) < 10 ? 1 : 0)} ms (${c.medianDiffShare > 0 ? "+" : ""}${(c.medianDiffShare * 100).toFixed(Math.abs(c.medianDiffShare) < 0.1 ? 1 : 0)} %)`;

const sections: string[] = [];
for (const profile of PROFILES) {
  const rows: string[] = [];
  const paired: string[] = [];
  for (const qps of RATES) {
    const runs = new Map<string, Run[]>();
    for (const p of policies) {
      const started = performance.now();
      const per = SEEDS.map((seed) => measure(profile, seed, qps, p));
      runs.set(p.name, per);
      const row = `| ${qps} | ${p.name} | ${fmt(median(per.map((r) => r.p50)))} | ${fmt(median(per.map((r) => r.p90)))} | ${fmt(median(per.map((r) => r.p99)))} | ${(median(per.map((r) => r.hit)) * 100).toFixed(1)}% | ${fmt(median(per.map((r) => r.loads)))} | ${fmt(median(per.map((r) => r.tokPerS)))} | ${per.reduce((a, r) => a + r.unfinished, 0)} | ${p.name.startsWith("kvroute") ? per.reduce((a, r) => a + r.unrouted, 0) : "—"} |`;
      rows.push(row);
      process.stdout.write(`${profile} ${row}  (${((performance.now() - started) / 1000).toFixed(1)} s)\n`);
    }
    const ours = runs.get("kvroute");
    if (ours === undefined) continue;
    for (const [name, theirs] of runs) {
      if (name.startsWith("kvroute")) continue;
      const p90 = comparePaired(
        ours.map((r) => r.p90),
        theirs.map((r) => r.p90),
      );
      const p99 = comparePaired(
        ours.map((r) => r.p99),
        theirs.map((r) => r.p99),
      );
      paired.push(`| ${qps} | ${name} | ${verdict(p90)} | ${verdict(p99)} |`);
    }
  }
  sections.push(`## Cost model ${profile}

Medians over the seeds.

| qps | policy | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | prompt cached | adapter loads | output tok/s | unfinished (all seeds) | not routed by the filter |
|---|---|---|---|---|---|---|---|---|---|
${rows.join("\n")}

kvroute against each peer, seed by seed (kvroute − peer: the median paired difference, and as a share of the peer's value):

| qps | peer | TTFT p90 | TTFT p99 |
|---|---|---|---|
${paired.join("\n")}
`);
}

const md = `# LoRA routing${QUICK ? " (quick)" : ""}

${loraWorkload(tok, { ...LORA_DEFAULTS, requests: REQUESTS, output: lognormalAround(LORA_DEFAULTS.outputTokens), qps: RATES, seed: SEEDS[0] as number }).describe}. Fleet: ${shape.workers} workers × ${shape.ranksPerWorker} DP ranks, ${shape.numGpuBlocks} KV blocks of ${shape.blockSize} per rank, LoRA on every rank: --max-loras ${MAX_LORAS}, adapter load ${LOAD_MS} ms. Seeds ${SEEDS.join(", ")}${SEEDS === REPORT_SEEDS ? " (the report seeds: nothing was tuned on them)" : ""}.

Decisions: per rate and peer, kvroute's TTFT p90 (p99) against the peer's on the same seed (same arrivals), exact two-sided Wilcoxon signed-rank test at ${PAIRED_LEVEL}: leads or trails when significant, else ties.

Policies: ${policies.map((p) => `**${p.name}**: ${p.describe}`).join(" · ")}

${sections.join("\n")}`;
/** A run narrowed from the command line is an exploration: it does not replace the report. */
const exploring =
  ["seeds", "rates", "profile", "only", "gateways", "threads"].some((n) => arg(n) !== undefined) ||
  policies.includes(variant);
const name = `lora${QUICK ? "-quick" : ""}${MAX_LORAS === 4 ? "" : `-max-loras-${MAX_LORAS}`}${exploring ? "-explore" : ""}`;
process.stdout.write(`\nwritten to ${writeResult(name, md)}\n`);
