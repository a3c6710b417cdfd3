// The fleet-wide prefix index: chunk hash → which slots hold that chunk. It knows nothing of
// engines or events (slot-blocks.ts turns those into add/remove calls) and nothing of the
// shared-data layout (bucket-image.ts encodes it). Every change marks the chunk's bucket dirty
// so publication re-encodes only what changed.
//
// Sized for the ingest path (issue 18: a million blocks per CPU-second, a couple of hundred
// bytes each): the entries live in the Wasm core's linear memory (filter/core/chunk-table.ts,
// fixed records found by u64 open addressing, one list per bucket), so holding a chunk costs
// no JavaScript object and no BigInt map key. A ChunkEntry is a snapshot read from there when
// a bucket is encoded (publication) or an entry is asked for. Speculative routes, few and
// short-lived, stay here and are merged into those snapshots.
//
// A holder is a (slot, tier) pair: with offloading the same chunk can be on a slot's GPU and on
// its CPU at once, and removing one copy leaves the other (tier.ts).
import { type CoreModule, core } from "../core/core-wasm.ts";
import { TIER_GPU, type Tier } from "./tier.ts";

export interface ChunkEntry {
  /** Bucket of the hash, computed once (BigInt arithmetic is not free on the ingest path). */
  bucket: number;
  /** Position of the hash in its bucket's member list. */
  pos: number;
  /** 1-based position of the chunk in its stream; shallow chunks are kept first under pressure. */
  depth: number;
  /**
   * Holders, as parallel arrays: slot, its tier, and how many stored blocks on that slot and
   * tier produced the hash. A slot appears once per tier it holds the chunk on. `tiers` exists
   * only once a holder is off the GPU (absent: every holder is on the GPU), which keeps the
   * common GPU-only entry one array smaller.
   */
  slots: number[];
  tiers?: Tier[];
  counts: number[];
  /** Last time (ms) a slot stored this chunk: the LRU stamp of the eviction rule. */
  stampMs: number;
  /** slot id → expiry (ms) of a speculative route a gateway reported (the engine has not confirmed it yet). */
  speculative?: Map<number, number>;
}

/**
 * Every slot that holds the chunk or was speculatively routed it, with the best (lowest) tier it
 * holds it on. A speculative route counts as GPU: the routed request computes the prefix there.
 */
export function bestTiers(entry: ChunkEntry): Map<number, Tier> {
  const out = new Map<number, Tier>();
  for (let i = 0; i < entry.slots.length; i++) {
    const slot = entry.slots[i] as number;
    const tier = tierAt(entry, i);
    const known = out.get(slot);
    if (known === undefined || tier < known) out.set(slot, tier);
  }
  if (entry.speculative !== undefined) for (const slot of entry.speculative.keys()) out.set(slot, TIER_GPU);
  return out;
}

/** The tier of holder i. */
export function tierAt(entry: ChunkEntry, i: number): Tier {
  return entry.tiers === undefined ? TIER_GPU : (entry.tiers[i] as Tier);
}

function holderAt(entry: ChunkEntry, slot: number, tier: Tier): number {
  const tiers = entry.tiers;
  if (tiers === undefined) return tier === TIER_GPU ? entry.slots.indexOf(slot) : -1;
  for (let i = 0; i < entry.slots.length; i++) if (entry.slots[i] === slot && tiers[i] === tier) return i;
  return -1;
}

/** How many stored blocks on `slot` (on `tier`, GPU by default) produced this chunk (0: none). */
export function holderCount(entry: ChunkEntry, slot: number, tier: Tier = TIER_GPU): number {
  const i = holderAt(entry, slot, tier);
  return i < 0 ? 0 : (entry.counts[i] as number);
}

/** Frees a chunk table whose ChunkIndex was collected (an index lives as long as its process in production; tests and benches make many). */
const tables = new FinalizationRegistry<number>((id) => core().ex.chunkTableFree(id));

/** Reads `count` records written by ChunkTable.write from the core's output buffer. */
function readEntries(
  c: CoreModule,
  count: number,
  bucketOf: (hash: bigint) => number,
): Array<[bigint, ChunkEntry]> {
  const out: Array<[bigint, ChunkEntry]> = [];
  const u64 = c.u64view;
  const u32 = c.u32view;
  const f64 = c.f64view;
  let at = c.ex.ingestOutPtr();
  for (let i = 0; i < count; i++) {
    const hash = u64[at >>> 3] as bigint;
    const n = u32[(at + 20) >>> 2] as number;
    const slots: number[] = new Array(n);
    const counts: number[] = new Array(n);
    let tiers: Tier[] | undefined;
    for (let k = 0; k < n; k++) {
      const lo = u32[(at + 24 + 8 * k) >>> 2] as number;
      slots[k] = lo & 0xffff;
      counts[k] = u32[(at + 28 + 8 * k) >>> 2] as number;
      const tier = ((lo >>> 16) & 0xff) as Tier;
      if (tier !== TIER_GPU && tiers === undefined) tiers = slots.slice(0, k).map(() => TIER_GPU);
      tiers?.push(tier);
    }
    const entry: ChunkEntry = {
      bucket: bucketOf(hash),
      pos: i,
      depth: u32[(at + 16) >>> 2] as number,
      slots,
      counts,
      stampMs: f64[(at + 8) >>> 3] as number,
    };
    if (tiers !== undefined) entry.tiers = tiers;
    out.push([hash, entry]);
    at += 24 + 8 * n;
  }
  return out;
}

export class ChunkIndex {
  /** The core's chunk table (slot-blocks.ts feeds it from the Wasm side directly). */
  readonly tableId: number;
  readonly #core = core();
  /** Dirty buckets publishDirty() encoded so far, their rows changed or not (the scaling bench's count). */
  encodedBuckets = 0;
  readonly #bucketMask: bigint;
  /** hash → slot id → expiry (ms) of a speculative route; the core's record is flagged while any exists. */
  readonly #speculative = new Map<bigint, Map<number, number>>();
  readonly #expiries: Array<{ hash: bigint; slot: number; expiresMs: number }> = [];
  /** bucket → the speculated hashes in it, so encoding a bucket finds its routes without a scan. */
  readonly #speculatedIn = new Map<number, Set<bigint>>();

  constructor(readonly buckets: number) {
    if (buckets <= 0 || (buckets & (buckets - 1)) !== 0)
      throw new Error(`bucket count must be a power of two, got ${buckets}`);
    this.#bucketMask = BigInt(buckets - 1);
    this.tableId = this.#core.ex.chunkTableNew(buckets);
    tables.register(this, this.tableId, this);
  }

  /** Frees the core's table now rather than when this is collected; the index is unusable after. */
  dispose(): void {
    if (tables.unregister(this)) this.#core.ex.chunkTableFree(this.tableId);
  }

  get size(): number {
    return this.#core.ex.chunkTableSize(this.tableId);
  }

  /** Bytes of linear memory the table holds (records, lookup table, bucket lists). */
  get bytes(): number {
    return this.#core.ex.chunkTableBytes(this.tableId);
  }

  bucketOf(hash: bigint): number {
    return Number(hash & this.#bucketMask);
  }

  add(hash: bigint, depth: number, slot: number, nowMs: number, tier: Tier = TIER_GPU): void {
    this.#core.ex.chunkAdd(this.tableId, hash, depth, slot, tier, nowMs);
  }

  remove(hash: bigint, slot: number, tier: Tier = TIER_GPU): void {
    this.#core.ex.chunkRemove(this.tableId, hash, slot, tier);
  }

  #heldOnGpu(hash: bigint, slot: number): boolean {
    return this.#core.ex.chunkHolderCount(this.tableId, hash, slot, TIER_GPU) > 0;
  }

  /**
   * A gateway routed a prompt with this chunk to `slot`: count it as held until `expiresMs`,
   * so other gateways follow before the engine's KV events confirm it (DESIGN §3).
   */
  speculate(hash: bigint, depth: number, slot: number, nowMs: number, expiresMs: number): void {
    let routes = this.#speculative.get(hash);
    if (routes === undefined) {
      routes = new Map();
      this.#speculative.set(hash, routes);
      this.#core.ex.chunkSpeculated(this.tableId, hash, depth, nowMs, 1);
      const bucket = this.bucketOf(hash);
      const inBucket = this.#speculatedIn.get(bucket);
      if (inBucket === undefined) this.#speculatedIn.set(bucket, new Set([hash]));
      else inBucket.add(hash);
    }
    if (!routes.has(slot) && !this.#heldOnGpu(hash, slot))
      this.#core.ex.chunkMarkDirty(this.tableId, this.bucketOf(hash));
    routes.set(slot, Math.max(expiresMs, routes.get(slot) ?? 0));
    this.#expiries.push({ hash, slot, expiresMs });
  }

  /** Drops speculative routes whose time is up. */
  expire(nowMs: number): void {
    // Expiries are queued in arrival order; TTLs are alike, so the front expires first. A
    // refreshed route is checked against its current expiry before it is dropped.
    let i = 0;
    for (; i < this.#expiries.length; i++) {
      const e = this.#expiries[i] as { hash: bigint; slot: number; expiresMs: number };
      if (e.expiresMs > nowMs) break;
      const routes = this.#speculative.get(e.hash);
      const current = routes?.get(e.slot);
      if (routes === undefined || current === undefined || current > nowMs) continue;
      routes.delete(e.slot);
      if (!this.#heldOnGpu(e.hash, e.slot)) this.#core.ex.chunkMarkDirty(this.tableId, this.bucketOf(e.hash));
      if (routes.size === 0) {
        this.#speculative.delete(e.hash);
        this.#forgetSpeculated(e.hash);
        this.#core.ex.chunkSpeculated(this.tableId, e.hash, 0, nowMs, 0);
        this.#core.ex.chunkDropIfEmpty(this.tableId, e.hash);
      }
    }
    if (i > 0) this.#expiries.splice(0, i);
  }

  #forgetSpeculated(hash: bigint): void {
    const bucket = this.bucketOf(hash);
    const inBucket = this.#speculatedIn.get(bucket);
    inBucket?.delete(hash);
    if (inBucket?.size === 0) this.#speculatedIn.delete(bucket);
  }

  /**
   * The bucket's shared-data image (docs/wire-format.md §4.4), encoded in the core from its
   * tables (filter/core/bucket-encode.ts): the same bytes as bucket-image.ts encodeBucket over
   * bucketEntries(), without a snapshot object per chunk.
   */
  encodeBucket(bucket: number, ways: number, slotWords: number): Uint8Array {
    const c = this.#core;
    const [specPtr, specCount] = this.#writeSpeculative(bucket);
    const len = c.ex.chunkEncodeBucketIo(this.tableId, bucket, ways, slotWords, specPtr, specCount);
    if (len < 0) throw new Error(`cannot encode a bucket of ${ways} ways × ${slotWords} slot words`);
    return c.bytes(c.ex.ingestOutPtr(), len);
  }

  /**
   * Takes the dirty buckets and publishes them into journal `journalId` (the core's published
   * images, filter/core/bucket-journal.ts) in one call, the changed ones taking versions from
   * `firstVersion` on; returns how many changed (the core lists them at journalChangedPtr).
   */
  publishDirty(journalId: number, firstVersion: number): number {
    const c = this.#core;
    const n = c.ex.chunkTakeDirtyIo(this.tableId);
    this.encodedBuckets += n;
    const [specPtr, specCount] = this.#writeDirtySpeculative(n);
    const changed = c.ex.journalPublishIo(journalId, this.tableId, n, specPtr, specCount, firstVersion);
    if (changed < 0) throw new Error("cannot encode a bucket in the journal's geometry");
    return changed;
  }

  /**
   * The speculative routes of the dirty buckets listed at ingestOutPtr (n of them), written to
   * the I/O region in the list's order as {hash u64, slot u32, bucket u32}: the core walks them
   * with the list. Speculative routes are few, so most publications write none.
   */
  #writeDirtySpeculative(n: number): [number, number] {
    const c = this.#core;
    if (this.#speculatedIn.size === 0) return [0, 0];
    const at = c.ex.ingestOutPtr() >>> 2;
    const routes: Array<[bigint, number, number]> = [];
    const dirty = c.u32view;
    for (let i = 0; i < n; i++) {
      const b = dirty[at + i] as number;
      for (const hash of this.#speculatedIn.get(b) ?? [])
        for (const slot of this.#speculative.get(hash)?.keys() ?? []) routes.push([hash, slot, b]);
    }
    if (routes.length === 0) return [0, 0];
    const ptr = c.io(16 * routes.length);
    const u64 = c.u64view;
    const u32 = c.u32view;
    routes.forEach(([hash, slot, b], i) => {
      u64[(ptr >>> 3) + 2 * i] = hash;
      u32[(ptr >>> 2) + 4 * i + 2] = slot;
      u32[(ptr >>> 2) + 4 * i + 3] = b;
    });
    return [ptr, routes.length];
  }

  /**
   * Writes the bucket's speculative routes ({hash u64, slot u32, 0 u32} each) at the start of the
   * core's I/O region; their address and count.
   */
  #writeSpeculative(bucket: number): [number, number] {
    const c = this.#core;
    const hashes = this.#speculatedIn.get(bucket);
    if (hashes === undefined) return [0, 0];
    const routes: Array<[bigint, number]> = [];
    for (const hash of hashes)
      for (const slot of this.#speculative.get(hash)?.keys() ?? []) routes.push([hash, slot]);
    const ptr = c.io(16 * routes.length);
    const u64 = c.u64view;
    const u32 = c.u32view;
    routes.forEach(([hash, slot], i) => {
      u64[(ptr >>> 3) + 2 * i] = hash;
      u32[(ptr >>> 2) + 4 * i + 2] = slot;
      u32[(ptr >>> 2) + 4 * i + 3] = 0;
    });
    return [routes.length === 0 ? 0 : ptr, routes.length];
  }

  #withSpeculation(entries: Array<[bigint, ChunkEntry]>): Array<[bigint, ChunkEntry]> {
    if (this.#speculative.size > 0)
      for (const [hash, entry] of entries) {
        const routes = this.#speculative.get(hash);
        if (routes !== undefined) entry.speculative = new Map(routes);
      }
    return entries;
  }

  /** A snapshot of the chunk's entry (changes to the index do not show in it). */
  get(hash: bigint): ChunkEntry | undefined {
    const found = this.#core.ex.chunkGetIo(this.tableId, hash);
    if (found === 0) return undefined;
    return this.#withSpeculation(readEntries(this.#core, 1, (h) => this.bucketOf(h)))[0]?.[1];
  }

  /** The chunk hashes that fall into a bucket, with (snapshots of) their entries. */
  bucketEntries(bucket: number): Array<[bigint, ChunkEntry]> {
    const n = this.#core.ex.chunkBucketIo(this.tableId, bucket);
    return this.#withSpeculation(readEntries(this.#core, n, () => bucket));
  }

  /** Marks the bucket for the next publication. */
  markDirty(bucket: number): void {
    this.#core.ex.chunkMarkDirty(this.tableId, bucket);
  }

  /** Buckets changed since the last call; the caller re-encodes and publishes them. */
  takeDirty(): number[] {
    const n = this.#core.ex.chunkTakeDirtyIo(this.tableId);
    const at = this.#core.ex.ingestOutPtr() >>> 2;
    return Array.from(this.#core.u32view.subarray(at, at + n));
  }
}
