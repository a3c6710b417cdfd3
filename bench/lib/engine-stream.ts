// One DP rank's KV events as a vLLM engine publishes them, for the scaling bench's
// `--stream=engine`: the llm-d benchmark's traffic (REFERENCE §6: 60 QPS over 8 pods, a 1.2k-token
// question uncached after its 6k-token system prompt, 1k tokens out, 8,730 output tokens a second
// in all) in the engine's own cadence and event shapes, where the bench's default stream is prompt
// blocks only, a batch every 5 ms. What vLLM does, and so what this does:
// - one batch per scheduler step: the scheduler publishes the KV cache manager's take_events()
//   once a step (vllm/v1/core/sched/scheduler.py);
// - a request's uncached prompt blocks in one BlockStored, in the step that prefills them;
// - each block its decode fills in a BlockStored of its own: allocate_slots caches full blocks up
//   to request.num_tokens, generated tokens included (vllm/v1/core/kv_cache_manager.py) — at the
//   rate the engine writes tokens (the benchmark's output throughput), spread over the requests
//   decoding, each request's blocks a chain;
// - every evicted block in a BlockRemoved of its own (block_pool.py _maybe_evict_cached_block),
//   the oldest stored first.
// Until the KV cache first fills, prompts arrive flat out without decoding (the bench's warm-up),
// in a batch per call.
import type { KvEvent } from "../../control-plane/sim/kv-events.ts";

export interface EngineStreamOptions {
  /** Hashes are this rank's own (unique prompts: no block is shared across ranks). */
  rank: number;
  blockTokens: number;
  /** The KV cache's size in blocks: past it the oldest blocks are evicted. */
  kvBlocks: number;
  /** Requests prefilled a second once the cache is full, and their uncached prompt blocks. */
  requestsPerS: number;
  promptBlocks: number;
  /** Blocks decoding fills a second (output tokens a second / block size), and a request's most. */
  decodeBlocksPerS: number;
  outputBlocks: number;
  /** The engine's step: one batch each. */
  stepMs: number;
  /** Prompt blocks a second stored while the cache fills. */
  fillBlocksPerS: number;
  /** Token ids of block `block` of request `chain`. */
  tokensOf(chain: number, block: number): number[];
}

interface Decoding {
  chain: number;
  /** Hash of the request's last stored block: the parent of the next. */
  last: bigint;
  /** Blocks stored so far (its prompt's and decoded ones). */
  blocks: number;
}

export class EngineStream {
  #nextHash: bigint;
  #chain = 0;
  /** Held blocks' hashes, oldest first, in a ring (no object a block: ~23 M are held at 800 ranks). */
  readonly #held: BigUint64Array;
  #heldStart = 0;
  #heldCount = 0;
  #full = false;
  #debt = 0;
  #decodeDebt = 0;
  #nextStepAt: number;
  #decoding: Decoding[] = [];
  /** The next decoding request to fill a block (they take turns). */
  #turn = 0;

  constructor(private readonly o: EngineStreamOptions) {
    if (o.stepMs <= 0 || o.blockTokens <= 0 || o.promptBlocks <= 0)
      throw new RangeError("stepMs, blockTokens and promptBlocks must be positive");
    this.#nextHash = 2n ** 61n + BigInt(o.rank) * 2n ** 40n;
    let cap = 1;
    while (cap < o.kvBlocks + 4 * o.promptBlocks + 4096) cap <<= 1;
    this.#held = new BigUint64Array(cap);
    this.#nextStepAt = Number.NaN; // set at the first step after the fill
  }

  get full(): boolean {
    return this.#full;
  }

  /** The events of the call's `ms` up to `nowMs` as one batch (an engine step that ended in
   * them), or null when none is due or it has no event. */
  step(ms: number, nowMs: number): KvEvent[] | null {
    if (!this.#full) return this.#fill(ms);
    // Ranks' steps do not all end together: each starts at its own offset.
    if (Number.isNaN(this.#nextStepAt)) this.#nextStepAt = nowMs + ((this.o.rank * 7) % this.o.stepMs);
    if (nowMs < this.#nextStepAt) return null;
    // One step's events however late the call: the bench calls every 5 ms, a step is ≥ that.
    this.#nextStepAt += this.o.stepMs * Math.max(1, Math.ceil((nowMs - this.#nextStepAt) / this.o.stepMs));
    const events: KvEvent[] = [];
    this.#debt += (this.o.requestsPerS * this.o.stepMs) / 1000;
    while (this.#debt >= 1) {
      this.#debt -= 1;
      events.push(this.#prompt(true));
    }
    this.#decode(events);
    this.#evict(events);
    return events.length === 0 ? null : events;
  }

  #fill(ms: number): KvEvent[] | null {
    const events: KvEvent[] = [];
    this.#debt += ((this.o.fillBlocksPerS / this.o.promptBlocks) * ms) / 1000;
    while (this.#debt >= 1 && !this.#full) {
      this.#debt -= 1;
      events.push(this.#prompt(false));
      this.#full = this.#heldCount >= this.o.kvBlocks;
    }
    if (this.#full) this.#debt = 0;
    this.#evict(events);
    return events.length === 0 ? null : events;
  }

  /** A new request's prompt blocks, stored at once; with `decode` it then takes its turns at decoding. */
  #prompt(decode: boolean): KvEvent {
    const chain = this.#chain++;
    const hashes: bigint[] = [];
    const tokenIds: number[] = [];
    for (let b = 0; b < this.o.promptBlocks; b++) {
      const h = this.#hold();
      hashes.push(h);
      for (const t of this.o.tokensOf(chain, b)) tokenIds.push(t);
    }
    const last = hashes[hashes.length - 1] as bigint;
    if (decode) this.#decoding.push({ chain, last, blocks: this.o.promptBlocks });
    return {
      type: "BlockStored",
      blockHashes: hashes,
      parentBlockHash: null,
      tokenIds,
      blockSize: this.o.blockTokens,
      loraName: null,
      extraKeys: null,
    };
  }

  /** The blocks decoding filled this step, each stored on its own, the requests taking turns. */
  #decode(events: KvEvent[]): void {
    this.#decodeDebt += (this.o.decodeBlocksPerS * this.o.stepMs) / 1000;
    while (this.#decodeDebt >= 1 && this.#decoding.length > 0) {
      this.#decodeDebt -= 1;
      if (this.#turn >= this.#decoding.length) this.#turn = 0;
      const r = this.#decoding[this.#turn] as Decoding;
      const h = this.#hold();
      events.push({
        type: "BlockStored",
        blockHashes: [h],
        parentBlockHash: r.last,
        tokenIds: this.o.tokensOf(r.chain, r.blocks),
        blockSize: this.o.blockTokens,
        loraName: null,
        extraKeys: null,
      });
      r.last = h;
      r.blocks++;
      // A request that wrote its output leaves the turns (the next one takes its place).
      if (r.blocks - this.o.promptBlocks >= this.o.outputBlocks) this.#decoding.splice(this.#turn, 1);
      else this.#turn++;
    }
    if (this.#decoding.length === 0) this.#decodeDebt = 0;
  }

  #hold(): bigint {
    const h = this.#nextHash++;
    if (this.#heldCount === this.#held.length) throw new Error("engine stream: held ring overflow");
    this.#held[(this.#heldStart + this.#heldCount) & (this.#held.length - 1)] = h;
    this.#heldCount++;
    return h;
  }

  /** The oldest blocks past the cache's size, one BlockRemoved each. */
  #evict(events: KvEvent[]): void {
    while (this.#heldCount > this.o.kvBlocks) {
      const h = this.#held[this.#heldStart] as bigint;
      this.#heldStart = (this.#heldStart + 1) & (this.#held.length - 1);
      this.#heldCount--;
      events.push({ type: "BlockRemoved", blockHashes: [h] });
    }
  }
}
