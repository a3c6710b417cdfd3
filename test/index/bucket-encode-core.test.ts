// The core's bucket encoder (filter/core/bucket-encode.ts), which publication runs, writes the
// same bytes as the reference encoder (bucket-image.ts encodeBucket) for any index state:
// random stores and removals over few buckets (so the `ways` limit bites), every tier, repeat
// stores that move the LRU stamp, and speculative routes that come and expire; full buckets that
// keep their newest rows too.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { core } from "../../control-plane/src/core/core-wasm.ts";
import { encodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";
import type { Tier } from "../../control-plane/src/index/tier.ts";

type Op =
  | { kind: "add"; chunk: number; slot: number; tier: number; at: number }
  | { kind: "remove"; chunk: number; slot: number; tier: number }
  | { kind: "speculate"; chunk: number; slot: number; at: number; ttl: number }
  | { kind: "expire"; at: number };

const BUCKETS = 4;
/** Chunk n's hash: spread over the buckets, the top bit set for some (unsigned order matters). */
const hashOf = (chunk: number) => (BigInt(chunk) * 0x9e3779b97f4a7c15n) & 0xffff_ffff_ffff_ffffn;
/** A chunk's depth is fixed by the chunk (an index keeps the depth it first saw). */
const depthOf = (chunk: number) => 1 + (chunk % 7);

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant("add" as const),
    chunk: fc.nat(40),
    slot: fc.nat(130),
    tier: fc.nat(2),
    at: fc.nat(50),
  }),
  fc.record({ kind: fc.constant("remove" as const), chunk: fc.nat(40), slot: fc.nat(130), tier: fc.nat(2) }),
  fc.record({
    kind: fc.constant("speculate" as const),
    chunk: fc.nat(40),
    slot: fc.nat(130),
    at: fc.nat(50),
    ttl: fc.nat(30),
  }),
  fc.record({ kind: fc.constant("expire" as const), at: fc.nat(80) }),
);

function apply(index: ChunkIndex, o: Op): void {
  switch (o.kind) {
    case "add":
      index.add(hashOf(o.chunk), depthOf(o.chunk), o.slot, o.at, o.tier as Tier);
      break;
    case "remove":
      index.remove(hashOf(o.chunk), o.slot, o.tier as Tier);
      break;
    case "speculate":
      index.speculate(hashOf(o.chunk), depthOf(o.chunk), o.slot, o.at, o.at + o.ttl);
      break;
    case "expire":
      index.expire(o.at);
      break;
  }
}

describe("the core's bucket encoder", () => {
  it("writes the reference encoder's bytes for any index state", () => {
    fc.assert(
      fc.property(
        // Long enough that buckets fill (fast-check's default size stays under 10 ops).
        fc.array(op, { minLength: 20, maxLength: 200 }),
        fc.integer({ min: 1, max: 12 }),
        // Full buckets keep their newest rows (cache.fullKeep), or no modes at all.
        fc.boolean(),
        (ops, ways, newest) => {
          const index = new ChunkIndex(BUCKETS);
          try {
            for (const o of ops) apply(index, o);
            // Puts every bucket in the mode its chunk count says (full past `ways` chunks, newest).
            if (newest) core().ex.chunkSetRowLimits(index.tableId, ways, ways, 1);
            for (const slotWords of [1, 3]) {
              for (let b = 0; b < BUCKETS; b++) {
                const entries = index.bucketEntries(b);
                const full = newest && entries.length > ways;
                const reference = encodeBucket(entries, ways, slotWords, full);
                expect(index.encodeBucket(b, ways, slotWords)).toEqual(reference);
              }
            }
          } finally {
            index.dispose();
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("refuses a geometry the image cannot state", () => {
    const index = new ChunkIndex(1);
    expect(() => index.encodeBucket(0, 4097, 1)).toThrow(/4097 ways/);
    expect(() => index.encodeBucket(0, 8, 0)).toThrow(/0 slot words/);
    index.dispose();
  });
});
