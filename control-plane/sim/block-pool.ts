// One engine's paged KV cache with prefix caching, modelled on vLLM's BlockPool:
// - `numBlocks` physical blocks; a block is in use (ref count > 0) or free;
// - free blocks sit in an LRU queue; a free block may still hold a cached hash, and is
//   evicted (hash forgotten, `BlockRemoved` emitted) only when it is reused for new data;
// - blocks are freed tail-first, so a request's last blocks are evicted before its first ones
//   (a shared prefix outlives the suffixes that hang off it);
// - a cache hit on a free block takes it out of the free queue ("touch").
// Every change of the set of cached hashes is reported as an event, so a subscriber that
// applies the events sees exactly `cachedContents()` (and, with a CPU tier, the tier's blocks:
// an evicted block's CPU copy is announced before its GPU removal, as an offloading engine's
// copy exists before the GPU block is reused).
import type { BlockHash } from "./block-hash.ts";
import type { CpuTier } from "./cpu-tier.ts";
import type { KvEvent } from "./kv-events.ts";

export interface CachedBlockInfo {
  parent: BlockHash | null;
  tokenIds: number[];
}

export class BlockPool {
  readonly numBlocks: number;
  private readonly refCount: Int32Array;
  private readonly blockHash: (BlockHash | null)[];
  // Free queue as an intrusive doubly linked list over block ids; -1 = none.
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private head = -1;
  private tail = -1;
  private freeCount = 0;
  private readonly cached = new Map<BlockHash, number>();
  private readonly info = new Map<BlockHash, CachedBlockInfo>();
  private pending: KvEvent[] = [];

  constructor(
    numBlocks: number,
    readonly cpu: CpuTier | null = null,
  ) {
    if (!Number.isInteger(numBlocks) || numBlocks < 1)
      throw new RangeError("numBlocks must be a positive integer");
    this.numBlocks = numBlocks;
    this.refCount = new Int32Array(numBlocks);
    this.blockHash = new Array(numBlocks).fill(null);
    this.prev = new Int32Array(numBlocks).fill(-1);
    this.next = new Int32Array(numBlocks).fill(-1);
    for (let b = 0; b < numBlocks; b++) this.pushTail(b);
  }

  get numFreeBlocks(): number {
    return this.freeCount;
  }

  get numCachedBlocks(): number {
    return this.cached.size;
  }

  /** vLLM's `kv_cache_usage_perc`: the fraction of blocks not free (cached-but-free counts as free). */
  get usage(): number {
    return 1 - this.freeCount / this.numBlocks;
  }

  /** Number of leading hashes present in the cache. */
  longestCachedPrefix(hashes: readonly BlockHash[], maxBlocks: number): number {
    const n = Math.min(hashes.length, maxBlocks);
    let i = 0;
    while (i < n && this.cached.has(hashes[i] as BlockHash)) i++;
    return i;
  }

  /** Blocks a request would need beyond what it can touch from the cache: for admission checks. */
  canAllocate(n: number): boolean {
    return n <= this.freeCount;
  }

  /** Takes references on the cached blocks of the first `n` hashes (which must all be cached). */
  touch(hashes: readonly BlockHash[], n: number): number[] {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const b = this.cached.get(hashes[i] as BlockHash);
      if (b === undefined) throw new Error("touch: block is not cached");
      if (this.refCount[b] === 0) this.unlink(b);
      this.refCount[b] = (this.refCount[b] as number) + 1;
      out.push(b);
    }
    return out;
  }

  /** How many of `touch(hashes, n)`'s blocks are currently free (they leave the free queue). */
  freeAmongCached(hashes: readonly BlockHash[], n: number): number {
    let c = 0;
    for (let i = 0; i < n; i++) {
      const b = this.cached.get(hashes[i] as BlockHash);
      if (b !== undefined && this.refCount[b] === 0) c++;
    }
    return c;
  }

  /** Allocates `n` blocks from the head of the free queue, evicting cached ones; null if short. */
  allocate(n: number): number[] | null {
    if (n > this.freeCount) return null;
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const b = this.head;
      this.unlink(b);
      const h = this.blockHash[b];
      if (h != null) {
        if (this.cpu !== null) this.pending.push(...this.cpu.offload(h));
        this.cached.delete(h);
        this.info.delete(h);
        this.blockHash[b] = null;
        this.pending.push({ type: "BlockRemoved", blockHashes: [h] });
      }
      this.refCount[b] = 1;
      out.push(b);
    }
    return out;
  }

  /**
   * Registers a full block under its hash. Returns false (and leaves the block private) when
   * another block already holds that hash: two requests computed the same prefix at once.
   * vLLM keeps both copies under one hash, which makes its removal events ambiguous; keeping
   * one copy keeps the event stream an exact description of the cache.
   */
  cacheBlock(block: number, hash: BlockHash, parent: BlockHash | null, tokenIds: number[]): boolean {
    if (this.cached.has(hash) || this.blockHash[block] != null) return false;
    this.cached.set(hash, block);
    this.blockHash[block] = hash;
    this.info.set(hash, { parent, tokenIds });
    return true;
  }

  /** Emits a BlockStored event (the caller groups consecutive newly cached blocks of a request). */
  emit(event: KvEvent): void {
    this.pending.push(event);
  }

  /** Drops references; blocks reaching zero go to the free queue's tail, last block first. */
  release(blocks: readonly number[]): void {
    for (let i = blocks.length - 1; i >= 0; i--) {
      const b = blocks[i] as number;
      const rc = (this.refCount[b] as number) - 1;
      if (rc < 0) throw new Error(`release: block ${b} is not in use`);
      this.refCount[b] = rc;
      if (rc === 0) this.pushTail(b);
    }
  }

  /** vLLM's reset_prefix_cache: refused (false) while any block is in use. */
  reset(): boolean {
    if (this.freeCount !== this.numBlocks) return false;
    for (const b of this.cached.values()) this.blockHash[b] = null;
    this.cached.clear();
    this.info.clear();
    this.cpu?.clear();
    this.pending.push({ type: "AllBlocksCleared" });
    return true;
  }

  /** Events since the last drain, in the order the cache changed. */
  drainEvents(): KvEvent[] {
    const out = this.pending;
    this.pending = [];
    return out;
  }

  /** The cached blocks: hash → parent hash and token ids. */
  cachedContents(): Map<BlockHash, CachedBlockInfo> {
    return new Map(this.info);
  }

  isCached(hash: BlockHash): boolean {
    return this.cached.has(hash);
  }

  private pushTail(b: number): void {
    this.prev[b] = this.tail;
    this.next[b] = -1;
    if (this.tail >= 0) this.next[this.tail] = b;
    else this.head = b;
    this.tail = b;
    this.freeCount++;
  }

  private unlink(b: number): void {
    const p = this.prev[b] as number;
    const n = this.next[b] as number;
    if (p >= 0) this.next[p] = n;
    else this.head = n;
    if (n >= 0) this.prev[n] = p;
    else this.tail = p;
    this.prev[b] = -1;
    this.next[b] = -1;
    this.freeCount--;
  }
}
