// A bucket's chunks are found through the chunk map's slot order (filter/core/u64-map.ts
// bucketFirst: a key's home is its bucket, then its high bits), not through links in the records.
// Listing a bucket must give exactly its live chunks however the keys fall: more buckets than
// slots (buckets share a home), more slots than buckets (a bucket's run of slots, with keys pushed
// past its end), the last bucket's run wrapping round to slot 0, and keys clustered on one home.
import { afterEach, describe, expect, it } from "vitest";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";

let index: ChunkIndex;

afterEach(() => index.dispose());

const MASK64 = (1n << 64n) - 1n;

/** A 64-bit generator (splitmix64), so each case's keys are the same on every run. */
function keys(seed: bigint): () => bigint {
  let s = seed;
  return () => {
    s = (s + 0x9e3779b97f4a7c15n) & MASK64;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
    return z ^ (z >> 31n);
  };
}

/** Every bucket's listing against the chunks the test knows are live. */
function expectListings(buckets: number, live: Set<bigint>): void {
  const byBucket = new Map<number, bigint[]>();
  for (const h of live) {
    const b = index.bucketOf(h);
    byBucket.set(b, [...(byBucket.get(b) ?? []), h]);
  }
  for (let b = 0; b < buckets; b++) {
    const listed = index
      .bucketEntries(b)
      .map(([h]) => h)
      .sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
    const want = (byBucket.get(b) ?? []).sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
    expect(listed, `bucket ${b}`).toEqual(want);
  }
}

/** Adds `n` chunks from `next`, then removes every other one and adds n / 4 more. */
function churn(next: () => bigint, n: number): Set<bigint> {
  const live = new Set<bigint>();
  const order: bigint[] = [];
  for (let i = 0; i < n; i++) {
    const h = next();
    index.add(h, 1 + (i % 9), i % 5, 1000 + i);
    live.add(h);
    order.push(h);
  }
  for (let i = 0; i < order.length; i += 2) {
    const h = order[i] as bigint;
    index.remove(h, i % 5);
    live.delete(h);
  }
  for (let i = 0; i < n / 4; i++) {
    const h = next();
    index.add(h, 2, 1, 9000 + i);
    live.add(h);
  }
  expect(index.size).toBe(live.size);
  return live;
}

describe("listing a bucket's chunks from the chunk map", () => {
  it("with more buckets than slots: buckets share a home", () => {
    index = new ChunkIndex(65_536);
    expectListings(65_536, churn(keys(1n), 3000));
  });

  it("with more slots than buckets: keys pushed past the end of their bucket's run are found", () => {
    index = new ChunkIndex(4);
    expectListings(4, churn(keys(2n), 20_000));
  });

  it("when the last bucket's run wraps round to the first slot", () => {
    index = new ChunkIndex(16);
    // Bucket 15 with the highest high bits: homes at the table's last slots, spilling into slot 0
    // and beyond, where bucket 0's keys start.
    let k = 0n;
    const next = keys(3n);
    const live = churn(() => {
      k++;
      const r = next();
      return k % 3n === 0n ? (0xffffff00n << 32n) | ((r & 0xffffff00n) | 0x0fn) : r;
    }, 4000);
    expectListings(16, live);
  });

  it("when every key has the same high bits: one home per bucket, long runs across buckets", () => {
    index = new ChunkIndex(64);
    const next = keys(4n);
    expectListings(
      64,
      churn(() => (0x12345678n << 32n) | (next() & 0xffffffffn), 2000),
    );
  });
});
