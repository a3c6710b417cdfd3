// One slot's KV blocks, as its engine reported them, turned into chunk hashes. Each stored
// block keeps the chunk-hashing state at its end (the last chunk hash and the bytes of the
// unfinished chunk), so a child block continues the chain without re-reading its ancestors.
//
// The blocks live in the Wasm core (filter/core/block-table.ts): one heap record per block in
// linear memory, found by u64 open addressing, which hashes and feeds the chunk index itself.
// This side detokenizes (the vocabulary tables are JavaScript's) and moves a whole event across
// in one call — hashes, byte lengths, last tokens and bytes back to back in the I/O region — so
// a block costs no JavaScript object, no BigInt map key and no call of its own.
//
// A block is known once, whatever medium holds it, and carries the set of tiers it is on
// (tier.ts): with offloading the engine stores it on the GPU, copies it to CPU (often as a
// placeholder store naming the hash only), and may evict the GPU copy while the CPU one stays.
// Each tier's copy is added to and removed from the chunk index on its own; the block (and its
// chaining state, which children need) goes when no tier holds it any more. A second store of
// a copy already held (vLLM's kv_cache_report_mode="full" reports reused blocks again) changes
// nothing.

import { core } from "../core/core-wasm.ts";
import { SEQUENCE_START } from "../tokens/detokenize.ts";
import type { TokenBytesTable } from "../tokens/token-bytes-table.ts";
import type { BlockRemoved, BlockStored } from "../vocabulary/kv-events.ts";
import { addAppliedBatchDrops, scannedRootKeys } from "./batch-fast-path.ts";
import type { ChunkIndex } from "./chunk-index.ts";
import { coreTokenTable } from "./core-token-table.ts";
import { type Tier, tierOfMedium } from "./tier.ts";

/** The routing core's chained chunk hashing (filter/core), as the index needs it: the chain's h0 and the chunk size. */
export interface ChunkHasher {
  readonly chunkSize: number;
  /** h0 of a stream: model, LoRA and cache salt (docs/wire-format.md §3). */
  rootHash(model: string, lora: string, cacheSalt: string): bigint;
}

/**
 * Token ids → the bytes the engine tokenized, or null for an id the vocabulary lacks. The
 * result may be a view of a buffer the next call overwrites: consume it at once.
 * `previous` is the token before ids[0] (-1 at the start of a sequence): metaspace
 * vocabularies need it for their leading-space rule.
 */
export type Detokenize = (ids: ArrayLike<number>, previous: number) => Uint8Array | null;

export interface SlotBlockStats {
  blocks: number;
  storedBlocks: number;
  removedBlocks: number;
  /** A BlockStored whose parent we never saw (missed events): its chain cannot be hashed. */
  orphanBlocks: number;
  unknownRemovals: number;
  /** Stores of a copy already held (re-announced or reused blocks): nothing changes. */
  duplicateStores: number;
  /** Copies added on a tier other than the GPU (CPU, storage). */
  lowerTierStores: number;
  /** Placeholder stores (hash only) naming a block never seen with its tokens: not indexable. */
  unresolvedPlaceholders: number;
  /** Blocks on a medium kvroute does not know (tier.ts): not indexed. */
  unknownMediumBlocks: number;
  /** Blocks with token ids outside the vocabulary (wrong tokenizer configured?): dropped. */
  undetokenizableBlocks: number;
  /** Blocks dropped because the slot reached its cap (the least recently stored go first). */
  evictedBlocks: number;
}

/** BlockTable.lookup's answers (filter/core/block-table.ts): the parent is not held; no token. */
const STORE_ORPHAN = -2;
const NO_TOKEN = 0xffffffff;

/** How many blocks a slot holds at most before the least recently stored go (DESIGN §9: bounded memory). */
export const DEFAULT_MAX_BLOCKS_PER_SLOT = 1 << 20;
/** The largest chunk size a block table takes: a block's record keeps its unfinished chunk's
 * length in 16 bits (filter/core/block-table.ts), and the configuration allows no more. */
export const MAX_CHUNK_SIZE = 65536;

/** Frees the core's block table of a SlotBlocks that was collected (its chunks left the index in clear(), or the index went too). */
const tables = new FinalizationRegistry<number>((id) => core().ex.blockTableFree(id, 0));

export interface SlotBlocksOptions {
  /** Blocks held at most; past it the least recently stored go (default DEFAULT_MAX_BLOCKS_PER_SLOT). */
  maxBlocks?: number;
  /**
   * The vocabulary `detokenize` reads (when it is a token-bytes table): then whole events are
   * detokenized in the core, which is the fast path; without it `detokenize` is called per block.
   */
  tokenTable?: TokenBytesTable | null;
}

export class SlotBlocks {
  readonly #core = core();
  /** The core's counters of the last call (ingest-io.ts ingestStatsPtr: a fixed address), in i32 units. */
  readonly #statsAt = this.#core.ex.ingestStatsPtr() >>> 2;
  readonly #table: number;
  /** The core's copy of the vocabulary (core-token-table.ts), or null: detokenize in JavaScript. */
  readonly #tokens: number | null;
  /** h0 of a chain stored without LoRA or salt, for the batch fast path, as u32 halves. */
  #plainRoot: [lo: number, hi: number] | null = null;
  /** The model's UTF-8: the core's fast path hashes LoRA and salted roots from it
   * (rootHash's layout, kvroute-core.ts; the equivalence test holds it to hasher.rootHash). */
  #modelBytes: Uint8Array | null = null;
  /** Detokenized bytes of the event being stored, staged before they go to the core in one copy. */
  #bytes = new Uint8Array(4096);
  /** One block's token ids (reused: no slice per block). */
  readonly #ids: number[] = [];
  /** Per block of the event being stored: byte lengths, then last tokens. */
  #lens = new Uint32Array(64);
  readonly stats: SlotBlockStats = {
    blocks: 0,
    storedBlocks: 0,
    removedBlocks: 0,
    orphanBlocks: 0,
    unknownRemovals: 0,
    duplicateStores: 0,
    lowerTierStores: 0,
    unresolvedPlaceholders: 0,
    unknownMediumBlocks: 0,
    undetokenizableBlocks: 0,
    evictedBlocks: 0,
  };

  constructor(
    readonly slot: number,
    private readonly model: string,
    index: ChunkIndex,
    private readonly hasher: ChunkHasher,
    private readonly detokenize: Detokenize,
    opts: SlotBlocksOptions = {},
  ) {
    const maxBlocks = opts.maxBlocks ?? DEFAULT_MAX_BLOCKS_PER_SLOT;
    if (!Number.isInteger(maxBlocks) || maxBlocks < 1 || maxBlocks > 0xffffffff)
      throw new RangeError(`maxBlocks must be a positive integer (got ${maxBlocks})`);
    const chunk = hasher.chunkSize;
    if (!Number.isInteger(chunk) || chunk < 1 || chunk > MAX_CHUNK_SIZE)
      throw new RangeError(`chunkSize must be an integer from 1 to ${MAX_CHUNK_SIZE} (got ${chunk})`);
    this.#table = this.#core.ex.blockTableNew(index.tableId, slot, hasher.chunkSize, maxBlocks);
    tables.register(this, this.#table, this);
    this.#tokens = opts.tokenTable == null ? null : coreTokenTable(opts.tokenTable);
  }

  /** Writes the hashes at the start of an I/O region of at least `bytes` (≥ 8 per hash); returns its address. */
  #writeHashes(hashes: readonly bigint[], bytes: number): number {
    const ptr = this.#core.io(bytes);
    const u64 = this.#core.u64view;
    const at = ptr >>> 3;
    for (let i = 0; i < hashes.length; i++) u64[at + i] = hashes[i] as bigint;
    return ptr;
  }

  /** Adds the counters of the core's last store/remove call (ingest-io.ts ingestStatsPtr). */
  #count(): void {
    const v = this.#core.i32view;
    const at = this.#statsAt;
    const s = this.stats;
    s.storedBlocks += v[at] as number;
    s.duplicateStores += v[at + 1] as number;
    s.lowerTierStores += v[at + 2] as number;
    s.removedBlocks += v[at + 3] as number;
    s.unknownRemovals += v[at + 4] as number;
    s.evictedBlocks += v[at + 5] as number;
    s.blocks = v[at + 6] as number;
  }

  stored(event: BlockStored, nowMs: number): void {
    const tier = tierOfMedium(event.medium);
    const n = event.hashes.length;
    if (tier === null) {
      this.stats.unknownMediumBlocks += n;
      return;
    }
    const c = this.#core;
    const ex = c.ex;
    if (event.tokenIds.length === 0) {
      const ptr = this.#writeHashes(event.hashes, 8 * n);
      this.stats.unresolvedPlaceholders += ex.blockCopiesIo(this.#table, ptr, n, tier, nowMs);
      this.#count();
      return;
    }
    const hasParent = event.parent === null ? 0 : 1;
    const parent = event.parent ?? 0n;
    if (this.#tokens !== null) {
      this.#storeTokens(event, tier, hasParent, parent, nowMs, this.#tokens);
      return;
    }
    // Pass 1: which blocks are held (those are not detokenized again), and the parent's last token.
    let ptr = this.#writeHashes(event.hashes, 8 * n);
    if (ex.blockLookupIo(this.#table, ptr, n, hasParent, parent) === STORE_ORPHAN) {
      this.stats.orphanBlocks += n;
      return;
    }
    if (this.#lens.length < 2 * n) this.#lens = new Uint32Array(4 * n);
    const lens = this.#lens; // [0, n): byte lengths, [n, 2n): last tokens
    const heldView = c.u32view;
    const heldAt = ex.ingestOutPtr() >>> 2;
    // Pass 2: detokenize the new blocks, each after the token its chain really ends with.
    const size = event.blockSize;
    const tokens = event.tokenIds;
    const ids = this.#ids;
    ids.length = size;
    let total = 0;
    let count = n;
    const parentLast = heldView[heldAt] as number;
    let previous = parentLast === NO_TOKEN ? SEQUENCE_START : parentLast;
    for (let i = 0; i < n; i++) {
      const held = heldView[heldAt + 1 + i] as number;
      if (held !== NO_TOKEN) {
        lens[i] = 0;
        lens[n + i] = held;
        previous = held;
        continue;
      }
      const base = i * size;
      for (let k = 0; k < size; k++) ids[k] = tokens[base + k] as number;
      const bytes = this.detokenize(ids, previous);
      if (bytes === null) {
        // Its descendants in this event cannot be hashed either.
        this.stats.undetokenizableBlocks += n - i;
        count = i;
        break;
      }
      if (total + bytes.length > this.#bytes.length) {
        const grown = new Uint8Array(Math.max(2 * this.#bytes.length, total + bytes.length));
        grown.set(this.#bytes.subarray(0, total));
        this.#bytes = grown;
      }
      this.#bytes.set(bytes, total);
      total += bytes.length;
      lens[i] = bytes.length;
      previous = tokens[base + size - 1] ?? previous;
      lens[n + i] = previous;
    }
    if (count === 0) return;
    // h0 first: rootHash uses the I/O region too.
    const root =
      hasParent === 1 ? 0n : this.hasher.rootHash(this.model, event.loraName ?? "", event.cacheSalt ?? "");
    // One call: hashes u64 × count, byte lengths u32 × count, last tokens u32 × count, bytes. The
    // hashes of pass 1 are still in place unless the I/O region had to grow (or rootHash wrote it).
    const need = 16 * count + total;
    const again = hasParent === 0 || c.io(need) !== ptr || count !== n;
    ptr = again ? this.#writeHashes(count === n ? event.hashes : event.hashes.slice(0, count), need) : ptr;
    const u32 = c.u32view;
    const lensAt = (ptr + 8 * count) >>> 2;
    u32.set(lens.subarray(0, count), lensAt);
    u32.set(lens.subarray(n, n + count), lensAt + count);
    c.u8.set(this.#bytes.subarray(0, total), ptr + 16 * count);
    ex.blockStoreIo(this.#table, ptr, count, tier, hasParent, parent, root, nowMs);
    this.#count();
  }

  /** One call for the whole event: hashes u64 × n, then the token ids u32 × n·blockSize. */
  #storeTokens(
    event: BlockStored,
    tier: Tier,
    hasParent: number,
    parent: bigint,
    nowMs: number,
    tokens: number,
  ): void {
    const c = this.#core;
    const n = event.hashes.length;
    // h0 first: rootHash uses the I/O region too.
    const root =
      hasParent === 1 ? 0n : this.hasher.rootHash(this.model, event.loraName ?? "", event.cacheSalt ?? "");
    const ptr = this.#writeHashes(event.hashes, 8 * n + 4 * event.tokenIds.length);
    c.u32view.set(event.tokenIds, (ptr + 8 * n) >>> 2);
    const r = c.ex.blockStoreTokensIo(
      this.#table,
      tokens,
      ptr,
      n,
      event.blockSize,
      tier,
      hasParent,
      parent,
      root,
      nowMs,
    );
    if (r === STORE_ORPHAN) {
      this.stats.orphanBlocks += n;
      return;
    }
    this.stats.undetokenizableBlocks += r;
    this.#count();
  }

  /** Whether applyScannedBatch can serve this slot (the core detokenizes only with a token table). */
  get takesBatches(): boolean {
    return this.#tokens !== null;
  }

  /** Computes what applyScannedBatch needs before a payload goes into the I/O region (rootHash uses it). */
  prepareBatch(): void {
    if (this.#plainRoot === null) {
      const root = this.hasher.rootHash(this.model, "", "");
      this.#plainRoot = [Number(root & 0xffffffffn), Number(root >> 32n)];
    }
  }

  /** Applies the batch the core's fast path scanned last (batch-fast-path.ts); prepareBatch() first. */
  applyScannedBatch(nowMs: number): void {
    if (this.#tokens === null || this.#plainRoot === null) throw new Error("slot not prepared for batches");
    let modelPtr = 0;
    let modelLen = 0;
    if (scannedRootKeys()) {
      // The payload the core read is staged in its plan by now: the I/O region is free.
      this.#modelBytes ??= new TextEncoder().encode(this.model);
      [modelLen = 0] = this.#core.writeIo(this.#modelBytes);
      modelPtr = this.#core.io(modelLen);
    }
    const [lo, hi] = this.#plainRoot;
    this.#core.ex.batchApply(this.#table, this.#tokens, lo, hi, modelPtr, modelLen, nowMs);
    this.#count();
    addAppliedBatchDrops(this.stats);
  }

  /** Removes the copy on the event's medium; the block stays while another tier holds it. */
  removed(event: BlockRemoved): void {
    const tier = tierOfMedium(event.medium);
    if (tier === null) return;
    const n = event.hashes.length;
    const ptr = this.#writeHashes(event.hashes, 8 * n);
    this.#core.ex.blockRemoveIo(this.#table, ptr, n, tier);
    this.#count();
  }

  /** AllBlocksCleared, an engine restart, or a gap replay could not cover. */
  clear(): void {
    this.#core.ex.blockClear(this.#table);
    this.stats.blocks = 0;
  }

  /** Frees the core's table now (its chunks stay in the index: clear() first to take them out); unusable after. */
  dispose(): void {
    if (tables.unregister(this)) this.#core.ex.blockTableFree(this.#table, 0);
  }

  get blockCount(): number {
    return this.#core.ex.blockCount(this.#table);
  }

  /** Bytes of linear memory the slot's blocks hold (records at the allocator's granularity, lookup table). */
  get bytes(): number {
    return this.#core.ex.blockTableBytes(this.#table);
  }

  /** The engine block hashes indexed for this slot (for checks against the engine's own view). */
  blockHashes(): IterableIterator<bigint> {
    const n = this.#core.ex.blockHashesIo(this.#table);
    const at = this.#core.ex.ingestOutPtr() >>> 3;
    return Array.from(this.#core.u64view.subarray(at, at + n)).values();
  }
}
