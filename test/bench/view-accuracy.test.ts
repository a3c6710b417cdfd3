// The scaling bench's view-accuracy measure (bench/lib/view-accuracy.ts): the shipped walk over
// published images against the full index. It must say "same" when the images hold the chain,
// and "not same" when a bucket the chain needs lost its row or shows another slot.
import { describe, expect, it } from "vitest";
import {
  deepest,
  fullIndexAnswer,
  type PrefixAnswer,
  ShippedWalk,
  samePrefix,
} from "../../bench/lib/view-accuracy.ts";
import { encodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";

const BUCKETS = 64;
const SLOTS = 8;
const chain = BigUint64Array.from(
  { length: 40 },
  (_, i) => (BigInt(i + 1) * 0x9e3779b97f4a7c15n) % 2n ** 64n,
);
const walk = new ShippedWalk();

/** Slot 3 holds all 40 chunks, slot 5 the first 10; `drop` leaves a chunk out of the images. */
function answers(drop?: number): { full: PrefixAnswer; view: PrefixAnswer } {
  const index = new ChunkIndex(BUCKETS);
  chain.forEach((h, i) => {
    index.add(h, i + 1, 3, 0);
    if (i < 10) index.add(h, i + 1, 5, 0);
  });
  const images = new Map<number, Uint8Array>();
  for (let b = 0; b < BUCKETS; b++)
    images.set(
      b,
      encodeBucket(
        index.bucketEntries(b).filter(([h]) => drop === undefined || h !== chain[drop]),
        64,
        1,
      ),
    );
  const full = fullIndexAnswer(index, chain);
  const view = deepest(walk.depths(chain, (b) => images.get(b), BUCKETS, 1, SLOTS));
  index.dispose();
  return { full, view };
}

describe("the gateway view's accuracy measure", () => {
  it("finds the full index's longest prefix when the images hold every chunk", () => {
    const { full, view } = answers();
    expect(full).toEqual({ depth: 40, slots: [3] });
    expect(view).toEqual(full);
    expect(samePrefix(full, view)).toBe(true);
  });

  it("is not the same when the images lost the prefix's first chunk", () => {
    // (A hole the walk's bisection never probes goes unseen, as in the filter: the measure
    // judges what the shipped walk finds, not which rows exist.)
    const { full, view } = answers(0);
    expect(view.depth).toBe(0);
    expect(samePrefix(full, view)).toBe(false);
  });

  it("tolerates a view that misses the last 5 % and rejects another slot", () => {
    const full = { depth: 40, slots: [3] };
    expect(samePrefix(full, { depth: 38, slots: [3] })).toBe(true);
    expect(samePrefix(full, { depth: 37, slots: [3] })).toBe(false);
    expect(samePrefix(full, { depth: 40, slots: [5] })).toBe(false);
    expect(samePrefix({ depth: 0, slots: [] }, { depth: 0, slots: [] })).toBe(true);
    expect(samePrefix({ depth: 0, slots: [] }, { depth: 2, slots: [1] })).toBe(false);
  });
});
