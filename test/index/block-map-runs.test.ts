// A slot's block map (filter/core/block-map.ts) keeps each member's distance from its home slot
// in 4 bits, 15 meaning "15 or more": such a member's home is read from its record. Engine block
// hashes that share a home — chosen here so their Fibonacci-mixed high words are equal — make
// runs far longer than 15, and the index must still find every block, drop the removed ones and
// move the rest when a removal opens a hole in the run.
import { describe, expect, it } from "vitest";
import { coreChunkHasher } from "../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import type { BlockRemoved } from "../../control-plane/src/vocabulary/kv-events.ts";
import { gpuStored } from "./block-stored.ts";

const meta = { seq: 0, ts: 0, receivedAt: 0, replayed: false };
const BLOCK = 16;
const M64 = (1n << 64n) - 1n;
const GOLDEN = 0x9e3779b97f4a7c15n;

/** GOLDEN's inverse mod 2^64 (Newton's iteration: each step doubles the bits that are right). */
function inverse(a: bigint): bigint {
  let x = a;
  for (let i = 0; i < 6; i++) x = (x * (2n - ((a * x) & M64))) & M64;
  return x;
}
const GOLDEN_INV = inverse(GOLDEN);

/** The engine hash whose mixed key (hash × GOLDEN) has `high` as its high word: every such hash has one home. */
const hashWithHome = (high: bigint, low: number) => (((high << 32n) | BigInt(low)) * GOLDEN_INV) & M64;

const detokenize = (ids: ArrayLike<number>) =>
  new TextEncoder().encode(Array.from(ids, (t) => String(t).padStart(8, "0")).join(""));

function removed(hashes: bigint[]): BlockRemoved {
  return { type: "BlockRemoved", hashes, medium: "GPU", groupIdx: null, locality: null, ownership: null };
}

describe("the block map with members far from their home", () => {
  it("finds, removes and moves blocks in runs longer than the distance a slot can hold", () => {
    expect((GOLDEN * GOLDEN_INV) & M64).toBe(1n);
    const index = new PrefixIndex({ buckets: 1024, ways: 8, maxSlots: 4 });
    index.addSlot({ slotKey: "s", slotId: 1, model: "m", hasher: coreChunkHasher(128), detokenize });
    const slot = index.slot("s");
    // Two homes next to each other (when the table is small enough to be one slot apart), 150 blocks each.
    const hashes = [
      ...Array.from({ length: 150 }, (_, i) => hashWithHome(0x12345678n, i + 1)),
      ...Array.from({ length: 150 }, (_, i) => hashWithHome(0x12345679n, i + 1)),
    ];
    hashes.forEach((h, i) => {
      index.event(
        "s",
        gpuStored(
          [h],
          null,
          BLOCK,
          Array.from({ length: BLOCK }, (_, t) => i * 100 + t),
        ),
        meta,
      );
    });
    expect(slot?.blockCount).toBe(300);
    // Every third block goes, from all along both runs.
    const gone = hashes.filter((_, i) => i % 3 === 0);
    index.event("s", removed(gone), meta);
    const kept = hashes.filter((_, i) => i % 3 !== 0);
    expect(slot?.blockCount).toBe(kept.length);
    expect(new Set(slot?.blockHashes())).toEqual(new Set(kept));
    expect(slot?.stats.unknownRemovals).toBe(0);
    // The kept blocks are still found: a child of each is stored (no orphan), the gone ones are unknown.
    kept.forEach((h, i) => {
      index.event(
        "s",
        gpuStored(
          [h ^ 0xabcdefn],
          h,
          BLOCK,
          Array.from({ length: BLOCK }, (_, t) => 50_000 + i * 100 + t),
        ),
        meta,
      );
    });
    expect(slot?.stats.orphanBlocks).toBe(0);
    expect(slot?.blockCount).toBe(2 * kept.length);
    index.event("s", removed(gone), meta);
    expect(slot?.stats.unknownRemovals).toBe(gone.length);
    // And removing the rest empties the slot.
    index.event("s", removed(kept), meta);
    index.event("s", removed(kept.map((h) => h ^ 0xabcdefn)), meta);
    expect(slot?.blockCount).toBe(0);
    index.dispose();
  });
});
