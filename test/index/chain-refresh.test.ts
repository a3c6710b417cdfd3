// A full bucket keeps its most recently stored rows (cache.fullKeep: newest), so a store that
// continues a chain refreshes the stamps of the chain's chunks (filter/core/block-table.ts
// refreshChain): a prefix requests keep extending — a system prompt and its questions — stays in
// the gateways' view however long ago it was first stored (docs/scaling.md).
import { afterEach, describe, expect, it } from "vitest";
import { coreChunkHasher } from "../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import type { FullKeep } from "../../control-plane/src/index/published-buckets.ts";
import type { BlockStored } from "../../control-plane/src/vocabulary/kv-events.ts";
import { gpuStored } from "./block-stored.ts";

const BUCKETS = 16;
const meta = { seq: 0, ts: 0, receivedAt: 0, replayed: false };
let clock = 0;
let index: PrefixIndex;

/** Every token is 40 bytes: a block of 2 tokens completes one or two 64-byte chunks. */
const detokenize = (ids: ArrayLike<number>) =>
  Uint8Array.from(
    { length: ids.length * 40 },
    (_, i) => ((ids[Math.floor(i / 40)] as number) * 7 + i) & 0xff,
  );

function stored(first: number, n: number, parent: bigint | null): BlockStored {
  return gpuStored(
    Array.from({ length: n }, (_, i) => BigInt(first + i)),
    parent,
    2,
    Array.from({ length: 2 * n }, (_, i) => first * 10 + i),
  );
}

function start(fullKeep: FullKeep): void {
  clock = 0;
  index = new PrefixIndex({ buckets: BUCKETS, ways: 4, maxSlots: 8, fullKeep, now: () => clock });
  index.addSlot({ slotKey: "a", slotId: 0, model: "m", hasher: coreChunkHasher(64), detokenize });
  // The publication sets the keep rule in the core.
  void index.published;
}

/** Stamps of every indexed chunk, by the block chain (hash range) that made it: chunks of blocks first … first + n − 1. */
function stamps(): number[] {
  const out: number[] = [];
  for (let b = 0; b < BUCKETS; b++) for (const [, e] of index.chunks.bucketEntries(b)) out.push(e.stampMs);
  return out.sort((x, y) => x - y);
}

afterEach(() => index.dispose());

describe("a store that continues a chain", () => {
  it("gives the whole chain its time when the chain's stamps are older than a second", () => {
    start("newest");
    index.event("a", stored(1, 8, null), meta); // a "system prompt" of 8 blocks
    const prompt = stamps().length;
    expect(prompt).toBeGreaterThan(8);
    clock = 30_000;
    index.event("a", stored(100, 2, 8n), meta); // a question under it
    expect(stamps().every((s) => s === 30_000)).toBe(true);
    expect(stamps().length).toBeGreaterThan(prompt);
  });

  it("leaves other chains and a chain continued within the second as they are", () => {
    start("newest");
    index.event("a", stored(1, 8, null), meta);
    index.event("a", stored(50, 4, null), meta); // another chain, never continued
    const other = stamps().length - 0;
    clock = 500;
    index.event("a", stored(100, 1, 8n), meta); // within a second of the chain's store
    const s = stamps();
    expect(s.filter((x) => x === 0).length).toBe(other);
    clock = 5_000;
    index.event("a", stored(200, 1, 100n), meta);
    // The first chain and its two continuations are at 5 s; the other chain stays at 0.
    const t = stamps();
    expect(t.filter((x) => x === 0).length).toBeGreaterThan(0);
    expect(t.filter((x) => x === 0).length).toBeLessThan(other);
    expect(t.filter((x) => x !== 0 && x !== 5_000)).toEqual([]);
  });

  it("does not touch stamps when full buckets keep their shallowest rows", () => {
    start("shallowest");
    index.event("a", stored(1, 8, null), meta);
    clock = 30_000;
    index.event("a", stored(100, 2, 8n), meta);
    expect(stamps().filter((x) => x === 0).length).toBeGreaterThan(8);
  });
});
