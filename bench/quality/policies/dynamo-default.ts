// Dynamo's KV router with its default selector, term by term, at its defaults.
// Upstream (github.com/ai-dynamo/dynamo):
// - lib/llm/src/kv_router/scheduler.rs @ db19bd2a659d4cb04998fb4101cd0dbfbbeba9d4 —
//   DefaultWorkerSelector::select_worker, softmax_sample;
// - lib/llm/src/kv_router/sequence.rs @ 581ee33e434f3f99b84f6ea99fcf0a3fda26a685 —
//   ActiveSequences: add_request, new_blocks, potential_blocks_and_tokens,
//   mark_prefill_completed, free;
// - lib/llm/src/kv_router.rs (the same generation) — KvRouterConfig::default: overlap_score_weight
//   1.0, router_temperature 0.0, use_kv_events true, router_track_active_blocks true,
//   router_track_output_blocks false, router_assume_kv_reuse true.
// Per (worker, dp_rank) — here per rank:
//   logit = overlap_score_weight · potential_prefill_tokens / block_size + potential_decode_blocks
//   potential_prefill_tokens = active_tokens + (isl − overlap · block_size)
//   potential_decode_blocks  = active_blocks + new_blocks
// - overlap: blocks of the request, from the first, that the rank holds in Dynamo's radix tree
//   of KV events (here the same events, `kvEventDelayMs` late, as kvroute gets them);
// - active_tokens: Σ over the rank's active requests of the prefill tokens booked at routing
//   (isl − overlap · block_size), each dropped at that request's first token
//   (mark_prefill_completed) or when it ends (free);
// - active_blocks: distinct prompt-block hashes of the rank's active requests (prompts only:
//   output blocks are not tracked by default); new_blocks: the request's blocks not among them;
// - temperature 0: the lowest logit; ties → the smaller tree (blocks the rank holds in the
//   index) when tree sizes differ, else uniformly at random.
// A router learns a request's first token from its response stream; here the policy sees it
// in the engine's request state (outputTokens > 0) at the next routing decision.
import type { Engine } from "../../../control-plane/sim/engine.ts";
import { mixSeed, Rng } from "../../../control-plane/sim/rng.ts";
import { EventBlockIndex } from "./event-block-index.ts";
import { chainBlockKeys } from "./token-blocks.ts";
import type { PolicyFactory, RoutingPolicy } from "./types.ts";

export const DYNAMO_DEFAULTS = { overlapScoreWeight: 1, temperature: 0 } as const;

/** potential_prefill_tokens / block_size. */
export function potentialPrefillBlocks(
  activeTokens: number,
  isl: number,
  overlapBlocks: number,
  blockSize: number,
): number {
  return (activeTokens + Math.max(0, isl - overlapBlocks * blockSize)) / blockSize;
}

/** potential_decode_blocks. */
export function potentialDecodeBlocks(activeBlocks: number, newBlocks: number): number {
  return activeBlocks + newBlocks;
}

export function dynamoLogit(prefillBlocks: number, decodeBlocks: number, overlapWeight: number): number {
  return overlapWeight * prefillBlocks + decodeBlocks;
}

/** Temperature 0: the lowest logit; among ties the smallest tree if the trees differ, else random. */
export function pickLowestLogit(logits: readonly number[], treeSizes: readonly number[], rng: Rng): number {
  const min = Math.min(...logits);
  const tied = logits.flatMap((l, i) => (l === min ? [i] : []));
  if (tied.length === 1) return tied[0] as number;
  const trees = tied.map((i) => treeSizes[i] ?? 0);
  const smallest = Math.min(...trees);
  const pool = trees.every((t) => t === smallest) ? tied : tied.filter((_, k) => trees[k] === smallest);
  return pool[pool.length === 1 ? 0 : rng.int(pool.length)] as number;
}

/** One rank's ActiveSequences. */
export class ActiveSequences {
  readonly #prefill = new Map<string, number>();
  readonly #blocks = new Map<string, readonly number[]>();
  readonly #refs = new Map<number, number>();
  activeTokens = 0;

  get activeBlocks(): number {
    return this.#refs.size;
  }

  newBlocks(keys: readonly number[]): number {
    let n = 0;
    for (const k of keys) if (!this.#refs.has(k)) n++;
    return n;
  }

  add(id: string, keys: readonly number[], prefillTokens: number): void {
    this.#prefill.set(id, prefillTokens);
    this.activeTokens += prefillTokens;
    this.#blocks.set(id, keys);
    for (const k of keys) this.#refs.set(k, (this.#refs.get(k) ?? 0) + 1);
  }

  hasPendingPrefill(id: string): boolean {
    return this.#prefill.has(id);
  }

  markPrefillCompleted(id: string): void {
    const t = this.#prefill.get(id);
    if (t === undefined) return;
    this.#prefill.delete(id);
    this.activeTokens -= t;
  }

  free(id: string): void {
    this.markPrefillCompleted(id);
    for (const k of this.#blocks.get(id) ?? []) {
      const n = this.#refs.get(k) ?? 0;
      if (n <= 1) this.#refs.delete(k);
      else this.#refs.set(k, n - 1);
    }
    this.#blocks.delete(id);
  }
}

export const dynamoDefaultPolicy: PolicyFactory = {
  name: "dynamo",
  describe:
    "Dynamo KV router, default selector (scheduler.rs @ db19bd2): overlap weight 1 × (active prefill tokens + uncached " +
    "tokens) / block + (active prompt blocks + new blocks), temperature 0, ties → smaller tree then random; overlap from " +
    "its KV-event index (events as late as kvroute's), prefill tokens dropped at the first token",
  create(ctx): RoutingPolicy {
    const rng = new Rng(mixSeed(ctx.seed, 0xd1a0));
    const index = new EventBlockIndex(ctx.ranks, ctx.blockSize, ctx.kvEventDelayMs);
    const seqs = Array.from({ length: ctx.ranks }, () => new ActiveSequences());
    const rankOf = new Map<string, number>();
    const engines = ctx.cluster.engines as Engine[];
    const noticeFirstTokens = () => {
      engines.forEach((engine, r) => {
        const s = seqs[r] as ActiveSequences;
        for (const req of engine.running) if (req.outputTokens > 0) s.markPrefillCompleted(req.spec.id);
      });
    };
    return {
      kvEvents: (rank, events, atMs) => index.receive(rank, events, atMs),
      tick: (now) => index.advance(now),
      choose(view, request) {
        index.advance(view.nowMs);
        noticeFirstTokens();
        const keys = chainBlockKeys(request.tokens, ctx.blockSize);
        const overlap = index.prefixDepths(keys, view.nowMs);
        const isl = request.tokens.length;
        const logits = seqs.map((s, r) =>
          dynamoLogit(
            potentialPrefillBlocks(s.activeTokens, isl, overlap[r] as number, ctx.blockSize),
            potentialDecodeBlocks(s.activeBlocks, s.newBlocks(keys)),
            DYNAMO_DEFAULTS.overlapScoreWeight,
          ),
        );
        const rank = pickLowestLogit(logits, index.sizes, rng);
        (seqs[rank] as ActiveSequences).add(
          request.id,
          keys,
          Math.max(0, isl - (overlap[rank] as number) * ctx.blockSize),
        );
        rankOf.set(request.id, rank);
        return rank;
      },
      done(result) {
        const rank = rankOf.get(result.id);
        if (rank === undefined) return;
        (seqs[rank] as ActiveSequences).free(result.id);
        rankOf.delete(result.id);
      },
    };
  },
};
