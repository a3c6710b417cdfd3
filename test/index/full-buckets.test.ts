// A bucket that indexes more than ways + max(1, ways / 4) chunks shows only its first `fullWays`
// rows (the keep order's shallowest) until it is down to `ways` chunks (filter/core/chunk-table.ts
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
  it("show the first `ways` rows up to ways + ways / 4 chunks, the first fullWays beyond", () => {
    start();
    for (let c = 1; c <= WAYS + 1; c++) add(c);
    expect(shown().sort()).toEqual([1n, 2n, 3n, 4n, 5n, 6n]);
    add(8);
    expect(shown().sort()).toEqual([1n, 2n]);
    // A deeper chunk's change does not reach the shown rows: the bucket stays clean.
    add(9);
    expect(index.takeDirty()).toEqual([]);
  });

  it("stay in full mode down to `ways` chunks, then show `ways` rows again", () => {
    start();
    for (let c = 1; c <= WAYS + 2; c++) add(c);
    expect(shown().sort()).toEqual([1n, 2n]);
    // 8 → 7 chunks: below the entry, not yet within `ways`.
    remove(8);
    expect(shown().sort()).toEqual([1n, 2n]);
    remove(7);
    expect(shown().sort()).toEqual([1n, 2n, 3n, 4n, 5n, 6n]);
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
