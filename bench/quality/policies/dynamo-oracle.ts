// Dynamo's KV-router cost at temperature 0 (REFERENCE §3), given exact token-level knowledge —
// the "oracle-tokenized" peer: it sees the simulator's real token ids, each rank's real cache
// (the longest cached prefix right now, no event delay) and each rank's real queue.
//   cost = overlap_weight · prefill_blocks + active_decode_blocks        (weights 1)
//   prefill_blocks = (active_prefill_tokens + request_tokens − cached_tokens) / block_size
// active_prefill_tokens: prompt tokens still to compute on the rank — exact for running
// requests, and for waiting ones what was uncached when they were routed (Dynamo's own
// bookkeeping). active_decode_blocks: like Dynamo's active-sequence tracker, the *distinct*
// prompt blocks of the requests active on the rank (shared prefixes count once) plus the blocks
// their answers have filled so far. Lowest cost wins; ties: fewer cached blocks (Dynamo's
// "smaller tree"), then random.
import type { Engine } from "../../../control-plane/sim/engine.ts";
import { mixSeed, Rng } from "../../../control-plane/sim/rng.ts";
import type { ClusterView } from "../../../control-plane/sim/virtual-cluster.ts";
import { tokenBlockKeys } from "./token-blocks.ts";
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

/** Refcounted distinct block keys of the requests active on one rank. */
export class ActiveBlocks {
  readonly #counts = new Map<number, number>();

  add(keys: readonly number[]): void {
    for (const k of keys) this.#counts.set(k, (this.#counts.get(k) ?? 0) + 1);
  }

  remove(keys: readonly number[]): void {
    for (const k of keys) {
      const n = this.#counts.get(k) ?? 0;
      if (n <= 1) this.#counts.delete(k);
      else this.#counts.set(k, n - 1);
    }
  }

  get distinct(): number {
    return this.#counts.size;
  }
}

/** Exact outstanding work of one engine; `uncachedAtRoute` covers requests not yet scheduled. */
export function engineWork(
  engine: Engine,
  uncachedAtRoute: ReadonlyMap<string, number>,
  promptBlocks: number,
): RankWork {
  const bs = engine.config.blockSize;
  let activePrefillTokens = 0;
  let answerBlocks = 0;
  for (const r of engine.running) {
    if (r.numComputed < r.numPromptTokens) activePrefillTokens += r.numPromptTokens - r.numComputed;
    answerBlocks += Math.floor(r.outputTokens / bs);
  }
  for (const r of engine.waiting) activePrefillTokens += uncachedAtRoute.get(r.spec.id) ?? r.numPromptTokens;
  return { activePrefillTokens, activeDecodeBlocks: promptBlocks + answerBlocks };
}

export interface OracleChooser {
  choose(view: ClusterView, id: string, tokens: readonly number[]): number;
  /** The request left its rank: forget its bookkeeping. */
  done(id: string): void;
}

/** The oracle's choice for a prompt; shared with the ideal bound. */
export function dynamoOracleChooser(ctx: PolicyContext): OracleChooser {
  const rng = new Rng(mixSeed(ctx.seed, 0xd1a0));
  const uncachedAtRoute = new Map<string, number>();
  const active = Array.from({ length: ctx.ranks }, () => new ActiveBlocks());
  const routed = new Map<string, { rank: number; keys: number[] }>();
  const choose = (view: ClusterView, id: string, tokens: readonly number[]): number => {
    let best: number[] = [];
    let bestCost = Number.POSITIVE_INFINITY;
    let bestTree = 0;
    for (let r = 0; r < ctx.ranks; r++) {
      const work = engineWork(
        ctx.cluster.engines[r] as Engine,
        uncachedAtRoute,
        (active[r] as ActiveBlocks).distinct,
      );
      const cost = dynamoCost(work, tokens.length, view.cachedPrefixTokens(r), ctx.blockSize);
      const tree = view.loads[r]?.numCachedBlocks ?? 0;
      if (cost < bestCost - 1e-9) {
        best = [r];
        bestCost = cost;
        bestTree = tree;
      } else if (cost <= bestCost + 1e-9) {
        if (tree < bestTree) {
          best = [r];
          bestTree = tree;
        } else if (tree === bestTree) best.push(r);
      }
    }
    const rank = best[best.length === 1 ? 0 : rng.int(best.length)] as number;
    uncachedAtRoute.set(id, tokens.length - view.cachedPrefixTokens(rank));
    const keys = tokenBlockKeys(tokens, ctx.blockSize);
    (active[rank] as ActiveBlocks).add(keys);
    routed.set(id, { rank, keys });
    return rank;
  };
  const done = (id: string) => {
    uncachedAtRoute.delete(id);
    const r = routed.get(id);
    if (r === undefined) return;
    (active[r.rank] as ActiveBlocks).remove(r.keys);
    routed.delete(id);
  };
  return { choose, done };
}

export const dynamoOraclePolicy: PolicyFactory = {
  name: "dynamo-oracle",
  describe:
    "Dynamo KV cost, temperature 0, overlap weight 1: uncached prefill blocks + active (distinct) blocks, from the " +
    "simulator's exact token ids, caches and queues (no event delay)",
  create(ctx): RoutingPolicy {
    const oracle = dynamoOracleChooser(ctx);
    return {
      choose: (view, request) => oracle.choose(view, request.id, request.tokens),
      done: (result) => oracle.done(result.id),
    };
  },
};
