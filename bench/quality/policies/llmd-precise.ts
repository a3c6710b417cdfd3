// llm-d's precise prefix-cache scheduling as its own guide deploys it (docs/peers.md cites each line).
// Upstream:
// - github.com/llm-d/llm-d guides/precise-prefix-cache-aware/scheduler/
//   precise-prefix-cache-aware.values.yaml @ 955190d9d24fb78d8fb8d0bee3d7e6af4e5beb71 — image
//   llm-d-inference-scheduler v0.8.0-rc.1 (line 16); profile: precise-prefix-cache-scorer weight
//   2.0, kv-cache-utilization-scorer 1.0, queue-scorer 1.0, max-score-picker (lines 103–109); it
//   writes `speculativeIndexing: true` under the scorer's `indexerConfig` (lines 82–83);
// - github.com/llm-d/llm-d-inference-scheduler v0.8.0-rc.1 (72db94559d46b20f53cecd955223d04c90712303)
//   pkg/epp/framework/plugins/scheduling/scorer/preciseprefixcache/precise_prefix_cache.go — the
//   scorer reads `speculativeIndexing` at the top of its parameters (line 77), `indexerConfig`
//   is llm-d-kv-cache's kvcache.Config (line 67), which has no such field (llm-d-kv-cache v0.7.1
//   pkg/kvcache/indexer.go lines 40–45), and json.Unmarshal drops unknown fields (line 137): the
//   deployed scorer runs with speculative indexing OFF. `llm-d-precise (speculative on)` is the
//   variant with it on, at that release's TTL (defaultSpeculativeTTL = 2 s, line 42; PreRequest
//   adds the chosen pod's entries, line 533 on). Scoring: per-pod longest run of consecutive
//   request block keys the index holds (computeScoresFromKeyToPods), min-max normalised over the
//   pods that matched (utils.go line 20: all-equal → 1, unmatched → 0); the index learns from
//   vLLM KV events (llm-d-kv-cache re-derives keys from token_ids).
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
/** defaultSpeculativeTTL at v0.8.0-rc.1 (the release the guide deploys; 30 s at 17abea8). */
export const LLMD_SPECULATIVE_TTL_MS = 2_000;
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

function llmdPrecise(speculative: boolean): PolicyFactory {
  return {
    name: speculative ? "llm-d-precise (speculative on)" : "llm-d-precise",
    describe:
      "llm-d precise prefix-cache scheduling (guide @ 955190d, scheduler v0.8.0-rc.1): 2 · precise prefix (longest held " +
      "block run from KV events, min-max normalised) + 1 · (1 − KV usage) + 1 · queue score; max wins; metrics every 50 ms; " +
      (speculative
        ? `speculative index entries for ${LLMD_SPECULATIVE_TTL_MS / 1000} s (not as deployed: a variant)`
        : "speculative indexing off, as the guide's values deploy it (docs/peers.md)"),
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
          const prefix = normalizedPrefixScores(index.prefixDepths(keys, view.nowMs, speculative));
          const loads = metrics.loads;
          const ranks = Array.from({ length: ctx.ranks }, (_, r) => r);
          const queue = queueScores(ranks.map((r) => loads[r]?.waiting ?? 0));
          const kv = kvCacheScores(ranks.map((r) => loads[r]?.kvUsage ?? 0));
          const rank = pickMax(
            ranks.map((r) => llmdTotal(prefix[r] as number, kv[r] as number, queue[r] as number)),
            rng,
          );
          if (speculative) index.speculate(rank, keys, view.nowMs + LLMD_SPECULATIVE_TTL_MS);
          return rank;
        },
      };
    },
  };
}

/** As deployed by the guide: speculative indexing off. */
export const llmdPrecisePolicy: PolicyFactory = llmdPrecise(false);
/** The labelled variant: speculative indexing on (2 s TTL). */
export const llmdPreciseSpeculativePolicy: PolicyFactory = llmdPrecise(true);
