import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";
import { walk } from "./core-probes.ts";

const BUCKETS = 64;

/** A chain of K chunk hashes and slots holding its first depth[s] chunks, as bucket images. */
function scenario(k: number, depths: number[], seed = 1n) {
  const hashes = Array.from(
    { length: k },
    (_, i) => (BigInt(i + 1) * 0x9e3779b97f4a7c15n + seed) % 2n ** 64n,
  );
  const index = new ChunkIndex(BUCKETS);
  depths.forEach((d, slot) => {
    for (let i = 0; i < d; i++) index.add(hashes[i] as bigint, i + 1, slot, 0);
  });
  const words = Math.max(1, Math.ceil(depths.length / 64));
  const images = new Map<number, Uint8Array>();
  for (let b = 0; b < BUCKETS; b++) images.set(b, encodeBucket(index.bucketEntries(b), 64, words));
  const all = Array.from({ length: words }, (_, w) => {
    let bits = 0n;
    for (let s = w * 64; s < Math.min(depths.length, w * 64 + 64); s++) bits |= 1n << BigInt(s - w * 64);
    return bits;
  });
  return { hashes, images, all, words };
}

describe("prefix walk", () => {
  it("finds every slot's cached depth", () => {
    const depths = [0, 1000, 17, 1000, 0, 3, 999, 500];
    const { hashes, images, all } = scenario(1000, depths);
    const r = walk(hashes, all, images, BUCKETS, depths.length);
    expect(r.depth).toEqual(depths);
    // Distinct depths × log2(K), far below probing all 1000 chunks.
    expect(r.lookups).toBeLessThan(5 * 11);
  });

  it("costs one bucket read for a prompt nobody holds", () => {
    const { hashes, images, all } = scenario(4096, [0, 0, 0, 0]);
    expect(walk(hashes, all, images, BUCKETS, 4)).toEqual({ lookups: 1, depth: [0, 0, 0, 0] });
  });

  it("costs two reads when every slot holds the whole prompt", () => {
    const { hashes, images, all } = scenario(4096, [4096, 4096]);
    expect(walk(hashes, all, images, BUCKETS, 2)).toEqual({ lookups: 2, depth: [4096, 4096] });
  });

  it("considers only candidate slots and more than 64 slots", () => {
    const depths = Array.from({ length: 130 }, (_, s) => (s * 7) % 41);
    const { hashes, images, all } = scenario(40, depths);
    const onlyEven = all.map((w) => w & 0x5555555555555555n);
    const r = walk(hashes, onlyEven, images, BUCKETS, depths.length);
    expect(r.depth).toEqual(depths.map((d, s) => (s % 2 === 0 ? d : 0)));
  });

  it("treats missing or damaged buckets as empty instead of trapping", () => {
    const { hashes, images, all } = scenario(100, [100, 50]);
    const damaged = new Map([...images].map(([b, img]) => [b, img.subarray(0, Math.max(0, img.length - 3))]));
    expect(walk(hashes, all, damaged, BUCKETS, 2).depth.every((d) => d >= 0)).toBe(true);
    expect(walk(hashes, all, new Map(), BUCKETS, 2).depth).toEqual([0, 0]);
  });

  it("matches brute force on random holdings", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 300 }),
        fc.array(fc.nat(300), { minLength: 1, maxLength: 70 }),
        (k, raw) => {
          const depths = raw.map((d) => d % (k + 1));
          const { hashes, images, all } = scenario(k, depths, BigInt(k));
          expect(walk(hashes, all, images, BUCKETS, depths.length).depth).toEqual(depths);
        },
      ),
      { numRuns: 200 },
    );
  });
});
