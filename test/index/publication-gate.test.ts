// A bucket is re-encoded for publication only when a change can show in the rows it keeps
// (filter/core/chunk-table.ts visible, set by each publication): at hundreds of ranks most KV
// events touch chunks no gateway sees. Each case is a change next to the boundary of the kept rows.
import { afterEach, describe, expect, it } from "vitest";
import { core } from "../../control-plane/src/core/core-wasm.ts";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";
import { PublishedBuckets } from "../../control-plane/src/index/published-buckets.ts";
import { TIER_CPU, TIER_GPU } from "../../control-plane/src/index/tier.ts";

const WAYS = 5;
let index: ChunkIndex;
let published: PublishedBuckets;

/** One bucket, published with chunks 1..n at depth 1, stamp 100, one slot each (kept: hashes 1..5). */
function full(n = 10): void {
  index = new ChunkIndex(1);
  published = new PublishedBuckets(core(), index, {
    buckets: 1,
    ways: WAYS,
    slotWords: 2,
    fullKeep: "shallowest",
  });
  for (let c = 1; c <= n; c++) index.add(BigInt(c), 1, c, 100);
  published.publishDirty(1);
}

const dirty = () => index.takeDirty().length > 0;

afterEach(() => {
  published.dispose();
  index.dispose();
});

describe("the publication gate", () => {
  it("leaves the bucket clean for changes behind the kept rows", () => {
    full();
    index.add(99n, 2, 3, 500); // deeper
    index.add(7n, 1, 4, 100); // a chunk cut off, same stamp: sorts after hash 5
    index.add(8n, 1, 5, 50); // older
    index.remove(9n, 9); // a chunk no row shows leaves
    expect(dirty()).toBe(false);
  });

  it("dirties the bucket for a change to the last kept row, whose key equals the boundary", () => {
    full();
    index.remove(5n, 5);
    expect(dirty()).toBe(true);
    index.add(5n, 1, 6, 100);
    expect(dirty()).toBe(true);
  });

  it("dirties it for a newer chunk at the boundary's depth", () => {
    full();
    index.add(20n, 1, 1, 101);
    expect(dirty()).toBe(true);
  });

  it("dirties it for a chunk with the boundary's stamp and a smaller hash", () => {
    full();
    index.add(0n, 1, 1, 100);
    expect(dirty()).toBe(true);
  });

  it("counts a chunk's best tier against a boundary row off the GPU", () => {
    index = new ChunkIndex(1);
    published = new PublishedBuckets(core(), index, {
      buckets: 1,
      ways: WAYS,
      slotWords: 2,
      fullKeep: "shallowest",
    });
    for (let c = 1; c <= 4; c++) index.add(BigInt(c), 1, c, 100);
    for (let c = 5; c <= 10; c++) index.add(BigInt(c), 1, c, 100, TIER_CPU);
    published.publishDirty(1);
    // An older GPU chunk at the boundary's depth sorts before its CPU row.
    index.add(50n, 1, 1, 10, TIER_GPU);
    expect(dirty()).toBe(true);
  });

  it("dirties every change while the bucket has room", () => {
    full(3);
    index.add(99n, 9, 3, 1);
    expect(dirty()).toBe(true);
  });
});

describe("the publication gate of a full bucket that keeps its newest rows", () => {
  /** One bucket with chunks 1..10, chunk c at depth c and stamp 10·c (shown: 6..10, the boundary chunk 6). */
  function fullNewest(): void {
    index = new ChunkIndex(1);
    published = new PublishedBuckets(core(), index, {
      buckets: 1,
      ways: WAYS,
      slotWords: 2,
      fullKeep: "newest",
    });
    for (let c = 1; c <= 10; c++) index.add(BigInt(c), c, c, 10 * c);
    published.publishDirty(1);
  }

  it("leaves the bucket clean for changes to chunks older than the shown rows, however shallow", () => {
    fullNewest();
    index.add(2n, 2, 7, 20); // a second holder, stored as long ago
    index.add(3n, 3, 3, 59); // stored again, still before the boundary's stamp
    index.remove(1n, 1); // the oldest chunk leaves
    expect(dirty()).toBe(false);
  });

  it("dirties it for a chunk stored after the boundary, however deep", () => {
    fullNewest();
    index.add(500n, 500, 1, 61);
    expect(dirty()).toBe(true);
  });

  it("dirties it for a shown chunk stored again with an earlier time, which keeps its later stamp", () => {
    fullNewest();
    // Chunk 8 is shown (stamp 80); a store is reported at time 5 (the wall clock stepped back).
    // Its stamp stays 80, so the change is answered as a shown chunk's (a change of its rows),
    // not as one stamped before the boundary (60), which would leave the bucket clean.
    index.add(8n, 8, 3, 5);
    expect(dirty()).toBe(true);
    published.publishDirty(2);
    index.remove(8n, 3); // the new holder leaves again: still shown
    expect(dirty()).toBe(true);
  });

  it("dirties it for a chunk with the boundary's stamp and a smaller depth", () => {
    fullNewest();
    index.add(3n, 3, 20, 60);
    expect(dirty()).toBe(true);
  });
});
