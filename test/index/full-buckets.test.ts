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
    fullKeep: "shallowest",
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
      fullKeep: "shallowest",
    });
    index.markDirty(0);
    expect(shown().sort()).toEqual([1n, 2n]);
  });
});

describe("full buckets that keep their newest rows (cache.fullKeep: newest)", () => {
  /** One bucket of WAYS rows that shows all of them when full, keeping its newest. */
  function startNewest(slotWords = 1): void {
    index = new ChunkIndex(1);
    published = new PublishedBuckets(core(), index, {
      buckets: 1,
      ways: WAYS,
      slotWords,
      fullKeep: "newest",
    });
  }
  /** Chunk c stored at `stampMs` on slot c % 4, at depth `depth`. */
  const store = (c: number, depth: number, stampMs: number) => index.add(BigInt(c), depth, c % 4, stampMs);

  it("show their most recently stored chunks once they index more than `ways`, whatever their depth", () => {
    startNewest();
    for (let c = 1; c <= WAYS; c++) store(c, c, c * 10);
    expect(shown().sort()).toEqual([1n, 2n, 3n, 4n, 5n, 6n]);
    // A 7th chunk: the bucket is full and drops its oldest, chunk 1 (the shallowest).
    store(7, 7, 70);
    expect(shown().sort()).toEqual([2n, 3n, 4n, 5n, 6n, 7n]);
    // A deep chunk stored now enters; the oldest shown, chunk 2, goes.
    store(300, 300, 1000);
    expect(shown().sort()).toEqual([3n, 300n, 4n, 5n, 6n, 7n]);
    // Stored again, chunk 1 is the newest: it comes back in place of chunk 3.
    store(1, 1, 1100);
    expect(shown().sort()).toEqual([1n, 300n, 4n, 5n, 6n, 7n]);
  });

  it("leave the bucket clean when a chunk not shown changes, and bring the next newest in when a shown one goes", () => {
    startNewest();
    for (let c = 1; c <= WAYS + 2; c++) store(c, c, c * 10);
    expect(shown().sort()).toEqual([3n, 4n, 5n, 6n, 7n, 8n]);
    // Chunk 1 is older than every shown row: its removal cannot show.
    index.remove(1n, 1);
    expect(index.takeDirty()).toEqual([]);
    // Chunk 8 goes: the next newest, chunk 2, takes its place.
    index.remove(8n, 0);
    expect(shown().sort()).toEqual([2n, 3n, 4n, 5n, 6n, 7n]);
  });

  it("take a newer chunk's row off the end of the oldest shown chunk: one of its segments first, then the rest", () => {
    // Two slot words: slot 40 is in the second 32-slot segment, so a chunk on slots 0 and 40 has two rows.
    startNewest(2);
    // Each row as chunk:segment (docs/wire-format.md §4.4: 16-byte rows after a 4-byte header, the
    // hash at 0, tier | segment << 8 at 10), with the slots the image decodes to.
    const rows = (image: Uint8Array) => {
      const view = new DataView(image.buffer, image.byteOffset, image.byteLength);
      const out: string[] = [];
      for (let at = 4; at < image.length; at += 16)
        out.push(`${view.getBigUint64(at, true)}:${view.getUint16(at + 10, true) >> 8}`);
      return [
        ...out.sort(),
        decodeBucket(image)
          .map((r) => `${r.hash}@${r.slots.join(",")}`)
          .sort()
          .join(" "),
      ];
    };
    const publishedRows = () => {
      published.publishDirty(1);
      const image = published.value(0);
      // What the core holds is what a whole encode of the index shows now.
      expect(rows(image)).toEqual(rows(index.encodeBucket(0, WAYS, 2)));
      return rows(image);
    };
    for (let c = 1; c <= WAYS; c++) index.add(BigInt(c), c, 1, c * 10);
    index.add(7n, 7, 0, 70);
    index.add(7n, 7, 40, 70);
    expect(publishedRows()).toEqual(["3:0", "4:0", "5:0", "6:0", "7:0", "7:1", "3@1 4@1 5@1 6@1 7@0,40"]);
    for (let c = 8; c <= 11; c++) index.add(BigInt(c), c, 1, c * 10);
    expect(publishedRows()).toEqual(["10:0", "11:0", "7:0", "7:1", "8:0", "9:0", "10@1 11@1 7@0,40 8@1 9@1"]);
    // Chunk 12 takes one row: chunk 7, now the oldest shown, keeps its lower segment.
    index.add(12n, 12, 1, 120);
    expect(publishedRows()).toEqual([
      "10:0",
      "11:0",
      "12:0",
      "7:0",
      "8:0",
      "9:0",
      "10@1 11@1 12@1 7@0 8@1 9@1",
    ]);
    index.add(13n, 13, 1, 130);
    expect(publishedRows()).toEqual([
      "10:0",
      "11:0",
      "12:0",
      "13:0",
      "8:0",
      "9:0",
      "10@1 11@1 12@1 13@1 8@1 9@1",
    ]);
    // A chunk with two rows in front takes two single rows off the end.
    index.add(14n, 14, 2, 140);
    index.add(14n, 14, 41, 140);
    expect(publishedRows()).toEqual([
      "10:0",
      "11:0",
      "12:0",
      "13:0",
      "14:0",
      "14:1",
      "10@1 11@1 12@1 13@1 14@2,41",
    ]);
    // Two chunks stored between publications: both in front, the two oldest rows out.
    index.add(15n, 15, 3, 150);
    index.add(16n, 16, 3, 160);
    expect(publishedRows()).toEqual([
      "12:0",
      "13:0",
      "14:0",
      "14:1",
      "15:0",
      "16:0",
      "12@1 13@1 14@2,41 15@3 16@3",
    ]);
  });

  it("are full from `ways` + 1 chunks and back to showing all rows at ways − ways / 4", () => {
    startNewest();
    for (let c = 1; c <= WAYS + 1; c++) store(c, c, 100 - c);
    // Newest first: chunk 1 is the newest here, chunk 7 the oldest.
    expect(shown().sort()).toEqual([1n, 2n, 3n, 4n, 5n, 6n]);
    // Down to 6 chunks (still in full mode: the band), then 5 (back): every row shows either way.
    index.remove(1n, 1);
    expect(shown().sort()).toEqual([2n, 3n, 4n, 5n, 6n, 7n]);
    index.remove(2n, 2);
    expect(shown().sort()).toEqual([3n, 4n, 5n, 6n, 7n]);
  });
});
