// llm-d's precise prefix-cache scheduling, with the scorer weights of llm-d's own guide.
// Upstream:
// - github.com/llm-d/llm-d guides/precise-prefix-cache-aware/scheduler/
//   precise-prefix-cache-aware.values.yaml @ 955190d9d24fb78d8fb8d0bee3d7e6af4e5beb71 — profile:
//   precise-prefix-cache-scorer weight 2.0 (speculativeIndexing: true), kv-cache-utilization-scorer
//   1.0, queue-scorer 1.0, max-score-picker;
// - github.com/llm-d/llm-d-inference-scheduler pkg/plugins/scorer/precise_prefix_cache.go
//   @ 17abea8af978e6d8b49ac03834e0317884f07525 — block keys from the request's tokens (the
//   engine's block size; full blocks), per-pod longest prefix of consecutive keys the index holds
//   (computeScoresFromKeyToPods), min-max normalised over the pods that matched
//   (indexedScoresToNormalizedScoredPods: all-equal → 1, unmatched → 0); PreRequest adds
//   speculative entries for every key on the chosen pod, evicted after defaultSpeculativeTTL
//   30 s (REFERENCE §4 says 2 s; this commit says 30 s); the index learns from vLLM KV events
//   (llm-d-kv-cache re-derives keys from token_ids).
// - queue-scorer and kv-cache-utilization-scorer are GAIE's: (max − q)/(max − min) over waiting
//   queues (1 when all equal) and 1 − KV usage, from metrics refreshed every 50 ms; the
//   max-score picker breaks ties at random (gaie-prefix.ts holds both scorers).
// KV events reach the index `kvEventDelayMs` after publication, the same delay kvroute's control
// plane gets. Each DP rank is one endpoint (llm-d addresses ranks by port).
import { mixSeed, Rng } from "../../../control-plane/sim/rng.ts";
import { EventBlockIndex } from "./event-block-index.ts";
import { kvCacheScores, pickMax, queueScores } from "./gaie-prefix.ts";
import { chainBlockKeys } from "./token-blocks.ts";
import { type PolicyFactory, type RoutingPolicy, StaleLoads } from "./types.ts";

export const LLMD_WEIGHTS = { precisePrefix: 2, kvCache: 1, queue: 1 } as const;
export const LLMD_SPECULATIVE_TTL_MS = 30_000;
const METRICS_REFRESH_MS = 50;

/** indexedScoresToNormalizedScoredPods over per-rank match depths (0 = not in the score map). */
export function normalizedPrefixScores(depths: readonly number[]): number[] {
  const matched = depths.filter((d) => d > 0);
  if (matched.length === 0) return depths.map(() => 0);
  const min = Math.min(...matched);
  const max = Math.max(...matched);
  return depths.map((d) => (d === 0 ? 0 : max === min ? 1 : (d - min) / (max - min)));
}

export function llmdTotal(prefix: number, kvCache: number, queue: number): number {
  return LLMD_WEIGHTS.precisePrefix * prefix + LLMD_WEIGHTS.kvCache * kvCache + LLMD_WEIGHTS.queue * queue;
}

export const llmdPrecisePolicy: PolicyFactory = {
  name: "llm-d-precise",
  describe:
    "llm-d precise prefix-cache scheduling (guide @ 955190d): 2 · precise prefix (longest held block run from KV events, " +
    "min-max normalised; speculative entries for 30 s) + 1 · (1 − KV usage) + 1 · queue score; max wins; metrics every 50 ms",
  create(ctx): RoutingPolicy {
    const rng = new Rng(mixSeed(ctx.seed, 0x11d7));
    const index = new EventBlockIndex(ctx.ranks, ctx.blockSize, ctx.kvEventDelayMs);
    const metrics = new StaleLoads(METRICS_REFRESH_MS);
    return {
      kvEvents: (rank, events, atMs) => index.receive(rank, events, atMs),
      tick(now, loads) {
        metrics.tick(now, loads);
        index.advance(now);
      },
      choose(view, request) {
        index.advance(view.nowMs);
        const keys = chainBlockKeys(request.tokens, ctx.blockSize);
        const prefix = normalizedPrefixScores(index.prefixDepths(keys, view.nowMs, true));
        const loads = metrics.loads;
        const ranks = Array.from({ length: ctx.ranks }, (_, r) => r);
        const queue = queueScores(ranks.map((r) => loads[r]?.waiting ?? 0));
        const kv = kvCacheScores(ranks.map((r) => loads[r]?.kvUsage ?? 0));
        const rank = pickMax(
          ranks.map((r) => llmdTotal(prefix[r] as number, kv[r] as number, queue[r] as number)),
          rng,
        );
        index.speculate(rank, keys, view.nowMs + LLMD_SPECULATIVE_TTL_MS);
        return rank;
      },
    };
  },
};
