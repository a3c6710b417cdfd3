// Encodes one prefix-index bucket as the value of shared-data key `kvr.b.<i>`
// (docs/wire-format.md §4.4). The control plane decides what a full bucket keeps, so the
// filter only ever reads: shallow chunks first (losing chunk 1 of a prompt hides every deeper
// chunk from the filter's prefix walk), then the most recently stored, then the smaller hash
// so the choice is deterministic.
import { type ChunkEntry, holdersOf } from "./chunk-index.ts";

export const BUCKET_HEADER_BYTES = 4;

export function bucketEntryBytes(slotWords: number): number {
  return 16 + 8 * slotWords;
}

/** Slot bitmap width in 64-bit words for a slot table of `slots` entries. */
export function slotWordsFor(slots: number): number {
  return Math.max(1, Math.ceil(slots / 64));
}

function keepOrder(a: [bigint, ChunkEntry], b: [bigint, ChunkEntry]): number {
  return a[1].depth - b[1].depth || b[1].stampMs - a[1].stampMs || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
}

export function encodeBucket(
  entries: Array<[bigint, ChunkEntry]>,
  ways: number,
  slotWords: number,
): Uint8Array {
  const kept =
    entries.length > ways ? [...entries].sort(keepOrder).slice(0, ways) : [...entries].sort(keepOrder);
  const entrySize = bucketEntryBytes(slotWords);
  const out = new Uint8Array(BUCKET_HEADER_BYTES + kept.length * entrySize);
  const view = new DataView(out.buffer);
  view.setUint8(0, kept.length);
  view.setUint8(1, slotWords);
  let at = BUCKET_HEADER_BYTES;
  for (const [hash, entry] of kept) {
    view.setBigUint64(at, hash, true);
    view.setUint32(at + 8, Math.min(entry.depth, 0xffffffff), true);
    for (const slot of holdersOf(entry)) {
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
    out.push({ hash: view.getBigUint64(at, true), depth: view.getUint32(at + 8, true), slots });
  }
  return out;
}
