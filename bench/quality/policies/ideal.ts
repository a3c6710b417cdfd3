// The ideal bound: not a router but two limits no router can pass on this simulator.
// - Hit-rate ceiling: a global, infinite prefix cache. A request's prompt counts as cached as far
//   as (whole blocks, at most prompt − 1 tokens, as vLLM computes the last token) it repeats a
//   prompt that arrived before it or the prompt + answer of a request that finished before it.
//   A rank's cache can only hold blocks some earlier request computed, so no router caches more
//   of any request. (With closed-loop workloads the order of follow-ups depends on the router;
//   ours extend only their own session, whose earlier turns precede them under every router,
//   and share with other sessions only what those sessions' first calls already sent.)
// - TTFT floor: each request's first-token time if it ran alone on an idle rank with that
//   ceiling's cache hit (control-plane/sim/latency.ts isolatedPrefillMs: every step term is
//   non-negative, other requests only add to a step, and the time falls as the hit grows). Each
//   request's TTFT under any router is at least its floor, so every percentile of the floors is
//   at most that percentile for any router. E2E floor: the floor plus the request's decode
//   steps alone (overhead + per-sequence + reading its own context's KV).
// The run itself is routed by least outstanding requests (exact loads) with full prompts, so
// the answers, and the follow-ups built from them, are the same as every router gets.
import { DEFAULT_LATENCY, isolatedPrefillMs, type LatencyModel } from "../../../control-plane/sim/latency.ts";
import { percentile, type RunMetrics } from "../metrics.ts";
import { chainBlockKeys } from "./token-blocks.ts";
import type { PolicyFactory, RoutingPolicy } from "./types.ts";

/** Tokens of `ids` that a global cache holding `seen` already has (capped at length − 1). */
export function globallyCachedTokens(
  ids: readonly number[],
  seen: ReadonlySet<number>,
  blockSize: number,
): number {
  const keys = chainBlockKeys(ids, blockSize);
  let n = 0;
  while (n < keys.length && seen.has(keys[n] as number)) n++;
  return Math.min(n * blockSize, ids.length - 1);
}

/** Decode steps of `outputTokens − 1` tokens alone after a prompt of `promptTokens`. */
export function isolatedDecodeMs(model: LatencyModel, promptTokens: number, outputTokens: number): number {
  const steps = Math.max(0, outputTokens - 1);
  // Step i (1-based) reads promptTokens + i tokens of context.
  const contextRead = steps * promptTokens + (steps * (steps + 1)) / 2;
  return steps * (model.stepOverheadMs + model.decodePerSeqMs) + contextRead * (model.kvReadPerTokenMs ?? 0);
}

interface Bounded {
  promptTokens: number;
  cachedTokens: number;
  ttftFloorMs: number;
  e2eFloorMs: number;
}

/** The bound's own columns: hit ceiling, TTFT / E2E floors; the rest is not a bound (NaN). */
export function boundMetrics(rows: readonly Bounded[], base: RunMetrics): RunMetrics {
  const ttft = rows.map((r) => r.ttftFloorMs).sort((a, b) => a - b);
  const e2e = rows.map((r) => r.e2eFloorMs).sort((a, b) => a - b);
  const prompt = rows.reduce((s, r) => s + r.promptTokens, 0);
  const cached = rows.reduce((s, r) => s + r.cachedTokens, 0);
  return {
    ...base,
    ttftP50: percentile(ttft, 50),
    ttftP90: percentile(ttft, 90),
    ttftP99: percentile(ttft, 99),
    e2eP50: percentile(e2e, 50),
    e2eP90: percentile(e2e, 90),
    hitRate: prompt === 0 ? 0 : cached / prompt,
    outputTokPerS: Number.NaN,
    requestImbalance: Number.NaN,
    prefillImbalance: Number.NaN,
  };
}

export const idealPolicy: PolicyFactory = {
  name: "ideal-bound",
  describe:
    "bounds, not a router: hit-rate ceiling = a global infinite prefix cache (any prefix sent or answered before is " +
    "free); TTFT/E2E floors = each request alone on an idle rank with that hit (no router beats either)",
  create(ctx): RoutingPolicy {
    const engine = ctx.cluster.engines[0];
    const model = engine?.config.latency ?? DEFAULT_LATENCY;
    const budget = engine?.config.maxNumBatchedTokens ?? 8192;
    const seen = new Set<number>();
    const cachedAt = new Map<string, number>();
    const rows: Bounded[] = [];
    const remember = (ids: readonly number[]) => {
      for (const k of chainBlockKeys(ids, ctx.blockSize)) seen.add(k);
    };
    return {
      submitTokens(request) {
        cachedAt.set(request.id, globallyCachedTokens(request.tokens, seen, ctx.blockSize));
        remember(request.tokens);
        return request.tokens;
      },
      choose(view) {
        let best = 0;
        for (let r = 1; r < view.loads.length; r++) {
          const a = view.loads[r];
          const b = view.loads[best];
          if (a !== undefined && b !== undefined && a.running + a.waiting < b.running + b.waiting) best = r;
        }
        return best;
      },
      done(result, request) {
        const cached = cachedAt.get(request.id) ?? 0;
        cachedAt.delete(request.id);
        const ttft = isolatedPrefillMs(model, request.tokens.length, cached, budget);
        rows.push({
          promptTokens: request.tokens.length,
          cachedTokens: cached,
          ttftFloorMs: ttft,
          e2eFloorMs: ttft + isolatedDecodeMs(model, request.tokens.length, result.outputTokens),
        });
        remember(request.tokens.concat(result.outputTokenIds));
      },
      bound: (base) => boundMetrics(rows, base),
    };
  },
};
