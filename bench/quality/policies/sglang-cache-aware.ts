// sgl-router's cache-aware policy, with its default thresholds. Upstream:
// sgl-project/sglang sgl-router/src/policies/cache_aware.rs @ b6f20641ad6bafc1278db74d1e13b0e9da47bd64
// (CacheAwarePolicy::select_worker; the header's rule, lines 12–30) and sgl-router/src/tree.rs
// (Tree::get_smallest_tenant: the tenant with the fewest characters in the tree):
// - load = requests the router has in flight at each worker;
// - imbalanced when max − min > 64 (balance_abs_threshold) and max > 1.5 · min
//   (balance_rel_threshold): then the least-loaded worker;
// - otherwise the worker whose text tree matches the longest prefix of the request text, if
//   matched / text length > 0.3 (cache_threshold); else the worker with the SMALLEST TREE
//   (get_smallest_tenant; ties → whichever the map yields first, here random);
// - the chosen worker's tree then takes the whole text.
// Each DP rank is one worker here (sgl-router's --dp-aware mode). The tree is the chunked
// prefix set of text-prefix-set.ts over the message contents joined (sgl-router routes on the
// request text, not tokens); its bound is sgl-router's max_tree_size default 2^26 characters.
import { mixSeed, Rng } from "../../../control-plane/sim/rng.ts";
import { TEXT_CHUNK, TextPrefixSet, textPrefixHashes } from "./text-prefix-set.ts";
import type { PolicyFactory } from "./types.ts";

export const SGLANG_THRESHOLDS = { cache: 0.3, balanceAbs: 64, balanceRel: 1.5 } as const;
const MAX_TREE_CHARS = 2 ** 26;

export function isImbalanced(loads: readonly number[]): boolean {
  const max = Math.max(...loads);
  const min = Math.min(...loads);
  return max - min > SGLANG_THRESHOLDS.balanceAbs && max > SGLANG_THRESHOLDS.balanceRel * min;
}

/** Lowest load; ties broken by `rng`. */
export function leastLoaded(loads: readonly number[], rng: Rng): number {
  const min = Math.min(...loads);
  const tied = loads.flatMap((l, i) => (l === min ? [i] : []));
  return tied[tied.length === 1 ? 0 : rng.int(tied.length)] as number;
}

/** The rule itself: loads, matched characters per worker, text length, characters in each
 * worker's tree → worker. */
export function sglangChoose(
  loads: readonly number[],
  matched: readonly number[],
  textChars: number,
  treeChars: readonly number[],
  rng: Rng,
): number {
  if (isImbalanced(loads)) return leastLoaded(loads, rng);
  let best = 0;
  for (let w = 1; w < matched.length; w++) if ((matched[w] as number) > (matched[best] as number)) best = w;
  const rate = textChars === 0 ? 0 : (matched[best] as number) / textChars;
  // Below the threshold: the smallest tree (the lowest "load" by tree size; same tie rule).
  return rate > SGLANG_THRESHOLDS.cache ? best : leastLoaded(treeChars, rng);
}

export const sglangCacheAwarePolicy: PolicyFactory = {
  name: "sglang-cache-aware",
  describe:
    "sgl-router cache-aware: imbalanced (max−min > 64 and max > 1.5·min in-flight) → least loaded; else best text-prefix " +
    "match if > 30% of the text, else the smallest tree; per-worker 16-char chunked prefix set",
  create(ctx) {
    const rng = new Rng(mixSeed(ctx.seed, 0x51a6));
    const trees = Array.from({ length: ctx.ranks }, () => new TextPrefixSet(MAX_TREE_CHARS / TEXT_CHUNK));
    const inflight = new Array<number>(ctx.ranks).fill(0);
    return {
      choose(_view, request) {
        const prefixes = textPrefixHashes(request.routingText);
        const matched = trees.map((t) => t.matchChars(prefixes));
        const rank = sglangChoose(
          inflight,
          matched,
          request.routingText.length,
          trees.map((t) => t.chars),
          rng,
        );
        (trees[rank] as TextPrefixSet).insert(prefixes);
        inflight[rank] = (inflight[rank] as number) + 1;
        return rank;
      },
      done(result) {
        inflight[result.rank] = Math.max(0, (inflight[result.rank] as number) - 1);
      },
    };
  },
};
