// GAIE's endpoint picker for a LoRA pool: its approximate prefix, queue and KV-cache scorers
// (gaie-prefix.ts: 3·prefix + 2·queue + 2·KV, the prefix chain seeded with the request's target
// model, here the adapter) plus its lora-affinity scorer:
//   1.0  the adapter has running requests on the server (ActiveModels)
//   0.8  the server has room for another adapter: |active| + |waiting| < max_lora
//   0.6  the adapter is only waiting there
//   0    otherwise
// Upstream: kubernetes-sigs/gateway-api-inference-extension, pkg/epp/scheduling/framework/plugins/
// scorer/lora_affinity.go (LoraAffinityScorer.Score), ActiveModels/WaitingModels/MaxActiveModels
// read from vllm:lora_requests_info's running/waiting adapters and max_lora. GAIE ships no default
// weight for it (its scheduler tests give every scorer 1; KServe's LLMInferenceService injects it
// at 4 for LoRA services): both weights are rows. Metrics every 50 ms (GAIE's refresh).
import type { EngineLoad } from "../../../control-plane/sim/engine.ts";
import { mixSeed, Rng } from "../../../control-plane/sim/rng.ts";
import { MODEL } from "../tokens.ts";
import {
  GAIE_WEIGHTS,
  gaieBlockHashes,
  kvCacheScores,
  pickMax,
  prefixScore,
  queueScores,
} from "./gaie-prefix.ts";
import { LruSet } from "./lru-set.ts";
import { type PolicyFactory, StaleLoads } from "./types.ts";

const METRICS_REFRESH_MS = 50;

/** GAIE's LoraAffinityScorer for one server. */
export function loraAffinityScore(load: EngineLoad | undefined, adapter: string | undefined): number {
  const lora = load?.lora;
  if (adapter === undefined || lora == null) return 0;
  const active = lora.running.includes(adapter);
  const waiting = lora.waiting.includes(adapter);
  if (active) return 1;
  if (lora.running.length + lora.waiting.length < lora.maxLoras) return 0.8;
  if (waiting) return 0.6;
  return 0;
}

export function gaieLoraPolicy(loraWeight: number): PolicyFactory {
  return {
    name: `gaie-lora (weight ${loraWeight})`,
    describe:
      `GAIE approximate prefix scorer (as gaie-approx) + lora-affinity scorer at weight ${loraWeight}: ` +
      "1 adapter running, 0.8 room for another (active + waiting < max_lora), 0.6 adapter waiting, else 0; " +
      "metrics every 50 ms",
    create(ctx) {
      const rng = new Rng(mixSeed(ctx.seed, 0x10a1));
      const lrus = ctx.cluster.engines.map((e) => new LruSet<bigint>(e.config.numGpuBlocks));
      const metrics = new StaleLoads(METRICS_REFRESH_MS);
      return {
        tick: (now, loads) => metrics.tick(now, loads),
        choose(_view, request) {
          const blocks = gaieBlockHashes(request.messagesJson, request.lora ?? MODEL);
          const loads = metrics.loads;
          const queue = queueScores(lrus.map((_, r) => loads[r]?.waiting ?? 0));
          const kv = kvCacheScores(lrus.map((_, r) => loads[r]?.kvUsage ?? 0));
          const totals = lrus.map(
            (lru, r) =>
              GAIE_WEIGHTS.prefix * prefixScore(blocks, lru) +
              GAIE_WEIGHTS.queue * (queue[r] as number) +
              GAIE_WEIGHTS.kvCache * (kv[r] as number) +
              loraWeight * loraAffinityScore(loads[r], request.lora),
          );
          const rank = pickMax(totals, rng);
          const lru = lrus[rank] as LruSet<bigint>;
          for (const b of blocks) lru.touch(b);
          return rank;
        },
      };
    },
  };
}
