import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeBucket, encodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";
import { TIER_CPU, TIER_GPU, TIER_STORAGE, type Tier } from "../../control-plane/src/index/tier.ts";
import { walk, walkTiers } from "./core-probes.ts";

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

  it("reads the bitmap rows a control plane from before segment rows publishes", () => {
    const depths = Array.from({ length: 130 }, (_, s) => (s * 7) % 41);
    const { hashes, images, all, words } = scenario(40, depths);
    // The earlier format: count u8, bitmap width u8, 0 u16, then rows of hash u64, depth u32,
    // tier u8, 3 reserved bytes and `words` u64 bitmap words.
    const bitmapRows = new Map<number, Uint8Array>();
    for (const [b, image] of images) {
      const rows = decodeBucket(image);
      const size = 16 + 8 * words;
      const out = new Uint8Array(4 + rows.length * size);
      const view = new DataView(out.buffer);
      view.setUint8(0, rows.length);
      view.setUint8(1, words);
      rows.forEach((row, i) => {
        const at = 4 + i * size;
        view.setBigUint64(at, row.hash, true);
        view.setUint32(at + 8, row.depth, true);
        view.setUint8(at + 12, row.tier);
        for (const s of row.slots)
          out[at + 16 + (s >> 3)] = (out[at + 16 + (s >> 3)] as number) | (1 << (s & 7));
      });
      bitmapRows.set(b, out);
    }
    expect(walk(hashes, all, bitmapRows, BUCKETS, depths.length).depth).toEqual(depths);
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

/**
 * Slot s holds chunks 1..g on the GPU (with a CPU copy of each when `copies`), g+1..c on CPU,
 * c+1..a on storage, for holdings[s] = [g, c, a].
 */
function tiered(k: number, holdings: Array<[number, number, number]>, copies = false, seed = 3n) {
  const hashes = Array.from(
    { length: k },
    (_, i) => (BigInt(i + 1) * 0x9e3779b97f4a7c15n + seed) % 2n ** 64n,
  );
  const index = new ChunkIndex(BUCKETS);
  holdings.forEach(([g, c, a], slot) => {
    for (let i = 0; i < a; i++) {
      const tier: Tier = i < g ? TIER_GPU : i < c ? TIER_CPU : TIER_STORAGE;
      index.add(hashes[i] as bigint, i + 1, slot, 0, tier);
      if (copies && tier === TIER_GPU) index.add(hashes[i] as bigint, i + 1, slot, 0, TIER_CPU);
    }
  });
  const images = new Map<number, Uint8Array>();
  for (let b = 0; b < BUCKETS; b++) images.set(b, encodeBucket(index.bucketEntries(b), 64, 1));
  const all = [holdings.length >= 64 ? (1n << 64n) - 1n : (1n << BigInt(holdings.length)) - 1n];
  return { hashes, images, all };
}

const W = { gpu: 1, cpu: 0.85, storage: 0.45 };

describe("prefix walk by tier", () => {
  it("finds each slot's GPU, GPU-or-CPU and any-tier depth, and weighs its chunks", () => {
    const holdings: Array<[number, number, number]> = [
      [0, 0, 0],
      [100, 100, 100],
      [0, 100, 100],
      [0, 0, 100],
      [40, 70, 90],
      [10, 10, 60],
    ];
    const { hashes, images, all } = tiered(100, holdings, true);
    const r = walkTiers(hashes, all, images, BUCKETS, holdings.length, W);
    expect(r.gpu).toEqual(holdings.map((h) => h[0]));
    expect(r.cpu).toEqual(holdings.map((h) => h[1]));
    expect(r.depth).toEqual(holdings.map((h) => h[2]));
    expect(r.cached.map((x) => Math.round(x * 1000) / 1000)).toEqual([
      0,
      100,
      85,
      45,
      40 + 25.5 + 9,
      10 + 22.5,
    ]);
  });

  it("reads no more buckets for a GPU-only fleet, and re-reads none for a tiered one", () => {
    // Every chunk on slot 0's GPU and slot 1's CPU: the GPU walk probes the chunks the first
    // walk read, from its memo.
    const { hashes, images, all } = tiered(1024, [
      [1024, 1024, 1024],
      [0, 1024, 1024],
    ]);
    const r = walkTiers(hashes, all, images, BUCKETS, 2, W);
    expect([r.lookups, r.gpu, r.depth]).toEqual([2, [1024, 0], [1024, 1024]]);
    const gpuOnly = tiered(1024, [[1024, 1024, 1024]]);
    expect(walkTiers(gpuOnly.hashes, gpuOnly.all, gpuOnly.images, BUCKETS, 1, W).lookups).toBe(2);
  });

  it("clamps weights into [0, 1] and ignores rows of tiers it does not know", () => {
    const { hashes, images, all } = tiered(10, [
      [5, 10, 10],
      [0, 0, 10],
    ]);
    const r = walkTiers(hashes, all, images, BUCKETS, 2, { gpu: 7, cpu: Number.NaN, storage: -1 });
    expect(r.cached).toEqual([5, 0]);
    // A row with tier 3 (a newer control plane's) is no hit for this filter.
    const bumped = new Map(
      [...images].map(([b, img]) => {
        const copy = Uint8Array.from(img);
        for (let at = 4; at + 16 <= copy.length; at += 16)
          if (copy[at + 10] === TIER_STORAGE) copy[at + 10] = 3;
        return [b, copy];
      }),
    );
    expect(walkTiers(hashes, all, bumped, BUCKETS, 2, W).depth).toEqual([10, 0]);
  });

  it("matches brute force on random tiered holdings", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.array(fc.tuple(fc.nat(200), fc.nat(200), fc.nat(200)), { minLength: 1, maxLength: 64 }),
        fc.boolean(),
        (k, raw, copies) => {
          const holdings = raw.map(([x, y, z]) =>
            [x % (k + 1), y % (k + 1), z % (k + 1)].sort((a, b) => a - b),
          ) as Array<[number, number, number]>;
          const { hashes, images, all } = tiered(k, holdings, copies, BigInt(k));
          const r = walkTiers(hashes, all, images, BUCKETS, holdings.length, W);
          expect([r.gpu, r.cpu, r.depth]).toEqual([
            holdings.map((h) => h[0]),
            holdings.map((h) => h[1]),
            holdings.map((h) => h[2]),
          ]);
          holdings.forEach(([g, c, a], s) => {
            expect(r.cached[s]).toBeCloseTo(g + 0.85 * (c - g) + 0.45 * (a - c), 9);
          });
        },
      ),
      { numRuns: 150 },
    );
  });
});
