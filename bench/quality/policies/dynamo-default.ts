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
// - the router queue: lib/llm/src/kv_router/queue.rs @ db19bd2 (SchedulerQueue; scheduler.rs
//   builds it from kv_router_config.router_queue_threshold): while EVERY rank's active prefill
//   tokens exceed threshold × max_num_batched_tokens (all_workers_busy), a new request waits in
//   a FIFO (priority_jump 0); mark_prefill_completed and free call update(), which selects and
//   books waiting requests, oldest first, while some rank is below the threshold. The threshold
//   is DYNAMO_DEFAULTS.queueThreshold (docs/peers.md says where the default comes from).
// A router learns a request's first token from its response stream; here the policy hears it
// at the first token's virtual time (the harness's firstToken) and marks the prefill complete.
import { mixSeed, Rng } from "../../../control-plane/sim/rng.ts";
import type { BenchRequest } from "../workloads/types.ts";
import { EventBlockIndex } from "./event-block-index.ts";
import { chainBlockKeys } from "./token-blocks.ts";
import type { PolicyFactory, RoutingPolicy } from "./types.ts";

export const DYNAMO_DEFAULTS = { overlapScoreWeight: 1, temperature: 0, queueThreshold: 4.0 } as const;

/** SchedulerQueue::all_workers_busy: no rank's active prefill tokens are at or below the threshold. */
export function allWorkersBusy(
  activeTokens: readonly number[],
  threshold: number,
  maxBatched: number,
): boolean {
  return activeTokens.every((t) => t > threshold * maxBatched);
}

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
    "its KV-event index (events as late as kvroute's), prefill tokens dropped at the first token; router queue " +
    `(queue.rs): requests wait while every rank has > ${DYNAMO_DEFAULTS.queueThreshold} × max_num_batched_tokens of ` +
    "active prefill tokens",
  create(ctx): RoutingPolicy {
    const rng = new Rng(mixSeed(ctx.seed, 0xd1a0));
    const index = new EventBlockIndex(ctx.ranks, ctx.blockSize, ctx.kvEventDelayMs);
    const seqs = Array.from({ length: ctx.ranks }, () => new ActiveSequences());
    const rankOf = new Map<string, number>();
    const maxBatched = ctx.cluster.engines[0]?.config.maxNumBatchedTokens ?? 8192;
    /** The router queue (FIFO: every priority_jump is 0) and the ranks chosen for released requests. */
    const waiting: BenchRequest[] = [];
    const released = new Map<string, number>();
    let queued = 0;
    const busy = () =>
      allWorkersBusy(
        seqs.map((s) => s.activeTokens),
        DYNAMO_DEFAULTS.queueThreshold,
        maxBatched,
      );
    /** SchedulerQueue::schedule: select a rank and book the request there. */
    const schedule = (request: BenchRequest, nowMs: number): number => {
      index.advance(nowMs);
      const keys = chainBlockKeys(request.tokens, ctx.blockSize);
      const overlap = index.prefixDepths(keys, nowMs);
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
    };
    /** SchedulerQueue::update: book waiting requests, oldest first, while some rank has room. */
    const update = (nowMs: number) => {
      while (waiting.length > 0 && !busy()) {
        const request = waiting.shift() as BenchRequest;
        released.set(request.id, schedule(request, nowMs));
        ctx.release(request);
      }
    };
    return {
      kvEvents: (rank, events, atMs) => index.receive(rank, events, atMs),
      tick: (now) => index.advance(now),
      choose(view, request) {
        const booked = released.get(request.id);
        if (booked !== undefined) {
          released.delete(request.id);
          return booked;
        }
        if (busy()) {
          waiting.push(request);
          queued++;
          return null;
        }
        return schedule(request, view.nowMs);
      },
      firstToken(id, _rank, atMs) {
        const rank = rankOf.get(id);
        if (rank === undefined) return;
        (seqs[rank] as ActiveSequences).markPrefillCompleted(id);
        update(atMs);
      },
      done(result) {
        const rank = rankOf.get(result.id);
        if (rank === undefined) return;
        (seqs[rank] as ActiveSequences).free(result.id);
        rankOf.delete(result.id);
        update(result.finishMs);
      },
      counters: () => ({ queued }),
    };
  },
};
