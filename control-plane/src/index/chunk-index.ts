// The fleet-wide prefix index: chunk hash → which slots hold that chunk. It knows nothing of
// engines or events (slot-blocks.ts turns those into add/remove calls) and nothing of the
// shared-data layout (bucket-image.ts encodes it). Every change marks the chunk's bucket dirty
// so publication re-encodes only what changed.
//
// Sized for the ingest path (DESIGN §9: hundreds of thousands of blocks per second): holders
// are small parallel arrays (a chunk is usually on one or two slots, a Map would cost more
// than the chunk), and each bucket lists its hashes in an array with O(1) swap-removal.
//
// A holder is a (slot, tier) pair: with offloading the same chunk can be on a slot's GPU and on
// its CPU at once, and removing one copy leaves the other (tier.ts).
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

function heldOnGpu(entry: ChunkEntry, slot: number): boolean {
  return holderAt(entry, slot, TIER_GPU) >= 0;
}

export class ChunkIndex {
  readonly #entries = new Map<bigint, ChunkEntry>();
  readonly #dirty = new Set<number>();
  readonly #bucketMask: bigint;
  /** Hashes by bucket, so encoding a bucket does not scan the whole index (created on first use: up to 2^24 buckets). */
  readonly #byBucket = new Map<number, bigint[]>();
  readonly #expiries: Array<{ hash: bigint; slot: number; expiresMs: number }> = [];

  constructor(readonly buckets: number) {
    if (buckets <= 0 || (buckets & (buckets - 1)) !== 0)
      throw new Error(`bucket count must be a power of two, got ${buckets}`);
    this.#bucketMask = BigInt(buckets - 1);
  }

  get size(): number {
    return this.#entries.size;
  }

  bucketOf(hash: bigint): number {
    return Number(hash & this.#bucketMask);
  }

  #entry(hash: bigint, depth: number, nowMs: number): ChunkEntry {
    let entry = this.#entries.get(hash);
    if (entry === undefined) {
      const bucket = this.bucketOf(hash);
      let members = this.#byBucket.get(bucket);
      if (members === undefined) {
        members = [];
        this.#byBucket.set(bucket, members);
      }
      entry = { bucket, pos: members.length, depth, slots: [], counts: [], stampMs: nowMs };
      members.push(hash);
      this.#entries.set(hash, entry);
    }
    return entry;
  }

  #dropIfEmpty(hash: bigint, entry: ChunkEntry): void {
    if (entry.slots.length > 0 || (entry.speculative?.size ?? 0) > 0) return;
    this.#entries.delete(hash);
    const members = this.#byBucket.get(entry.bucket) as bigint[];
    const last = members.pop() as bigint;
    if (last !== hash) {
      members[entry.pos] = last;
      (this.#entries.get(last) as ChunkEntry).pos = entry.pos;
    }
  }

  add(hash: bigint, depth: number, slot: number, nowMs: number, tier: Tier = TIER_GPU): void {
    const entry = this.#entry(hash, depth, nowMs);
    const i = holderAt(entry, slot, tier);
    if (i < 0) {
      if (entry.tiers === undefined && tier !== TIER_GPU) entry.tiers = entry.slots.map(() => TIER_GPU);
      entry.slots.push(slot);
      entry.tiers?.push(tier);
      entry.counts.push(1);
    } else {
      entry.counts[i] = (entry.counts[i] as number) + 1;
    }
    entry.stampMs = nowMs;
    // A new holder changes the image; a repeat store only refreshes the LRU stamp, which
    // matters for eviction order, so it dirties the bucket too.
    this.#dirty.add(entry.bucket);
  }

  remove(hash: bigint, slot: number, tier: Tier = TIER_GPU): void {
    const entry = this.#entries.get(hash);
    if (entry === undefined) return;
    const i = holderAt(entry, slot, tier);
    if (i < 0) return;
    const count = entry.counts[i] as number;
    if (count > 1) {
      entry.counts[i] = count - 1;
      return;
    }
    entry.slots.splice(i, 1);
    entry.tiers?.splice(i, 1);
    entry.counts.splice(i, 1);
    this.#dropIfEmpty(hash, entry);
    this.#dirty.add(entry.bucket);
  }

  /**
   * A gateway routed a prompt with this chunk to `slot`: count it as held until `expiresMs`,
   * so other gateways follow before the engine's KV events confirm it (DESIGN §3).
   */
  speculate(hash: bigint, depth: number, slot: number, nowMs: number, expiresMs: number): void {
    const entry = this.#entry(hash, depth, nowMs);
    entry.speculative ??= new Map();
    if (!entry.speculative.has(slot) && !heldOnGpu(entry, slot)) this.#dirty.add(entry.bucket);
    entry.speculative.set(slot, Math.max(expiresMs, entry.speculative.get(slot) ?? 0));
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
      const entry = this.#entries.get(e.hash);
      const current = entry?.speculative?.get(e.slot);
      if (entry === undefined || current === undefined || current > nowMs) continue;
      entry.speculative?.delete(e.slot);
      if (!heldOnGpu(entry, e.slot)) this.#dirty.add(entry.bucket);
      this.#dropIfEmpty(e.hash, entry);
    }
    if (i > 0) this.#expiries.splice(0, i);
  }

  get(hash: bigint): ChunkEntry | undefined {
    return this.#entries.get(hash);
  }

  /** The chunk hashes that fall into a bucket, with their entries. */
  bucketEntries(bucket: number): Array<[bigint, ChunkEntry]> {
    const members = this.#byBucket.get(bucket);
    if (members === undefined) return [];
    return members.map((h) => [h, this.#entries.get(h) as ChunkEntry]);
  }

  /** Buckets changed since the last call; the caller re-encodes and publishes them. */
  takeDirty(): number[] {
    const out = [...this.#dirty];
    this.#dirty.clear();
    return out;
  }
}
