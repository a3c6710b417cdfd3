// Where LoRA requests wait, and why: runs the LoRA workload (workloads/lora.ts) for kvroute and
// GAIE's lora-affinity picker on one development seed and prints, per router, the adapters each
// rank served and, for the slowest requests, every engine's running | waiting adapters at the
// moment the router chose. A lab tool beside explore.ts (npm run bench skips it): the evidence
// behind docs/operations.md's LoRA paragraph.
//   npx tsx bench/quality/lora-explore.ts [--seed 1] [--qps 16] [--max-loras 2]
//     [--profile h200-measured] [--gateways 2] [--threads 4] [--gaie-weight 4] [--slow-ms 150]
import type { Engine } from "../../control-plane/sim/engine.ts";
import type { LatencyProfileName } from "../../control-plane/sim/latency.ts";
import { lognormalAround } from "../../control-plane/sim/output-lengths.ts";
import { benchConfig, DEVELOPMENT_SEEDS } from "./config.ts";
import { runOne } from "./harness.ts";
import { gaieLoraPolicy } from "./policies/gaie-lora.ts";
import { kvroutePolicy } from "./policies/kvroute.ts";
import type { PolicyFactory } from "./policies/types.ts";
import { benchTokenizer } from "./tokens.ts";
import { adapterNames, LORA_DEFAULTS, loraWorkload } from "./workloads/lora.ts";

const argv = process.argv.slice(2);
const value = (name: string, fallback: string): string => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? (argv[i + 1] ?? fallback) : fallback;
};
const seed = Number(value("seed", "1"));
if (!DEVELOPMENT_SEEDS.includes(seed))
  throw new Error(`lora-explore uses development seeds only (${DEVELOPMENT_SEEDS.join(",")}), not ${seed}`);
const qps = Number(value("qps", "16"));
const maxLoras = Number(value("max-loras", "2"));
const profile = value("profile", "h200-measured") as LatencyProfileName;
const slowMs = Number(value("slow-ms", "150"));

const tok = benchTokenizer();
const config = benchConfig(false, seed, 50, profile);
const cluster = { ...config.cluster, lora: { maxLoras, loadMs: 25 } };
const work = loraWorkload(tok, {
  ...LORA_DEFAULTS,
  requests: 2000,
  output: lognormalAround(LORA_DEFAULTS.outputTokens),
  qps: [qps],
  seed,
});
const run = work.run(qps);
const adapterOf = new Map(run.arrivals.map((a) => [a.request.id, a.request.lora ?? "-"]));
/** tenant-07-lora → 07 */
const short = (name: string | null | undefined) => (name ? (/(\d+)/.exec(name)?.[1] ?? name) : "-");

const routers: PolicyFactory[] = [
  kvroutePolicy(
    {
      workers: cluster.workers,
      ranksPerWorker: cluster.ranksPerWorker,
      speculative: true,
      pool: { adapters: adapterNames(LORA_DEFAULTS.adapters) },
      gateways: Number(value("gateways", "2")),
      threadsPerGateway: Number(value("threads", "4")),
    },
    "kvroute",
  ),
  gaieLoraPolicy(Number(value("gaie-weight", "4"))),
];

/** Every engine's running | waiting adapters, as text. */
function adapterState(engines: readonly Engine[]): string {
  return engines
    .map((e, i) => {
      const l = e.loraInfo();
      return `${i}:[${(l?.running ?? []).map(short).join(",")}|${(l?.waiting ?? []).map(short).join(",")}]`;
    })
    .join(" ");
}

for (const router of routers) {
  const atDecision = new Map<string, string>();
  const watched: PolicyFactory = {
    ...router,
    create(ctx) {
      const inner = router.create(ctx);
      const choose = inner.choose?.bind(inner);
      return {
        ...inner,
        choose:
          choose === undefined
            ? undefined
            : (view, request) => {
                atDecision.set(request.id, adapterState(ctx.cluster.engines));
                return choose(view, request);
              },
        close: () => inner.close?.(),
      };
    },
  };
  const r = runOne(run, watched, cluster, seed, tok.wordIds);
  const ranks = cluster.workers * cluster.ranksPerWorker;
  process.stdout.write(
    `\n== ${router.name}: TTFT p90 ${r.metrics.ttftP90.toFixed(0)} ms, p99 ${r.metrics.ttftP99.toFixed(0)} ms ` +
      `(seed ${seed}, ${qps} req/s, --max-loras ${maxLoras}, ${profile})\n`,
  );
  for (let k = 0; k < ranks; k++) {
    const served = new Map<string, number>();
    for (const x of r.results) {
      if (x.rank !== k) continue;
      const a = short(adapterOf.get(x.id));
      served.set(a, (served.get(a) ?? 0) + 1);
    }
    const total = [...served.values()].reduce((a, b) => a + b, 0);
    const top = [...served.entries()].sort((a, b) => b[1] - a[1]);
    process.stdout.write(
      `rank ${k}: ${total} requests of ${served.size} adapters: ${top.map(([a, n]) => `${a}×${n}`).join(" ")}\n`,
    );
  }
  const slow = r.results.filter((x) => x.ttftMs > slowMs).sort((a, b) => b.ttftMs - a.ttftMs);
  process.stdout.write(
    `${slow.length} requests over ${slowMs} ms TTFT; the slowest, with the engines' adapters (running|waiting) when it was routed:\n`,
  );
  for (const x of slow.slice(0, 12))
    process.stdout.write(
      `  ${x.id} adapter ${short(adapterOf.get(x.id))} → rank ${x.rank}, TTFT ${x.ttftMs.toFixed(0)} ms; ${atDecision.get(x.id) ?? "?"}\n`,
    );
}
