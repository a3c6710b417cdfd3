// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// One slot's KV blocks (control-plane/src/index/slot-blocks.ts is its JavaScript face): engine
// block hash → a heap record with the chunk-hashing state at the block's end (the last chunk
// hash and the unfinished chunk), the chunks it completed, its depth, its last
// token and the tiers holding a copy. Storing and removing whole events happens here in one
// call each, feeding the slot's ChunkTable directly: no per-block JavaScript object, no BigInt.
//
// Record layout (one record per block from the table's RecordPool, sized to its content):
//   0 prev u64 (hash of the last complete chunk; the block's last chunk when it completed any)
//   8 hash u64 (the engine's block hash: the record's key, for eviction)
//   16 depth u32 (chunks completed along the chain up to here)
//   20 lastToken u32
//   24 older, 28 newer: u32 record pointers of the slot's store-order list (eviction, below)
//   32 nChunks u32 (chunks completed inside this block)
//   36 partialLen u16 (under the chunk size, which is at most 65,536: slot-blocks.ts checks)
//   38 tiers u8 (bit t: a copy is on tier t; 0 once the record is dropped), 39 unused
//   40 parent u64 (the engine's hash of the block before it in its chain; 0 at a chain's start)
//   48 the block's chunk hashes but the last (which is `prev`), u64 × (nChunks - 1)
//   .. the unfinished chunk (partialLen bytes of it so far): under 32 bytes, its bytes; from 32
//      on, XXH64's four accumulators over its whole 32-byte stripes (32 bytes, xxh64-stream.ts)
//      and then the partialLen % 32 bytes after them — the stripes' bytes are not needed again,
//      so a chunk in progress costs at most 63 bytes instead of up to chunkSize − 1 (at 128-byte
//      chunks, ~40 bytes a block on average instead of ~64).
//
// Bounded: a slot holds at most maxBlocks blocks. An engine's BlockRemoved events keep its
// table at the size of its KV cache; an engine that never reports evictions (or a flood of
// unique prompts on a tier whose removals are not reported) would grow it forever, so past the
// cap the block stored longest ago goes — the index's own eviction rule (the least recently
// stored goes first; storing a block again, on any tier, refreshes it).

import { BlockMap } from "./block-map";
import { ByteBuf } from "./byte-buf";
import { ChunkTable } from "./chunk-table";
import { RecordPool } from "./record-pool";
import { SEQUENCE_START, TokenTable } from "./token-table";
import { xxhFinish, xxhStart, xxhStripes } from "./xxh64-stream";

const B_PREV = 0;
const B_HASH = 8;
const B_DEPTH = 16;
const B_LAST = 20;
const B_OLDER = 24;
const B_NEWER = 28;
const B_NCHUNKS = 32;
const B_PARTIAL_LEN = 36;
const B_TIERS = 38;
const B_PARENT = 40;
const B_HEADER: usize = 48;
/** A record's typical size: the header and a partial chunk of ~40 bytes (touchRecords). */
const RECORD_GUESS: usize = 96;
/** Blocks a chain refresh walks up at most. */
const MAX_REFRESH_BLOCKS: i32 = 1 << 16;
export const TIER_COUNT: u32 = 3;

/** Bytes of a record's chunk hashes kept besides `prev` (all but the last). */
/** XXH64's stripe, and its four accumulators' size. */
const STRIPE: u32 = 32;
const STATE_BYTES: usize = 32;
/** The accumulators of the chunk being hashed. */
const state = heap.alloc(STATE_BYTES);
/**
 * Chunks stores completed and have not yet added to the chunk table (flushChunks): hash u64,
 * depth u32, tier u32. Empty at the end of every call from outside the core's ingest path.
 */
const pending = new ByteBuf(1024);
const PENDING_BYTES: i32 = 16;
/** The time of the stores whose chunks are pending (one call: one time). */
let pendingNowMs: f64 = 0;
/** Where touch loads go (exported, so the optimizer keeps them). */
export let touchSink: u32 = 0;

/** Bytes a record keeps of its unfinished chunk of partialLen bytes (layout above). */
function partialBytes(partialLen: u32): usize {
  return partialLen < STRIPE ? <usize>partialLen : STATE_BYTES + <usize>(partialLen & (STRIPE - 1));
}

function extraBytes(nChunks: u32): usize {
  return nChunks > 1 ? (<usize>(nChunks - 1)) << 3 : 0;
}

/**
 * Readies `state` and scratch to go on with a chain's chunk in progress (a record's partial
 * chunk, layout above): its whole stripes already hashed (XXH64's accumulators), the bytes after
 * them into scratch, where the block's bytes follow. Returns how many bytes the state folded.
 */
function resume(prev: u64, partial: usize, partialLen: u32, scratch: ByteBuf): u32 {
  scratch.len = 0;
  if (partialLen < STRIPE) {
    xxhStart(state, prev);
    scratch.appendShort(partial, <i32>partialLen);
    return 0;
  }
  ByteBuf.copyShort(state, partial, STATE_BYTES);
  const folded = partialLen & ~(STRIPE - 1);
  scratch.appendShort(partial + STATE_BYTES, <i32>(partialLen - folded));
  return folded;
}

/** Queues the `count` chunks at `hashOut` (depths from depth + 1, on `tier`) for flushChunks. */
function queueChunks(hashOut: ByteBuf, count: u32, depth: u32, tier: u32, nowMs: f64): void {
  pending.reserve(<i32>count * PENDING_BYTES);
  for (let k: u32 = 0; k < count; k++) {
    const p = pending.ptr + <usize>pending.len;
    store<u64>(p, load<u64>(hashOut.ptr + ((<usize>k) << 3)));
    store<u32>(p + 8, depth + k + 1);
    store<u32>(p + 12, tier);
    pending.len += PENDING_BYTES;
  }
  pendingNowMs = nowMs;
}

/** "No token" in lookup's answers. */
export const NO_TOKEN: u32 = 0xffffffff;

/** Result codes of store. */
export const STORE_ORPHAN: i32 = -2;

/** Counters of the last store/remove call (the JavaScript side adds them to the slot's stats). */
export class CallStats {
  stored: i32 = 0;
  duplicates: i32 = 0;
  lowerTier: i32 = 0;
  removed: i32 = 0;
  unknownRemovals: i32 = 0;
  evicted: i32 = 0;
  /** Blocks the table holds after the call (so JavaScript need not make another call to ask). */
  blocks: i32 = 0;
}

@unmanaged
export class BlockTable {
  /** hash → record; the record holds its hash (at B_HASH, block-map.ts's KEY_OFFSET), so the table keeps 4 bytes a slot. */
  map: BlockMap = new BlockMap();
  /** Where the records live (record-pool.ts). */
  pool: RecordPool = new RecordPool();

  /** Ends of the store-order list: oldest is evicted first (0: empty). */
  oldest: usize = 0;
  newest: usize = 0;

  constructor(
    public chunks: ChunkTable,
    public slot: u32,
    public chunkSize: i32,
    public maxBlocks: u32,
  ) {}

  private link(rec: usize): void {
    store<u32>(rec + B_OLDER, <u32>this.newest);
    store<u32>(rec + B_NEWER, 0);
    if (this.newest !== 0) store<u32>(this.newest + B_NEWER, <u32>rec);
    else this.oldest = rec;
    this.newest = rec;
  }

  private unlink(rec: usize): void {
    const older = <usize>load<u32>(rec + B_OLDER);
    const newer = <usize>load<u32>(rec + B_NEWER);
    if (older !== 0) store<u32>(older + B_NEWER, <u32>newer);
    else this.oldest = newer;
    if (newer !== 0) store<u32>(newer + B_OLDER, <u32>older);
    else this.newest = older;
  }

  /** Drops the least recently stored block with every copy of its chunks. */
  private evictOldest(stats: CallStats): void {
    const rec = this.oldest;
    if (rec === 0) return;
    const tiers = <u32>load<u8>(rec + B_TIERS);
    for (let t: u32 = 0; t < TIER_COUNT; t++) if ((tiers & (1 << t)) !== 0) this.chunksOf(rec, t, false, 0);
    this.drop(load<u64>(rec + B_HASH), rec);
    stats.evicted++;
  }

  get bytes(): usize {
    return this.map.bytes + this.pool.bytes;
  }

  /**
   * Loads the cache lines the next `blocks` new records will most likely take (the pool carves
   * them in order, RECORD_GUESS bytes each on average), to be thrown away: see RecordPool.touchAhead.
   */
  touchRecords(blocks: i32): u32 {
    return this.pool.touchAhead(<usize>blocks * RECORD_GUESS);
  }

  /**
   * Before a new record: at the cap the least recently stored block goes, and a full map grows
   * (growMap walks the records there are, so before the new one exists). True when either moved
   * the map's slots, so the empty slot store's lookup stopped at no longer holds.
   */
  private makeRoom(stats: CallStats): bool {
    let moved = false;
    if (this.map.size >= this.maxBlocks) {
      this.flushChunks();
      this.evictOldest(stats);
      moved = true;
    }
    if (this.map.full()) {
      this.growMap();
      moved = true;
    }
    return moved;
  }

  /**
   * Doubles the block map. BlockMap.grow reads every key from its record, a cache miss each in
   * slot order (records lie all over the pool): ~7 % of the ingest bench's CPU, which fills a new
   * table with 128k blocks (issue 31). Here the records are walked in address order, page by
   * page (RecordPool), so the keys load in sequence. A page holds live records (tiers ≠ 0) and freed ones (tiers 0, their
   * size fields intact), back to back at their class's stride. Records too large for a page are
   * not in one: with any of those the map grows its own way.
   */
  private growMap(): void {
    const pool = this.pool;
    const map = this.map;
    if (pool.heapRecords !== 0) {
      map.grow();
      return;
    }
    map.clearDoubled();
    for (let i: u32 = 0; i < pool.pageCount; i++) {
      let rec = pool.pageStart(i);
      const end = pool.pageEnd(i);
      while (rec < end) {
        if (<u32>load<u8>(rec + B_TIERS) !== 0) map.putBack(rec);
        rec += RecordPool.stride(BlockTable.recordSize(rec));
      }
    }
  }

  /** A record's size in bytes (layout above), as it was allocated. */
  @inline private static recordSize(rec: usize): usize {
    return (
      B_HEADER + extraBytes(load<u32>(rec + B_NCHUNKS)) + partialBytes(<u32>load<u16>(rec + B_PARTIAL_LEN))
    );
  }

  @inline private chunkAt(rec: usize, k: u32, n: u32): u64 {
    return k === n - 1 ? load<u64>(rec + B_PREV) : load<u64>(rec + B_HEADER + ((<usize>k) << 3));
  }

  /**
   * A store continues the chain ending at block `rec`: the chain is in use, so its chunks' stamps
   * become `nowMs` (ChunkTable.refresh), walking up from `rec` until a chunk stamped within
   * REFRESH_MS (its ancestors were refreshed then too) or the chain's start. Why: a full bucket
   * that keeps its newest rows shows what was stored recently, and a prefix requests keep
   * extending — a system prompt and its questions — is stored once; without this it would leave
   * the gateways' view one horizon after it was stored however often it is used
   * (docs/scaling.md). A chain extended in steady use costs one lookup per store.
   */
  private refreshChain(rec: usize, nowMs: f64): void {
    // Chunks still queued (flushChunks) are not indexed yet: the walk stops at them, and they
    // are added with this store's time anyway.
    for (let steps = 0; rec !== 0 && steps < MAX_REFRESH_BLOCKS; steps++) {
      const n = load<u32>(rec + B_NCHUNKS);
      // Deepest first: the first chunk found fresh ends the walk.
      for (let k = <i32>n - 1; k >= 0; k--)
        if (!this.chunks.refresh(this.chunkAt(rec, <u32>k, n), nowMs)) return;
      const parent = load<u64>(rec + B_PARENT);
      rec = parent === 0 ? 0 : this.map.get(parent);
    }
  }

  /** Adds (or, add = false, removes) the chunks of block `rec` for one tier. */
  private chunksOf(rec: usize, tier: u32, add: bool, nowMs: f64): void {
    const n = load<u32>(rec + B_NCHUNKS);
    const first = load<u32>(rec + B_DEPTH) - n;
    for (let k: u32 = 0; k < n; k++) {
      const h = this.chunkAt(rec, k, n);
      if (add) this.chunks.add(h, first + k + 1, this.slot, tier, nowMs);
      else this.chunks.remove(h, this.slot, tier);
    }
  }

  /**
   * Adds the chunks stores completed to the chunk table, in the order they completed them. What
   * adding them reads is touched first (their map slots and their buckets' chunk counts), so
   * those cache misses overlap: most chunks are new, and each would otherwise
   * stall on its own (issue 31). The batch fast path flushes once per batch, every other caller
   * once per call; and before anything else changes the chunk table (eviction, another tier's
   * copy, removals, clearing), so the table sees the same sequence of changes as adding them
   * one by one.
   */
  flushChunks(): void {
    const n = pending.len / PENDING_BYTES;
    if (n === 0) return;
    const at = pending.ptr;
    const chunks = this.chunks;
    let sink: u32 = 0;
    for (let k = 0; k < n; k++) sink ^= chunks.touch(load<u64>(at + <usize>(k * PENDING_BYTES)));
    touchSink ^= sink;
    pending.len = 0; // before adding: nothing below queues more
    for (let k = 0; k < n; k++) {
      const p = at + <usize>(k * PENDING_BYTES);
      chunks.add(load<u64>(p), load<u32>(p + 8), this.slot, load<u32>(p + 12), pendingNowMs);
    }
  }

  /** Adds the tier's copy of a known block (counted as a duplicate when already held). */
  addCopy(rec: usize, tier: u32, nowMs: f64, stats: CallStats): void {
    // Stored again: the most recently stored block now.
    if (rec !== this.newest) {
      this.unlink(rec);
      this.link(rec);
    }
    const bit: u32 = 1 << tier;
    const tiers = <u32>load<u8>(rec + B_TIERS);
    if ((tiers & bit) !== 0) {
      stats.duplicates++;
      return;
    }
    store<u8>(rec + B_TIERS, <u8>(tiers | bit));
    this.chunksOf(rec, tier, true, nowMs);
    if (tier !== 0) stats.lowerTier++;
  }

  /**
   * For an event's n hashes at `hashes`: writes u32s to `held` — the parent's last token
   * (NO_TOKEN without a parent), then per block its last token when the block is held, else
   * NO_TOKEN — and returns 0, or STORE_ORPHAN when the parent is not held. Lets the caller
   * detokenize only new blocks, each after the token its chain really ends with. (A stored
   * block's last token is never NO_TOKEN: no vocabulary reaches id 2^32 - 1.)
   */
  lookup(hashes: usize, n: i32, hasParent: bool, parent: u64, held: usize): i32 {
    let last = NO_TOKEN;
    if (hasParent) {
      const p = this.map.get(parent);
      if (p === 0) return STORE_ORPHAN;
      last = load<u32>(p + B_LAST);
    }
    store<u32>(held, last);
    for (let i = 0; i < n; i++) {
      const rec = this.map.get(load<u64>(hashes + ((<usize>i) << 3)));
      store<u32>(held + ((<usize>(i + 1)) << 2), rec !== 0 ? load<u32>(rec + B_LAST) : NO_TOKEN);
    }
    return 0;
  }

  /**
   * Stores n blocks continuing from `parent` (or from `root`, the chain's h0, without one).
   * Input at `hashes`: hashes u64 × n, then either (tokens ≠ null) the token ids u32 ×
   * n·blockSize, detokenized here; or the blocks' bytes as the caller detokenized them — byte
   * length u32 × n, last token u32 × n, the bytes back to back (a block already held has length
   * 0 and is not read). Returns STORE_ORPHAN when the parent is not held, else how many blocks
   * could not be detokenized (the first such block and its descendants in the event).
   * `scratch` holds the unhashed end of the chunk in progress ‖ the block's bytes while hashing;
   * `hashOut` the chunks of one block.
   */
  store(
    hashes: usize,
    n: i32,
    tokens: TokenTable | null,
    blockSize: i32,
    tier: u32,
    hasParent: bool,
    parent: u64,
    root: u64,
    nowMs: f64,
    scratch: ByteBuf,
    hashOut: ByteBuf,
    stats: CallStats,
  ): i32 {
    let prev = root;
    let partial: usize = 0;
    let partialLen: u32 = 0;
    let depth: u32 = 0;
    let previous = SEQUENCE_START;
    if (hasParent) {
      const p = this.map.get(parent);
      if (p === 0) return STORE_ORPHAN;
      if (this.chunks.keepNewest) this.refreshChain(p, nowMs);
      prev = load<u64>(p + B_PREV);
      depth = load<u32>(p + B_DEPTH);
      partialLen = <u32>load<u16>(p + B_PARTIAL_LEN);
      partial = p + B_HEADER + extraBytes(load<u32>(p + B_NCHUNKS));
      previous = <i64>load<u32>(p + B_LAST);
    }
    const after = hashes + ((<usize>n) << 3);
    const lens = after;
    const lasts = lens + ((<usize>n) << 2);
    let bytes = lasts + ((<usize>n) << 2);
    const chunk = this.chunkSize;
    for (let i = 0; i < n; i++) {
      const hash = load<u64>(hashes + ((<usize>i) << 3));
      let rec = this.map.get(hash);
      if (rec === 0) {
        let folded = resume(prev, partial, partialLen, scratch);
        let last: u32;
        if (tokens !== null) {
          const ids = after + ((<usize>(i * blockSize)) << 2);
          if (!tokens.append(ids, blockSize, previous, scratch)) return n - i;
          last = load<u32>(ids + ((<usize>(blockSize - 1)) << 2));
        } else {
          const len = load<u32>(lens + ((<usize>i) << 2));
          scratch.appendShort(bytes, <i32>len);
          bytes += len;
          last = load<u32>(lasts + ((<usize>i) << 2));
        }
        const total = <u32>scratch.len;
        const size = <u32>chunk;
        hashOut.len = 0;
        // Finish each chunk the bytes complete (each seeds the next), then hash the whole stripes
        // of the one left unfinished.
        let count: u32 = 0;
        let off: u32 = 0;
        while (total - off >= size - folded) {
          const need = size - folded;
          const whole = need & ~(STRIPE - 1);
          xxhStripes(state, scratch.ptr + <usize>off, <usize>whole);
          const h = xxhFinish(state, scratch.ptr + <usize>(off + whole), <usize>size);
          // Room chunk by chunk: reserving (folded + total) / size up front cost a division per block.
          hashOut.reserve(<i32>((count + 1) << 3));
          store<u64>(hashOut.ptr + ((<usize>count) << 3), h);
          count++;
          off += need;
          folded = 0;
          xxhStart(state, h);
        }
        const whole = (total - off) & ~(STRIPE - 1);
        xxhStripes(state, scratch.ptr + <usize>off, <usize>whole);
        folded += whole;
        const tail = total - off - whole;
        const rest = folded + tail;
        const extra = extraBytes(count);
        const recSize = B_HEADER + extra + partialBytes(rest);
        // After hashing: `partial` may lie in the block an eviction drops.
        const moved = this.makeRoom(stats);
        rec = this.pool.alloc(recSize);
        store<u64>(rec + B_PREV, count > 0 ? load<u64>(hashOut.ptr + ((<usize>(count - 1)) << 3)) : prev);
        store<u32>(rec + B_DEPTH, depth + count);
        store<u32>(rec + B_LAST, last);
        store<u8>(rec + B_TIERS, <u8>((<u32>1) << tier));
        store<u32>(rec + B_NCHUNKS, count);
        store<u16>(rec + B_PARTIAL_LEN, <u16>rest);
        ByteBuf.copyShort(rec + B_HEADER, hashOut.ptr, extra);
        let keep = rec + B_HEADER + extra;
        if (rest >= STRIPE) {
          ByteBuf.copyShort(keep, state, STATE_BYTES);
          keep += STATE_BYTES;
        }
        ByteBuf.copyShort(keep, scratch.ptr + <usize>(off + whole), <usize>tail);
        store<u64>(rec + B_HASH, hash);
        store<u64>(
          rec + B_PARENT,
          i > 0 ? load<u64>(hashes + ((<usize>(i - 1)) << 3)) : hasParent ? parent : 0,
        );
        // Where the lookup above found no record, unless makeRoom moved the map's slots.
        if (moved) this.map.set(rec);
        else this.map.insertMissed(rec);
        this.link(rec);
        queueChunks(hashOut, count, depth, tier, nowMs);
        stats.stored++;
        if (tier !== 0) stats.lowerTier++;
      } else {
        // A block we hold (same content by construction): maybe a copy on another tier.
        this.flushChunks();
        this.addCopy(rec, tier, nowMs, stats);
        if (tokens === null) bytes += load<u32>(lens + ((<usize>i) << 2));
      }
      prev = load<u64>(rec + B_PREV);
      depth = load<u32>(rec + B_DEPTH);
      partialLen = <u32>load<u16>(rec + B_PARTIAL_LEN);
      partial = rec + B_HEADER + extraBytes(load<u32>(rec + B_NCHUNKS));
      previous = <i64>load<u32>(rec + B_LAST);
    }
    return 0;
  }

  /** Adds the tier's copy of each held block among n hashes (placeholder stores); returns how many were not held. */
  storeCopies(hashes: usize, n: i32, tier: u32, nowMs: f64, stats: CallStats): i32 {
    this.flushChunks();
    let unresolved = 0;
    for (let i = 0; i < n; i++) {
      const rec = this.map.get(load<u64>(hashes + ((<usize>i) << 3)));
      if (rec === 0) unresolved++;
      else this.addCopy(rec, tier, nowMs, stats);
    }
    return unresolved;
  }

  /** Removes the tier's copy of each of n blocks; a block goes when no tier holds it. */
  remove(hashes: usize, n: i32, tier: u32, stats: CallStats): void {
    this.flushChunks();
    const bit: u32 = 1 << tier;
    for (let i = 0; i < n; i++) {
      const hash = load<u64>(hashes + ((<usize>i) << 3));
      const rec = this.map.get(hash);
      if (rec === 0 || (<u32>load<u8>(rec + B_TIERS) & bit) === 0) {
        stats.unknownRemovals++;
        continue;
      }
      const at = this.map.hitAt;
      this.chunksOf(rec, tier, false, 0);
      const left = <u32>load<u8>(rec + B_TIERS) & ~bit;
      store<u8>(rec + B_TIERS, <u8>left);
      // chunksOf changed only the chunk table: the block map's slot is where get() found it.
      if (left === 0) this.dropAt(rec, at);
      stats.removed++;
    }
  }

  private drop(hash: u64, rec: usize): void {
    this.map.get(hash);
    this.dropAt(rec, this.map.hitAt);
  }

  /** Drops record `rec`, which the block map holds at slot `at`. */
  private dropAt(rec: usize, at: u32): void {
    // No tier: what growMap's walk skips.
    store<u8>(rec + B_TIERS, 0);
    this.unlink(rec);
    // The map reads keys from the records: delete while the record is still there.
    this.map.deleteAt(at);
    this.pool.free(rec, BlockTable.recordSize(rec));
  }

  /** Drops every block, taking its copies out of the chunk table (withChunks) or not (the table is gone). */
  clear(withChunks: bool): void {
    if (withChunks) this.flushChunks();
    else pending.len = 0;
    const map = this.map;
    for (let i: u32 = 0; i < map.cap; i++) {
      const rec = map.recordAt(i);
      if (rec === 0) continue;
      if (withChunks) {
        const tiers = <u32>load<u8>(rec + B_TIERS);
        for (let t: u32 = 0; t < TIER_COUNT; t++)
          if ((tiers & (1 << t)) !== 0) this.chunksOf(rec, t, false, 0);
      }
      // The pool's pages go whole below; only records too large for them are the heap's.
      const size = BlockTable.recordSize(rec);
      if (RecordPool.onHeap(size)) this.pool.free(rec, size);
    }
    map.clear();
    this.pool.reset();
    this.oldest = 0;
    this.newest = 0;
  }

  /** Gives back everything the table holds, itself included (see clear for withChunks). */
  dispose(withChunks: bool): void {
    this.clear(withChunks);
    this.map.dispose();
    this.pool.dispose();
    heap.free(changetype<usize>(this));
  }

  /** Writes every held block hash (u64) to out; returns how many. */
  writeHashes(out: ByteBuf): i32 {
    out.len = 0;
    const map = this.map;
    out.reserve((<i32>map.size) << 3);
    let n = 0;
    for (let i: u32 = 0; i < map.cap; i++) {
      const rec = map.recordAt(i);
      if (rec === 0) continue;
      store<u64>(out.ptr + ((<usize>n) << 3), load<u64>(rec + B_HASH));
      n++;
    }
    out.len = n << 3;
    return n;
  }
}
