// One slot's KV blocks, as its engine reported them, turned into chunk hashes. Each stored
// block keeps the chunk-hashing state at its end (the last chunk hash and the bytes of the
// unfinished chunk), so a child block continues the chain without re-reading its ancestors.
//
// A block is known once, whatever medium holds it, and carries the set of tiers it is on
// (tier.ts): with offloading the engine stores it on the GPU, copies it to CPU (often as a
// placeholder store naming the hash only), and may evict the GPU copy while the CPU one stays.
// Each tier's copy is added to and removed from the chunk index on its own; the block (and its
// chaining state, which children need) goes when no tier holds it any more. A second store of
// a copy already held (vLLM's kv_cache_report_mode="full" reports reused blocks again) changes
// nothing.
import type { BlockRemoved, BlockStored } from "../events/types.ts";
import type { ChunkIndex } from "./chunk-index.ts";
import { TIER_COUNT, type Tier, tierOfMedium } from "./tier.ts";

export interface ChunkState {
  /** Hash of the last complete chunk (h0 at the start of a stream). */
  prev: bigint;
  /** Bytes of the chunk being filled (shorter than the chunk size). */
  partial: Uint8Array;
}

/** The routing core's chained chunk hashing (filter/core, through the Wasm loader). */
export interface ChunkHasher {
  initialState(model: string, lora: string, cacheSalt: string): ChunkState;
  feed(state: ChunkState, bytes: Uint8Array): { hashes: ArrayLike<bigint>; state: ChunkState };
}

/**
 * Token ids → the bytes the engine tokenized, or null for an id the vocabulary lacks. The
 * result may be a view of a buffer the next call overwrites: consume it at once.
 * `previous` is the token before ids[0] (-1 at the start of a sequence): metaspace
 * vocabularies need it for their leading-space rule.
 */
export type Detokenize = (ids: ArrayLike<number>, previous: number) => Uint8Array | null;

const NO_CHUNKS: bigint[] = [];

interface Block {
  state: ChunkState;
  /** Last token id of the block: the `previous` of a child block's detokenization. */
  lastToken: number;
  /** Chunks completed so far along this chain, including this block's. */
  depth: number;
  /** Chunk hashes completed inside this block (removed with it). */
  chunks: bigint[];
  /** Bit t set: a copy is on tier t. */
  tiers: number;
}

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
}

export class SlotBlocks {
  readonly #blocks = new Map<bigint, Block>();
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
  };

  constructor(
    readonly slot: number,
    private readonly model: string,
    private readonly index: ChunkIndex,
    private readonly hasher: ChunkHasher,
    private readonly detokenize: Detokenize,
  ) {}

  /** Adds the tier's copy of a known block; false when that copy was already held. */
  #addCopy(block: Block, tier: Tier, nowMs: number): boolean {
    const bit = 1 << tier;
    if ((block.tiers & bit) !== 0) {
      this.stats.duplicateStores++;
      return false;
    }
    block.tiers |= bit;
    const first = block.depth - block.chunks.length;
    for (let k = 0; k < block.chunks.length; k++)
      this.index.add(block.chunks[k] as bigint, first + k + 1, this.slot, nowMs, tier);
    if (tier !== 0) this.stats.lowerTierStores++;
    return true;
  }

  stored(event: BlockStored, nowMs: number): void {
    const tier = tierOfMedium(event.medium);
    if (tier === null) {
      this.stats.unknownMediumBlocks += event.hashes.length;
      return;
    }
    if (event.tokenIds.length === 0) {
      for (const hash of event.hashes) {
        const block = this.#blocks.get(hash);
        if (block === undefined) this.stats.unresolvedPlaceholders++;
        else this.#addCopy(block, tier, nowMs);
      }
      return;
    }
    let state: ChunkState;
    let depth = 0;
    let previous = -1;
    if (event.parent === null) {
      state = this.hasher.initialState(this.model, event.loraName ?? "", event.cacheSalt ?? "");
    } else {
      const parent = this.#blocks.get(event.parent);
      if (parent === undefined) {
        this.stats.orphanBlocks += event.hashes.length;
        return;
      }
      state = parent.state;
      depth = parent.depth;
      previous = parent.lastToken;
    }
    const size = event.blockSize;
    for (let i = 0; i < event.hashes.length; i++) {
      const hash = event.hashes[i] as bigint;
      const existing = this.#blocks.get(hash);
      if (existing !== undefined) {
        // A block we hold (same content by construction): maybe a copy on another tier.
        this.#addCopy(existing, tier, nowMs);
        state = existing.state;
        depth = existing.depth;
        previous = existing.lastToken;
        continue;
      }
      const ids = event.tokenIds.slice(i * size, (i + 1) * size);
      const bytes = this.detokenize(ids, previous);
      if (bytes === null) {
        // Its descendants in this event cannot be hashed either.
        this.stats.undetokenizableBlocks += event.hashes.length - i;
        break;
      }
      const fed = this.hasher.feed(state, bytes);
      // Most 16-token blocks complete no chunk: share one empty list instead of allocating.
      const chunks: bigint[] = fed.hashes.length === 0 ? NO_CHUNKS : [];
      for (let k = 0; k < fed.hashes.length; k++) {
        const h = fed.hashes[k] as bigint;
        chunks.push(h);
        this.index.add(h, depth + k + 1, this.slot, nowMs, tier);
      }
      depth += chunks.length;
      state = fed.state;
      previous = ids[ids.length - 1] ?? previous;
      this.#blocks.set(hash, { state, lastToken: previous, depth, chunks, tiers: 1 << tier });
      this.stats.storedBlocks++;
      if (tier !== 0) this.stats.lowerTierStores++;
    }
    this.stats.blocks = this.#blocks.size;
  }

  /** Removes the copy on the event's medium; the block stays while another tier holds it. */
  removed(event: BlockRemoved): void {
    const tier = tierOfMedium(event.medium);
    if (tier === null) return;
    const bit = 1 << tier;
    for (const hash of event.hashes) {
      const block = this.#blocks.get(hash);
      if (block === undefined || (block.tiers & bit) === 0) {
        this.stats.unknownRemovals++;
        continue;
      }
      for (const h of block.chunks) this.index.remove(h, this.slot, tier);
      block.tiers &= ~bit;
      if (block.tiers === 0) this.#blocks.delete(hash);
      this.stats.removedBlocks++;
    }
    this.stats.blocks = this.#blocks.size;
  }

  /** AllBlocksCleared, an engine restart, or a gap replay could not cover. */
  clear(): void {
    for (const block of this.#blocks.values())
      for (let t = 0; t < TIER_COUNT; t++)
        if ((block.tiers & (1 << t)) !== 0)
          for (const h of block.chunks) this.index.remove(h, this.slot, t as Tier);
    this.#blocks.clear();
    this.stats.blocks = 0;
  }

  get blockCount(): number {
    return this.#blocks.size;
  }

  /** The engine block hashes indexed for this slot (for checks against the engine's own view). */
  blockHashes(): IterableIterator<bigint> {
    return this.#blocks.keys();
  }
}
