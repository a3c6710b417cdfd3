// Under a flood of unique prompts that are never reported evicted, a slot's index stays at its
// cap (cache.maxBlocksPerSlot): the least recently stored blocks go with their chunks, storing a
// block again keeps it, and the core's linear memory stops growing once the cap is reached.
import { describe, expect, it } from "vitest";
import { core } from "../../control-plane/src/core/core-wasm.ts";
import { decodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { coreChunkHasher } from "../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import type { BlockStored } from "../../control-plane/src/vocabulary/kv-events.ts";
import { gpuStored } from "./block-stored.ts";

const meta = { seq: 0, ts: 0, receivedAt: 0, replayed: false };
const BLOCK = 16;
const CAP = 400;
// 16 tokens × 8 bytes = one 128-byte chunk per block: chunk k of a prompt is its block k.
const detokenize = (ids: ArrayLike<number>) =>
  new TextEncoder().encode(Array.from(ids, (t) => String(t).padStart(8, "0")).join(""));

function prompt(p: number, blocks: number): BlockStored {
  const first = BigInt(p) * 1000n + 1n;
  return gpuStored(
    Array.from({ length: blocks }, (_, i) => first + BigInt(i)),
    null,
    BLOCK,
    Array.from({ length: blocks * BLOCK }, (_, i) => p * 10_000 + i),
  );
}

function newIndex(): PrefixIndex {
  const index = new PrefixIndex({ buckets: 1024, ways: 64, maxSlots: 8, maxBlocksPerSlot: CAP });
  index.addSlot({ slotKey: "s", slotId: 2, model: "m", hasher: coreChunkHasher(128), detokenize });
  return index;
}

/** Every chunk hash the published images hold. */
function published(index: PrefixIndex): Set<bigint> {
  const out = new Set<bigint>();
  for (const [, bytes] of index.allImages()) for (const e of decodeBucket(bytes)) out.add(e.hash);
  return out;
}

describe("the index is bounded under a flood of unique prompts", () => {
  it("holds at most maxBlocksPerSlot blocks; the least recently stored go, with their chunks", () => {
    const index = newIndex();
    const slot = index.slot("s");
    for (let p = 0; p < 1000; p++) index.event("s", prompt(p, 8), meta);
    expect(slot?.blockCount).toBe(CAP);
    expect(slot?.stats.storedBlocks).toBe(8000);
    expect(slot?.stats.evictedBlocks).toBe(8000 - CAP);
    // One chunk per block: the chunk index shrank with the blocks.
    expect(index.chunks.size).toBe(CAP);
    // The newest 50 prompts are what is left, in the index and in the images.
    const held = new Set(slot?.blockHashes());
    expect(held.has(999_001n) && held.has(950_008n)).toBe(true);
    expect(held.has(949_008n)).toBe(false);
    expect(published(index).size).toBe(CAP);
  });

  it("storing a block again refreshes it: it outlives blocks stored after it", () => {
    const index = newIndex();
    index.event("s", prompt(0, 8), meta);
    for (let p = 1; p < 200; p++) {
      index.event("s", prompt(p, 8), meta);
      // The engine reports prompt 0's blocks again (kv_cache_report_mode="full": reused).
      index.event("s", prompt(0, 8), meta);
    }
    const held = new Set(index.slot("s")?.blockHashes());
    for (let i = 1n; i <= 8n; i++) expect(held.has(i)).toBe(true);
    expect(held.has(1001n)).toBe(false);
  });

  it("a child of an evicted block is an orphan (its chain cannot be continued)", () => {
    const index = newIndex();
    index.event("s", prompt(0, 8), meta);
    for (let p = 1; p <= CAP / 8; p++) index.event("s", prompt(p, 8), meta);
    const child = { ...prompt(7, 1), hashes: [123_456_789n], parent: 8n };
    index.event("s", child, meta);
    expect(index.slot("s")?.stats.orphanBlocks).toBe(1);
  });

  it("the core's memory stops growing once the cap is reached (freed records are reused)", () => {
    const index = newIndex();
    const slot = index.slot("s");
    let p = 0;
    for (; p < 200; p++) index.event("s", prompt(p, 8), meta);
    const bytes = (slot?.bytes ?? 0) + index.chunks.bytes;
    const memory = core().ex.memory.buffer.byteLength;
    for (; p < 3000; p++) index.event("s", prompt(p, 8), meta);
    expect(slot?.stats.evictedBlocks).toBe(3000 * 8 - CAP);
    expect((slot?.bytes ?? 0) + index.chunks.bytes).toBeLessThanOrEqual(bytes);
    expect(core().ex.memory.buffer.byteLength).toBe(memory);
    // About 200 bytes per indexed block, tables included (issue 18's budget).
    expect(bytes / CAP).toBeLessThan(400);
  });

  it("an index that is disposed of gives its core memory back (a new one reuses it)", () => {
    const fill = () => {
      const index = new PrefixIndex({ buckets: 1 << 14, ways: 8, maxSlots: 8 });
      index.addSlot({ slotKey: "s", slotId: 2, model: "m", hasher: coreChunkHasher(128), detokenize });
      for (let p = 0; p < 500; p++) index.event("s", prompt(p, 8), meta);
      index.removeSlot("s");
      index.addSlot({ slotKey: "t", slotId: 3, model: "m", hasher: coreChunkHasher(128), detokenize });
      for (let p = 0; p < 500; p++) index.event("t", prompt(p, 8), meta);
      expect(index.chunks.size).toBe(4000);
      index.dispose();
    };
    fill();
    const memory = core().ex.memory.buffer.byteLength;
    for (let round = 0; round < 20; round++) fill();
    expect(core().ex.memory.buffer.byteLength).toBe(memory);
  });
});
