// An optional CPU offload tier behind one engine's GPU prefix cache, after vLLM's native
// offloading connector (vLLM ≥ 0.11, `OffloadingConnector` with a CPU backend): a cached block
// the GPU evicts is kept in host memory, up to `capacity` blocks, least recently used first out.
// A request whose prefix continues in the tier loads those blocks back instead of computing them
// (the engine charges the load time, latency.ts). Events follow the connector's:
// `BlockStored(medium="CPU", token_ids=[], parent_block_hash=None)` naming the blocks by hash when
// a copy lands here, `BlockRemoved(medium="CPU")` when the tier evicts it.
import type { BlockHash } from "./block-hash.ts";
import { type KvEvent, MEDIUM_CPU } from "./kv-events.ts";

export class CpuTier {
  /** Insertion order is recency: the first key is the least recently used. */
  private readonly blocks = new Map<BlockHash, true>();

  constructor(
    readonly capacity: number,
    private readonly blockSize: number,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError("capacity must be a positive integer");
  }

  get size(): number {
    return this.blocks.size;
  }

  has(hash: BlockHash): boolean {
    return this.blocks.has(hash);
  }

  /** A load back to the GPU makes the copy the most recently used. */
  touch(hash: BlockHash): void {
    if (!this.blocks.delete(hash)) return;
    this.blocks.set(hash, true);
  }

  /** Keeps a copy of a block the GPU evicts; the events to publish, in order. */
  offload(hash: BlockHash): KvEvent[] {
    if (this.blocks.has(hash)) {
      this.touch(hash);
      return [];
    }
    const out: KvEvent[] = [];
    if (this.blocks.size >= this.capacity) {
      const lru = this.blocks.keys().next().value as BlockHash;
      this.blocks.delete(lru);
      out.push({ type: "BlockRemoved", blockHashes: [lru], medium: MEDIUM_CPU });
    }
    this.blocks.set(hash, true);
    out.push({
      type: "BlockStored",
      blockHashes: [hash],
      parentBlockHash: null,
      tokenIds: [],
      blockSize: this.blockSize,
      loraName: null,
      extraKeys: null,
      medium: MEDIUM_CPU,
    });
    return out;
  }

  clear(): void {
    this.blocks.clear();
  }

  cachedHashes(): BlockHash[] {
    return [...this.blocks.keys()];
  }
}
