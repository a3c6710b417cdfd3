// Dynamo's KV-router cost at temperature 0 (REFERENCE §3), given exact token-level knowledge —
// the "oracle-tokenized" peer: it sees the simulator's real token ids, each rank's real cache
// (the longest cached prefix right now, no event delay) and each rank's real queue.
//   cost = overlap_weight · prefill_blocks + active_decode_blocks        (weights 1)
//   prefill_blocks = (active_prefill_tokens + request_tokens − cached_tokens) / block_size
// active_prefill_tokens: prompt tokens still to compute on the rank — exact for running
// requests, and for waiting ones what was uncached when they were routed (Dynamo's own
// bookkeeping); active_decode_blocks: blocks of every active sequence (Dynamo de-duplicates
// shared blocks; a plain sum here). Lowest cost wins; ties: fewer cached blocks (Dynamo's
// "smaller tree"), then random.
import type { Engine } from "../../../control-plane/sim/engine.ts";
import { mixSeed, Rng } from "../../../control-plane/sim/rng.ts";
import type { ClusterView } from "../../../control-plane/sim/virtual-cluster.ts";
import type { PolicyContext, PolicyFactory, RoutingPolicy } from "./types.ts";

export const DYNAMO_WEIGHTS = { overlap: 1 } as const;

export interface RankWork {
  activePrefillTokens: number;
  activeDecodeBlocks: number;
}

export function dynamoCost(
  work: RankWork,
  requestTokens: number,
  cachedTokens: number,
  blockSize: number,
): number {
  const prefillBlocks = (work.activePrefillTokens + requestTokens - cachedTokens) / blockSize;
  return DYNAMO_WEIGHTS.overlap * prefillBlocks + work.activeDecodeBlocks;
}

/** Exact outstanding work of one engine; `uncachedAtRoute` covers requests not yet scheduled. */
export function engineWork(engine: Engine, uncachedAtRoute: ReadonlyMap<string, number>): RankWork {
  const bs = engine.config.blockSize;
  let activePrefillTokens = 0;
  let activeDecodeBlocks = 0;
  for (const r of engine.running) {
    if (r.numComputed < r.numPromptTokens) activePrefillTokens += r.numPromptTokens - r.numComputed;
    activeDecodeBlocks += Math.ceil(r.tokens.length / bs);
  }
  for (const r of engine.waiting) {
    activePrefillTokens += uncachedAtRoute.get(r.spec.id) ?? r.numPromptTokens;
    activeDecodeBlocks += Math.ceil(r.tokens.length / bs);
  }
  return { activePrefillTokens, activeDecodeBlocks };
}

export interface OracleChooser {
  choose(view: ClusterView, id: string, tokens: number): number;
  /** The request left its rank: forget its routing-time record. */
  done(id: string): void;
}

/** The oracle's choice for a prompt of `tokens` tokens; shared with the ideal bound. */
export function dynamoOracleChooser(ctx: PolicyContext): OracleChooser {
  const rng = new Rng(mixSeed(ctx.seed, 0xd1a0));
  const uncachedAtRoute = new Map<string, number>();
  const choose = (view: ClusterView, id: string, tokens: number): number => {
    let best: number[] = [];
    let bestCost = Number.POSITIVE_INFINITY;
    let bestCached = 0;
    for (let r = 0; r < ctx.ranks; r++) {
      const cached = view.cachedPrefixTokens(r);
      const cost = dynamoCost(
        engineWork(ctx.cluster.engines[r] as Engine, uncachedAtRoute),
        tokens,
        cached,
        ctx.blockSize,
      );
      const treeSize = view.loads[r]?.numCachedBlocks ?? 0;
      if (cost < bestCost - 1e-9) {
        best = [r];
        bestCost = cost;
        bestCached = treeSize;
      } else if (cost <= bestCost + 1e-9) {
        if (treeSize < bestCached) {
          best = [r];
          bestCached = treeSize;
        } else if (treeSize === bestCached) best.push(r);
      }
    }
    const rank = best[best.length === 1 ? 0 : rng.int(best.length)] as number;
    uncachedAtRoute.set(id, tokens - view.cachedPrefixTokens(rank));
    return rank;
  };
  return { choose, done: (id) => uncachedAtRoute.delete(id) };
}

export const dynamoOraclePolicy: PolicyFactory = {
  name: "dynamo-oracle",
  describe:
    "Dynamo KV cost, temperature 0, overlap weight 1: uncached prefill blocks + active decode blocks, from the " +
    "simulator's exact token ids, caches and queues (no event delay)",
  create(ctx): RoutingPolicy {
    const oracle = dynamoOracleChooser(ctx);
    return {
      choose: (view, request) => oracle.choose(view, request.id, request.tokens.length),
      done: (result) => oracle.done(result.id),
    };
  },
};
