// LoRA routing (docs/configuration.md "LoRA adapters"): many adapters over one base model with
// Zipf popularity (bench/quality/workloads/lora.ts) on the quality bench's simulated fleet with
// LoRA on (--max-loras places per rank, an adapter load charged to the step that needs it), routed
// by the shipped build/kvroute.wasm (KVROUTE_BENCH_FILTER_WASM names another build) in the Node
// Proxy-Wasm host behind its control plane — the quality harness's virtual-time loop — against
// the peers' behaviour: GAIE's picker with its lora-affinity scorer (policies/gaie-lora.ts) and
// vLLM's own DP balancer. Reported per rate: TTFT, cached share of the prompt, adapter loads.
//   tsx bench/lora.bench.ts [--quick] [--seed=N] [--max-loras=N]
// and, to explore, a second kvroute row with --kvroute-load-ms=MS (scrape period),
// --lora-load-cost=T, --lora-full-cost=T (routing.lora), --inflight-weight=W.
import type { Engine } from "../control-plane/sim/engine.ts";
import { lognormalAround } from "../control-plane/sim/output-lengths.ts";
import { writeResult } from "./lib/results.ts";
import { benchConfig } from "./quality/config.ts";
import { runOne } from "./quality/harness.ts";
import { gaieLoraPolicy } from "./quality/policies/gaie-lora.ts";
import { kvroutePolicy } from "./quality/policies/kvroute.ts";
import type { PolicyFactory } from "./quality/policies/types.ts";
import { vllmLegacyPolicy } from "./quality/policies/vllm-dp.ts";
import { benchTokenizer } from "./quality/tokens.ts";
import { adapterNames, LORA_DEFAULTS, loraWorkload } from "./quality/workloads/lora.ts";

const QUICK = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
const SEED = Number(process.argv.find((a) => a.startsWith("--seed="))?.slice(7) ?? 1);
/** Adapter places per rank (vLLM --max-loras; multi-LoRA deployments raise the default 1). */
const flag = (name: string, fallback: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const MAX_LORAS = flag("max-loras", 4);
/** The simulator's default adapter load (from vLLM's CPU adapter cache). */
const LOAD_MS = 25;
const REQUESTS = QUICK ? 600 : 2000;
const RATES = QUICK ? [24, 64] : [16, 32, 64, 96];

const tok = benchTokenizer();
// The LoRA results were measured under the H100-derived cost model; keep it until they are rerun.
const config = benchConfig(QUICK, SEED, 50, "h100-derived");
const cluster = { ...config.cluster, lora: { maxLoras: MAX_LORAS, loadMs: LOAD_MS } };
const work = loraWorkload(tok, {
  ...LORA_DEFAULTS,
  requests: REQUESTS,
  output: lognormalAround(LORA_DEFAULTS.outputTokens),
  qps: RATES,
  seed: SEED,
});
// kvroute learns the adapters from its configuration here (the bench has no /v1/models).
const kvroute = kvroutePolicy(
  {
    workers: cluster.workers,
    ranksPerWorker: cluster.ranksPerWorker,
    speculative: true,
    pool: { adapters: adapterNames(LORA_DEFAULTS.adapters) },
  },
  "kvroute",
);
// Variants from the command line (explorations): --kvroute-load-ms, --lora-load-cost, --lora-full-cost.
const variant = kvroutePolicy(
  {
    workers: cluster.workers,
    ranksPerWorker: cluster.ranksPerWorker,
    speculative: true,
    pool: { adapters: adapterNames(LORA_DEFAULTS.adapters) },
    load: { scrapeIntervalMs: flag("kvroute-load-ms", 250) },
    routing: {
      lora: {
        loadCost: flag("lora-load-cost", 256),
        fullCost: flag("lora-full-cost", Math.max(flag("lora-load-cost", 256), 4096)),
      },
    },
  },
  "kvroute (variant)",
);
const policies: PolicyFactory[] = [
  kvroute,
  ...(process.argv.some((a) => /^--(kvroute-|lora-|inflight-)/.test(a)) ? [variant] : []),
  gaieLoraPolicy(1),
  gaieLoraPolicy(4),
  vllmLegacyPolicy,
];

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

const rows: string[] = [];
const fmt = (v: number) => (Number.isFinite(v) ? v.toFixed(0) : "—");
for (const qps of RATES) {
  for (const p of policies) {
    const loads = { loads: 0 };
    const started = performance.now();
    const r = runOne(work.run(qps), counting(p, loads), cluster, SEED, tok.wordIds);
    const m = r.metrics;
    const row = `| ${qps} | ${p.name} | ${fmt(m.ttftP50)} | ${fmt(m.ttftP90)} | ${fmt(m.ttftP99)} | ${(m.hitRate * 100).toFixed(1)}% | ${loads.loads} | ${m.outputTokPerS.toFixed(0)} | ${r.unfinished} |`;
    rows.push(row);
    process.stdout.write(`${row}  (${((performance.now() - started) / 1000).toFixed(1)} s)\n`);
  }
}

const md = `# LoRA routing${QUICK ? " (quick)" : ""}

${work.describe}. Fleet: ${cluster.workers} workers × ${cluster.ranksPerWorker} DP ranks, ${cluster.numGpuBlocks} KV blocks of ${cluster.blockSize} per rank, LoRA on every rank: --max-loras ${MAX_LORAS}, adapter load ${LOAD_MS} ms. Seed ${SEED}.

Policies: ${policies.map((p) => `**${p.name}**: ${p.describe}`).join(" · ")}

| qps | policy | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | prompt cached | adapter loads | output tok/s | unfinished |
|---|---|---|---|---|---|---|---|---|
${rows.join("\n")}
`;
process.stdout.write(
  `\nwritten to ${writeResult(`lora${QUICK ? "-quick" : ""}${MAX_LORAS === 4 ? "" : `-max-loras-${MAX_LORAS}`}`, md)}\n`,
);
