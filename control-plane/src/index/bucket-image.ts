// Encodes one prefix-index bucket as the value of shared-data key `kvr.b.<i>`
// (docs/wire-format.md §4.4). The control plane decides what a full bucket keeps, so the
// filter only ever reads: shallow chunks first (losing chunk 1 of a prompt hides every deeper
// chunk from the filter's prefix walk), then the better tier, then the most recently stored,
// then the smaller hash so the choice is deterministic.
//
// One row per (chunk hash, tier): the row of tier t has the slots whose best copy of the chunk
// is on t (a slot with a GPU and a CPU copy is in the GPU row only), so the filter learns each
// slot's tier from the row it finds it in.
import { bestTiers, type ChunkEntry } from "./chunk-index.ts";
import { TIER_COUNT, TIER_GPU, type Tier } from "./tier.ts";

export const BUCKET_HEADER_BYTES = 4;

export function bucketEntryBytes(slotWords: number): number {
  return 16 + 8 * slotWords;
}

/** Slot bitmap width in 64-bit words for a slot table of `slots` entries. */
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

export function encodeBucket(
  entries: Array<[bigint, ChunkEntry]>,
  ways: number,
  slotWords: number,
): Uint8Array {
  const kept = rowsOf(entries).sort(keepOrder).slice(0, ways);
  const entrySize = bucketEntryBytes(slotWords);
  const out = new Uint8Array(BUCKET_HEADER_BYTES + kept.length * entrySize);
  const view = new DataView(out.buffer);
  view.setUint8(0, kept.length);
  view.setUint8(1, slotWords);
  let at = BUCKET_HEADER_BYTES;
  for (const row of kept) {
    view.setBigUint64(at, row.hash, true);
    view.setUint32(at + 8, Math.min(row.entry.depth, 0xffffffff), true);
    view.setUint8(at + 12, row.tier);
    for (const slot of row.slots) {
      if (slot >= slotWords * 64) continue;
      const word = at + 16 + 8 * (slot >>> 6);
      view.setBigUint64(word, view.getBigUint64(word, true) | (1n << BigInt(slot & 63)), true);
    }
    at += entrySize;
  }
  return out;
}

export interface DecodedBucketEntry {
  hash: bigint;
  depth: number;
  tier: number;
  slots: number[];
}

/** For tests and the status API; the filter has its own reader. */
export function decodeBucket(bytes: Uint8Array): DecodedBucketEntry[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = view.getUint8(0);
  const slotWords = view.getUint8(1);
  const entrySize = bucketEntryBytes(slotWords);
  if (bytes.length !== BUCKET_HEADER_BYTES + count * entrySize)
    throw new Error(`bucket image of ${bytes.length} bytes does not hold ${count} entries`);
  const out: DecodedBucketEntry[] = [];
  for (let i = 0, at = BUCKET_HEADER_BYTES; i < count; i++, at += entrySize) {
    const slots: number[] = [];
    for (let w = 0; w < slotWords; w++) {
      const bits = view.getBigUint64(at + 16 + 8 * w, true);
      for (let b = 0; b < 64; b++) if ((bits >> BigInt(b)) & 1n) slots.push(w * 64 + b);
    }
    out.push({
      hash: view.getBigUint64(at, true),
      depth: view.getUint32(at + 8, true),
      tier: view.getUint8(at + 12),
      slots,
    });
  }
  return out;
}
