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
  it("encodes hash, depth and the slot bitmap at the documented offsets", () => {
    const index = new ChunkIndex(1);
    index.add(2n ** 64n - 1n, 7, 0, 1);
    index.add(2n ** 64n - 1n, 7, 65, 1);
    const image = encodeBucket(index.bucketEntries(0), 8, slotWordsFor(100));
    const view = new DataView(image.buffer);
    expect(image.length).toBe(4 + 16 + 16);
    expect([view.getUint8(0), view.getUint8(1)]).toEqual([1, 2]);
    expect(view.getBigUint64(4, true)).toBe(2n ** 64n - 1n);
    expect(view.getUint32(12, true)).toBe(7);
    expect(view.getBigUint64(20, true)).toBe(1n);
    expect(view.getBigUint64(28, true)).toBe(2n);
    expect(view.getUint8(16)).toBe(0); // tier: GPU
    expect(decodeBucket(image)).toEqual([{ hash: 2n ** 64n - 1n, depth: 7, tier: 0, slots: [0, 65] }]);
  });

  it("writes one row per tier, each slot in the row of its best copy, the tier at offset 12", () => {
    const index = new ChunkIndex(1);
    index.add(5n, 1, 0, 1, TIER_GPU);
    index.add(5n, 1, 0, 1, TIER_CPU); // slot 0: GPU and CPU copies → GPU row only
    index.add(5n, 1, 1, 1, TIER_CPU);
    index.add(5n, 1, 2, 1, TIER_STORAGE);
    index.add(5n, 1, 3, 1, TIER_CPU);
    index.add(5n, 1, 3, 1, TIER_STORAGE); // slot 3: CPU beats storage
    const image = encodeBucket(index.bucketEntries(0), 8, 1);
    const view = new DataView(image.buffer);
    expect(view.getUint8(0)).toBe(3);
    expect([4, 28, 52].map((at) => view.getUint8(at + 12))).toEqual([0, 1, 2]);
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
