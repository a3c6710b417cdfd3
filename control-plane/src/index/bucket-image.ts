// Encodes one prefix-index bucket as the value of shared-data key `kvr.b.<i>`
// (docs/wire-format.md §4.4) — the reference the core's encoder (filter/core/bucket-encode.ts) is
// held equal to. The control plane decides what a full bucket keeps, so the filter only ever
// reads: shallow chunks first (losing chunk 1 of a prompt hides every deeper chunk from the
// filter's prefix walk), then the better tier, then the most recently stored, then the smaller
// hash so the choice is deterministic. A full bucket may keep its newest rows instead
// (cache.fullKeep: the most recently stored first, then the same order).
//
// One group per (chunk hash, tier): the slots whose best copy of the chunk is on that tier (a
// slot with a GPU and a CPU copy is in the GPU group only), so the filter learns each slot's tier
// from the row it finds it in. A group is written as one 16-byte row per 32-slot segment it has a
// slot in, and `ways` counts rows.
import { bestTiers, type ChunkEntry } from "./chunk-index.ts";
import { TIER_COUNT, TIER_GPU, type Tier } from "./tier.ts";

export const BUCKET_HEADER_BYTES = 4;
/** Bytes per row: hash u64, depth u16, tier u8, segment u8, slot bits u32. */
export const BUCKET_ROW_BYTES = 16;
const SEGMENT_SLOTS = 32;
/** The segment index is a u8. */
export const MAX_IMAGE_SLOTS = 256 * SEGMENT_SLOTS;

/** Slot bitmap width in 64-bit words for a slot table of `slots` entries (the filter's walk). */
export function slotWordsFor(slots: number): number {
  return Math.max(1, Math.ceil(slots / 64));
}

interface Row {
  hash: bigint;
  entry: ChunkEntry;
  tier: Tier;
  slots: number[];
}

function keepOrder(a: Row, b: Row): number {
  return (
    a.entry.depth - b.entry.depth ||
    a.tier - b.tier ||
    b.entry.stampMs - a.entry.stampMs ||
    (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0)
  );
}

/** A full bucket that keeps its newest rows: the most recently stored first, then as keepOrder. */
function newestOrder(a: Row, b: Row): number {
  return (
    b.entry.stampMs - a.entry.stampMs ||
    a.entry.depth - b.entry.depth ||
    a.tier - b.tier ||
    (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0)
  );
}

function onlyGpu(entry: ChunkEntry): boolean {
  if (entry.tiers === undefined) return true;
  for (const t of entry.tiers) if (t !== TIER_GPU) return false;
  return true;
}

function rowsOf(entries: Array<[bigint, ChunkEntry]>): Row[] {
  const rows: Row[] = [];
  for (const [hash, entry] of entries) {
    // The common case, GPU copies only and no speculative route: the holders are the row.
    if ((entry.speculative === undefined || entry.speculative.size === 0) && onlyGpu(entry)) {
      rows.push({ hash, entry, tier: TIER_GPU, slots: entry.slots });
      continue;
    }
    const byTier: number[][] = Array.from({ length: TIER_COUNT }, () => []);
    for (const [slot, tier] of bestTiers(entry)) byTier[tier]?.push(slot);
    for (let t = 0; t < TIER_COUNT; t++) {
      const slots = byTier[t] as number[];
      if (slots.length > 0) rows.push({ hash, entry, tier: t as Tier, slots });
    }
  }
  return rows;
}

/** The rows of one group: per segment holding one of its slots (below `limit`), ascending. */
function segmentsOf(slots: number[], limit: number): Array<[number, number]> {
  const bits = new Map<number, number>();
  for (const slot of slots) {
    if (slot >= limit) continue;
    const s = Math.floor(slot / SEGMENT_SLOTS);
    bits.set(s, ((bits.get(s) ?? 0) | (1 << (slot % SEGMENT_SLOTS))) >>> 0);
  }
  return [...bits.entries()].sort((a, b) => a[0] - b[0]);
}

/** `newest`: the order of a full bucket that keeps its newest rows (cache.fullKeep). */
export function encodeBucket(
  entries: Array<[bigint, ChunkEntry]>,
  ways: number,
  slotWords: number,
  newest = false,
): Uint8Array {
  const limit = Math.min(slotWords * 64, MAX_IMAGE_SLOTS);
  const kept: Array<{ row: Row; segment: number; bits: number }> = [];
  for (const row of rowsOf(entries).sort(newest ? newestOrder : keepOrder)) {
    for (const [segment, bits] of segmentsOf(row.slots, limit)) kept.push({ row, segment, bits });
    if (kept.length >= ways) break;
  }
  kept.length = Math.min(kept.length, ways);
  const out = new Uint8Array(BUCKET_HEADER_BYTES + kept.length * BUCKET_ROW_BYTES);
  const view = new DataView(out.buffer);
  // Byte 1 (the bitmap width of the earlier format) is 0: a reader of that format finds no rows.
  view.setUint16(2, kept.length, true);
  let at = BUCKET_HEADER_BYTES;
  for (const { row, segment, bits } of kept) {
    view.setBigUint64(at, row.hash, true);
    view.setUint16(at + 8, row.entry.depth & 0xffff, true);
    view.setUint8(at + 10, row.tier);
    view.setUint8(at + 11, segment);
    view.setUint32(at + 12, bits, true);
    at += BUCKET_ROW_BYTES;
  }
  return out;
}

export interface DecodedBucketEntry {
  hash: bigint;
  /** The chunk's position modulo 65536 (the image keeps its low 16 bits). */
  depth: number;
  tier: number;
  slots: number[];
}

/** For tests and the status API; the filter has its own reader. A (hash, tier)'s rows are merged. */
export function decodeBucket(bytes: Uint8Array): DecodedBucketEntry[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < BUCKET_HEADER_BYTES || view.getUint16(0, true) !== 0)
    throw new Error("not a bucket image of segment rows");
  const count = view.getUint16(2, true);
  if (bytes.length !== BUCKET_HEADER_BYTES + count * BUCKET_ROW_BYTES)
    throw new Error(`bucket image of ${bytes.length} bytes does not hold ${count} rows`);
  const out: DecodedBucketEntry[] = [];
  const byKey = new Map<string, DecodedBucketEntry>();
  for (let i = 0, at = BUCKET_HEADER_BYTES; i < count; i++, at += BUCKET_ROW_BYTES) {
    const hash = view.getBigUint64(at, true);
    const tier = view.getUint8(at + 10);
    const key = `${hash}/${tier}`;
    let entry = byKey.get(key);
    if (entry === undefined) {
      entry = { hash, depth: view.getUint16(at + 8, true), tier, slots: [] };
      byKey.set(key, entry);
      out.push(entry);
    }
    const base = view.getUint8(at + 11) * SEGMENT_SLOTS;
    const bits = view.getUint32(at + 12, true);
    for (let b = 0; b < SEGMENT_SLOTS; b++) if ((bits >>> b) & 1) entry.slots.push(base + b);
  }
  for (const entry of out) entry.slots.sort((a, b) => a - b);
  return out;
}
