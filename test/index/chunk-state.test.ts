// A block keeps the chunk in progress as XXH64 state once it spans a 32-byte stripe
// (filter/core/block-table.ts, xxh64-stream.ts) instead of its bytes. Whatever the chunk size
// (below, at and above a stripe, not a multiple of one), the block sizes in bytes (empty ones
// too) and where chains branch, the index must hold exactly the chunk hashes of each chain's
// bytes hashed whole (the core's chained hashing of a byte stream, kvroute-core.ts feedChunks).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { feedChunks, initialState } from "../../control-plane/src/core/kvroute-core.ts";
import { coreChunkHasher } from "../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import type { BlockStored } from "../../control-plane/src/vocabulary/kv-events.ts";
import { gpuStored } from "./block-stored.ts";

const MODEL = "m";
const meta = { seq: 0, ts: 0, receivedAt: 0, replayed: false };

/** Token id → 0–70 bytes derived from the id: blocks of two tokens are 0–140 bytes. */
function tokenBytes(id: number): Uint8Array {
  const n = id % 71;
  return Uint8Array.from({ length: n }, (_, i) => (id * 131 + i * 17) & 0xff);
}

function detokenize(ids: ArrayLike<number>): Uint8Array {
  const parts = Array.from(ids, tokenBytes);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function stored(hashes: bigint[], parent: bigint | null, tokenIds: number[]): BlockStored {
  return gpuStored(hashes, parent, 2, tokenIds);
}

describe("a chunk in progress kept as hashing state", () => {
  it("gives the chunk hashes of each chain's bytes hashed whole, for any chunk size and branching", () => {
    const event = fc.record({
      parentPick: fc.nat(),
      root: fc.boolean(),
      tokens: fc.array(fc.tuple(fc.nat(400), fc.nat(400)), { minLength: 1, maxLength: 4 }),
    });
    fc.assert(
      fc.property(
        fc.constantFrom(1, 7, 31, 32, 33, 63, 64, 100, 128, 257),
        fc.array(event, { minLength: 1, maxLength: 12 }),
        (chunk, events) => {
          const index = new PrefixIndex({ buckets: 256, ways: 8, maxSlots: 4, now: () => 1 });
          index.addSlot({
            slotKey: "s",
            slotId: 1,
            model: MODEL,
            hasher: coreChunkHasher(chunk),
            detokenize,
          });
          /** Each stored block's chain bytes from the root, by block hash. */
          const chains = new Map<bigint, Uint8Array>();
          const expected = new Set<bigint>();
          let next = 1n;
          for (const e of events) {
            const known = [...chains.keys()];
            const parent =
              e.root || known.length === 0 ? null : (known[e.parentPick % known.length] as bigint);
            let bytes = parent === null ? new Uint8Array(0) : (chains.get(parent) as Uint8Array);
            const hashes: bigint[] = [];
            for (const pair of e.tokens) {
              const hash = next++;
              hashes.push(hash);
              bytes = Buffer.concat([bytes, detokenize(pair)]);
              chains.set(hash, bytes);
              for (const h of feedChunks(initialState(MODEL), bytes, chunk).hashes) expected.add(h);
            }
            index.event("s", stored(hashes, parent, e.tokens.flat()), meta);
          }
          for (const h of expected) expect(index.chunks.get(h)).toBeDefined();
          expect(index.chunks.size).toBe(expected.size);
          expect(index.slot("s")?.blockCount).toBe(chains.size);
          index.dispose();
        },
      ),
      { numRuns: 300 },
    );
  });
});
