// The upper bound: a cluster whose prefix cache is global and infinite — any token prefix that
// any earlier request computed (prompt or answer) is free on every rank — routed by the Dynamo
// oracle's exact least-work cost. The simulator cannot share a cache across ranks, so each
// prompt is submitted without its already-computed prefix (keeping at least one token, as
// vLLM always computes one) and the skipped tokens count as cache hits. KV memory is then
// understated too; that only makes the bound looser, never tighter.
import { dynamoOracleChooser } from "./dynamo-oracle.ts";
import { tokenBlockKeys } from "./token-blocks.ts";
import type { PolicyFactory, RoutingPolicy } from "./types.ts";

/** Tokens of `ids` that a global cache holding `seen` already has (capped at length − 1). */
export function globallyCachedTokens(
  ids: readonly number[],
  seen: ReadonlySet<number>,
  blockSize: number,
): number {
  const keys = tokenBlockKeys(ids, blockSize);
  let n = 0;
  while (n < keys.length && seen.has(keys[n] as number)) n++;
  return Math.min(n * blockSize, ids.length - 1);
}

export const idealPolicy: PolicyFactory = {
  name: "ideal-bound",
  describe:
    "upper bound on hit rate: a global infinite prefix cache (every prefix computed before is free on any rank), routed " +
    "by the Dynamo oracle's cost — its TTFT is what that cost achieves with such a cache, so a router may beat it on TTFT",
  create(ctx): RoutingPolicy {
    const seen = new Set<number>();
    const skipped = new Map<string, number>();
    const submitted = new Map<string, readonly number[]>();
    const oracle = dynamoOracleChooser(ctx);
    const remember = (ids: readonly number[]) => {
      for (const k of tokenBlockKeys(ids, ctx.blockSize)) seen.add(k);
    };
    return {
      submitTokens(request) {
        const skip = globallyCachedTokens(request.tokens, seen, ctx.blockSize);
        skipped.set(request.id, skip);
        remember(request.tokens);
        const tokens = request.tokens.slice(skip);
        submitted.set(request.id, tokens);
        return tokens;
      },
      choose: (view, request) => oracle.choose(view, request.id, submitted.get(request.id) ?? request.tokens),
      done(result, request) {
        oracle.done(result.id);
        submitted.delete(result.id);
        remember(request.tokens.concat(result.outputTokenIds));
      },
      extraCachedTokens: (request) => skipped.get(request.id) ?? 0,
    };
  },
};
