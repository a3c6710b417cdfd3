import { describe, expect, it } from "vitest";
import { decodeBucket, encodeBucket, slotWordsFor } from "../../control-plane/src/index/bucket-image.ts";
import { type ChunkEntry, ChunkIndex, holderCount } from "../../control-plane/src/index/chunk-index.ts";
import { TIER_CPU, TIER_GPU, TIER_STORAGE } from "../../control-plane/src/index/tier.ts";

describe("chunk index", () => {
  it("counts holders per slot and marks the bucket dirty on every change", () => {
    const index = new ChunkIndex(16);
    const h = 0xffff_ffff_ffff_fff3n; // bucket 3
    index.add(h, 1, 5, 100);
    index.add(h, 1, 5, 200); // the same chunk from a second block on slot 5
    index.add(h, 1, 70, 300);
    expect(index.takeDirty()).toEqual([3]);
    const e = index.get(h);
    expect([e?.slots, e?.counts]).toEqual([
      [5, 70],
      [2, 1],
    ]);
    index.remove(h, 5);
    expect(holderCount(index.get(h) as ChunkEntry, 5)).toBe(1);
    index.remove(h, 5);
    index.remove(h, 70);
    expect(index.get(h)).toBeUndefined();
    expect(index.bucketEntries(3)).toEqual([]);
    expect(index.takeDirty()).toEqual([3]);
    expect(() => new ChunkIndex(12)).toThrow(/power of two/);
  });
});

describe("bucket image", () => {
  it("encodes hash, depth, tier, segment and slot bits at the documented offsets", () => {
    const index = new ChunkIndex(1);
    index.add(2n ** 64n - 1n, 70_007, 0, 1);
    index.add(2n ** 64n - 1n, 70_007, 65, 1);
    const image = encodeBucket(index.bucketEntries(0), 8, slotWordsFor(100));
    const view = new DataView(image.buffer);
    // Two rows: slot 0 in segment 0, slot 65 (bit 1) in segment 2.
    expect(image.length).toBe(4 + 2 * 16);
    expect([view.getUint8(0), view.getUint8(1), view.getUint16(2, true)]).toEqual([0, 0, 2]);
    for (const [at, segment, bits] of [
      [4, 0, 1],
      [20, 2, 2],
    ] as const) {
      expect(view.getBigUint64(at, true)).toBe(2n ** 64n - 1n);
      expect(view.getUint16(at + 8, true)).toBe(70_007 & 0xffff); // depth: its low 16 bits
      expect(view.getUint8(at + 10)).toBe(0); // tier: GPU
      expect(view.getUint8(at + 11)).toBe(segment);
      expect(view.getUint32(at + 12, true)).toBe(bits);
    }
    expect(decodeBucket(image)).toEqual([
      { hash: 2n ** 64n - 1n, depth: 70_007 & 0xffff, tier: 0, slots: [0, 65] },
    ]);
    // A slot beyond the image's slot range (the walk's bitmap words) is not written.
    expect(decodeBucket(encodeBucket(index.bucketEntries(0), 8, 1))).toEqual([
      { hash: 2n ** 64n - 1n, depth: 70_007 & 0xffff, tier: 0, slots: [0] },
    ]);
  });

  it("counts rows, not chunks, against `ways`: a chunk on slots in several segments takes several", () => {
    const index = new ChunkIndex(1);
    for (const slot of [1, 40, 100]) index.add(30n, 1, slot, 100);
    index.add(31n, 2, 3, 100);
    const image = encodeBucket(index.bucketEntries(0), 3, 2);
    expect(new DataView(image.buffer).getUint16(2, true)).toBe(3);
    expect(decodeBucket(image)).toEqual([{ hash: 30n, depth: 1, tier: 0, slots: [1, 40, 100] }]);
    // Two rows: the deeper chunk's row is the one cut, then the shallow chunk's last segment.
    expect(decodeBucket(encodeBucket(index.bucketEntries(0), 2, 2))).toEqual([
      { hash: 30n, depth: 1, tier: 0, slots: [1, 40] },
    ]);
  });

  it("writes one row per tier, each slot in the row of its best copy, the tier at offset 10", () => {
    const index = new ChunkIndex(1);
    index.add(5n, 1, 0, 1, TIER_GPU);
    index.add(5n, 1, 0, 1, TIER_CPU); // slot 0: GPU and CPU copies → GPU row only
    index.add(5n, 1, 1, 1, TIER_CPU);
    index.add(5n, 1, 2, 1, TIER_STORAGE);
    index.add(5n, 1, 3, 1, TIER_CPU);
    index.add(5n, 1, 3, 1, TIER_STORAGE); // slot 3: CPU beats storage
    const image = encodeBucket(index.bucketEntries(0), 8, 1);
    const view = new DataView(image.buffer);
    expect(view.getUint16(2, true)).toBe(3);
    expect([4, 20, 36].map((at) => view.getUint8(at + 10))).toEqual([0, 1, 2]);
    expect(decodeBucket(image).map((e) => [e.tier, e.slots])).toEqual([
      [0, [0]],
      [1, [1, 3]],
      [2, [2]],
    ]);
    // Removing slot 0's GPU copy leaves its CPU copy: it moves to the CPU row.
    index.remove(5n, 0, TIER_GPU);
    expect(decodeBucket(encodeBucket(index.bucketEntries(0), 8, 1)).map((e) => [e.tier, e.slots])).toEqual([
      [1, [0, 1, 3]],
      [2, [2]],
    ]);
    // A speculative route counts as a GPU copy.
    index.speculate(5n, 1, 2, 0, 1000);
    expect(decodeBucket(encodeBucket(index.bucketEntries(0), 8, 1)).map((e) => [e.tier, e.slots])).toEqual([
      [0, [2]],
      [1, [0, 1, 3]],
    ]);
  });

  it("under pressure keeps a chunk's better tiers first at the same depth", () => {
    const index = new ChunkIndex(1);
    index.add(20n, 1, 0, 100, TIER_STORAGE);
    index.add(21n, 1, 1, 100, TIER_CPU);
    index.add(20n, 1, 2, 100, TIER_GPU);
    index.add(22n, 2, 0, 900, TIER_GPU);
    const kept = decodeBucket(encodeBucket(index.bucketEntries(0), 3, 1)).map((e) => [e.hash, e.tier]);
    expect(kept).toEqual([
      [20n, 0],
      [21n, 1],
      [20n, 2],
    ]);
  });

  it("keeps the shallowest, then the newest, then the smallest hash when a bucket overflows", () => {
    const index = new ChunkIndex(1);
    index.add(10n, 3, 0, 500); // deep
    index.add(11n, 1, 0, 100); // shallow, old
    index.add(12n, 2, 0, 900);
    index.add(13n, 2, 0, 900); // same depth and stamp as 12: smaller hash wins
    index.add(14n, 2, 0, 950); // same depth, newer
    const kept = decodeBucket(encodeBucket(index.bucketEntries(0), 3, 1)).map((e) => e.hash);
    expect(kept).toEqual([11n, 14n, 12n]);
    expect(decodeBucket(encodeBucket([], 3, 1))).toEqual([]);
  });
});

describe("speculative routes", () => {
  it("count as holders until they expire, without touching confirmed holders", () => {
    const index = new ChunkIndex(1);
    index.add(1n, 1, 0, 0);
    index.takeDirty();
    index.speculate(1n, 1, 3, 0, 1000);
    index.speculate(2n, 2, 3, 0, 1000);
    expect(index.takeDirty()).toEqual([0]);
    expect(decodeBucket(encodeBucket(index.bucketEntries(0), 8, 1)).map((e) => [e.hash, e.slots])).toEqual([
      [1n, [0, 3]],
      [2n, [3]],
    ]);
    index.speculate(2n, 2, 3, 500, 1500); // refreshed: outlives the first expiry
    index.expire(1000);
    expect(decodeBucket(encodeBucket(index.bucketEntries(0), 8, 1)).map((e) => [e.hash, e.slots])).toEqual([
      [1n, [0]],
      [2n, [3]],
    ]);
    index.expire(1500);
    expect(index.get(2n)).toBeUndefined();
    expect(holderCount(index.get(1n) as ChunkEntry, 0)).toBe(1);
    expect(index.takeDirty()).toEqual([0]);
  });
});
