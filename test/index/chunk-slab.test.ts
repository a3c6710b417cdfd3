// The chunk table keeps its records in segments that never move (filter/core/record-slab.ts): the
// first grows in place up to 65,536 records, then each growth adds one. Every chunk must stay
// findable with its holders and its bucket list across those boundaries, through removals that
// put records on the free list and adds that take them back. A record keeps two holders inline and
// more in a heap array that takes the inline holders' place (filter/core/chunk-table.ts).
import { afterEach, describe, expect, it } from "vitest";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";

const SEGMENT = 65_536;
let index: ChunkIndex;

afterEach(() => index.dispose());

/** A chunk hash of n, spread over the buckets. */
const hashOf = (n: number) => (BigInt(n) * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;

describe("the chunk table's record slab", () => {
  it("finds every chunk across segment boundaries, through removals and reuse", () => {
    index = new ChunkIndex(256);
    const total = 2 * SEGMENT + 1000;
    for (let n = 0; n < total; n++) index.add(hashOf(n), 1 + (n % 50), n % 7, 1000 + n);
    expect(index.size).toBe(total);
    // The slab grew by whole segments past the first, not by doubling.
    const bytesFull = index.bytes;
    // Every third chunk goes; its record waits on the free list.
    for (let n = 0; n < total; n += 3) index.remove(hashOf(n), n % 7);
    expect(index.size).toBe(total - Math.ceil(total / 3));
    // New chunks take the freed records back: no growth.
    for (let n = total; n < total + Math.ceil(total / 3); n++) index.add(hashOf(n), 2, 3, 5000 + n);
    expect(index.bytes).toBe(bytesFull);
    for (const n of [0, 1, 2, 3, SEGMENT - 1, SEGMENT, SEGMENT + 1, 2 * SEGMENT + 2, total - 1, total + 5]) {
      const entry = index.get(hashOf(n));
      if (n < total && n % 3 === 0) expect(entry).toBeUndefined();
      else expect(entry?.slots).toEqual([n < total ? n % 7 : 3]);
    }
    // Each bucket's list holds exactly its live chunks.
    let listed = 0;
    for (let b = 0; b < 256; b++) {
      const entries = index.bucketEntries(b);
      for (const [hash] of entries) expect(index.bucketOf(hash)).toBe(b);
      listed += entries.length;
    }
    expect(listed).toBe(index.size);
  });

  it("moves a chunk's holders from the record to a heap array past two, and a reused record starts inline", () => {
    index = new ChunkIndex(4);
    for (let slot = 1; slot <= 5; slot++) index.add(7n, 3, slot, 100 + slot);
    expect(index.get(7n)?.slots).toEqual([1, 2, 3, 4, 5]);
    // Removing a holder moves the last one into its place.
    index.remove(7n, 2);
    expect(index.get(7n)?.slots).toEqual([1, 5, 3, 4]);
    for (const slot of [1, 5, 3, 4]) index.remove(7n, slot);
    expect(index.get(7n)).toBeUndefined();
    // The dropped record goes to the next new chunk, whose holders are inline again.
    index.add(11n, 1, 9, 200);
    index.add(11n, 1, 8, 200);
    expect(index.get(11n)?.slots).toEqual([9, 8]);
    index.add(11n, 1, 6, 200);
    expect(index.get(11n)?.slots).toEqual([9, 8, 6]);
    expect(index.size).toBe(1);
  });

  it("holds its records plus at most one segment's spare once past the first segment", () => {
    index = new ChunkIndex(64);
    const records = 4 * SEGMENT + 17;
    for (let n = 0; n < records; n++) index.add(hashOf(n), 1, 0, 0);
    // 40-byte records in 5 segments (a doubled slab would hold 8), the lookup table (2 MiB) and
    // the bucket arrays besides.
    const slab = 5 * SEGMENT * 40;
    expect(index.bytes).toBeGreaterThanOrEqual(slab);
    expect(index.bytes).toBeLessThan(slab + SEGMENT * 40);
  });
});
