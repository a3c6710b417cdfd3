// A bucket that indexes more chunks than `ways` shows only its first `fullWays` rows (the keep
// order's shallowest) until it is down to ways − max(1, ways / 8) chunks (filter/core/chunk-table.ts
// setRowLimits): a full bucket re-encodes about twice per shown row and cache lifetime, so this
// bounds publication where buckets fill (docs/scaling.md).
import { afterEach, describe, expect, it } from "vitest";
import { core } from "../../control-plane/src/core/core-wasm.ts";
import { decodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";
import { PublishedBuckets } from "../../control-plane/src/index/published-buckets.ts";

const WAYS = 6;
const FULL_WAYS = 2;
let index: ChunkIndex;
let published: PublishedBuckets;

/** One bucket; chunk c at depth c, on slot c (so the keep order is 1, 2, 3, …). */
function start(): void {
  index = new ChunkIndex(1);
  published = new PublishedBuckets(core(), index, {
    buckets: 1,
    ways: WAYS,
    slotWords: 1,
    fullWays: FULL_WAYS,
  });
}
const add = (c: number) => index.add(BigInt(c), c, c, 100);
const remove = (c: number) => index.remove(BigInt(c), c);
/** Publishes what is dirty and returns the chunks the published image shows. */
function shown(): bigint[] {
  published.publishDirty(1);
  return decodeBucket(published.value(0)).map((r) => r.hash);
}

afterEach(() => {
  published.dispose();
  index.dispose();
});

describe("full buckets", () => {
  it("show every row while the bucket indexes at most `ways` chunks, the first fullWays once it indexes more", () => {
    start();
    for (let c = 1; c <= WAYS; c++) add(c);
    expect(shown().sort()).toEqual([1n, 2n, 3n, 4n, 5n, 6n]);
    add(7);
    expect(shown().sort()).toEqual([1n, 2n]);
    // A deeper chunk's change does not reach the shown rows: the bucket stays clean.
    add(8);
    expect(index.takeDirty()).toEqual([]);
  });

  it("stay in full mode down to ways − max(1, ways / 8) chunks, then show every row again", () => {
    start();
    for (let c = 1; c <= WAYS + 1; c++) add(c);
    expect(shown().sort()).toEqual([1n, 2n]);
    // 7 → 6 chunks: back within `ways`, but not below the band.
    remove(7);
    expect(shown().sort()).toEqual([1n, 2n]);
    remove(6);
    expect(shown().sort()).toEqual([1n, 2n, 3n, 4n, 5n]);
  });

  it("take their mode from the chunks indexed before the first publication", () => {
    index = new ChunkIndex(1);
    for (let c = 1; c <= WAYS + 3; c++) add(c);
    published = new PublishedBuckets(core(), index, {
      buckets: 1,
      ways: WAYS,
      slotWords: 1,
      fullWays: FULL_WAYS,
    });
    index.markDirty(0);
    expect(shown().sort()).toEqual([1n, 2n]);
  });
});
