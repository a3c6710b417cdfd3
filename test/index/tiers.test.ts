// The index's bookkeeping per tier, fed the way production feeds it: msgspec-encoded batches
// through the batch decoder into the PrefixIndex sink. One chunk per block (16 tokens × 8 bytes =
// the 128-byte chunk), so chunk k is block k's.
import { describe, expect, it } from "vitest";
import { decodeBatch } from "../../control-plane/src/events/batch-decoder.ts";
import { decodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { holderCount } from "../../control-plane/src/index/chunk-index.ts";
import { coreChunkHasher } from "../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import { TIER_CPU, TIER_GPU, TIER_STORAGE } from "../../control-plane/src/index/tier.ts";
import { encode, F64, range } from "../events/msgspec.ts";

const BLOCK = 16;
const BUCKETS = 64;
const meta = { seq: 0, ts: 0, receivedAt: 0, replayed: false };
const detokenize = (ids: ArrayLike<number>) =>
  new TextEncoder().encode(Array.from(ids, (t) => String(t).padStart(8, "0")).join(""));

function newIndex(): PrefixIndex {
  const index = new PrefixIndex({ buckets: BUCKETS, ways: 16, maxSlots: 64 });
  index.addSlot({ slotKey: "s3", slotId: 3, model: "m", hasher: coreChunkHasher(128), detokenize });
  return index;
}

/** Decodes `events` as one vLLM ≥ 0.26 map batch and applies it to slot s3. */
function apply(index: PrefixIndex, events: unknown[]): void {
  const r = decodeBatch(encode({ ts: new F64(1), events: events as never, data_parallel_rank: 0 }));
  if (!r.ok) throw new Error(r.error);
  for (const ev of r.batch.events) index.event("s3", ev, meta);
}

const gpuStore = (hashes: number[], parent: number | null, firstToken: number, extra = {}) => ({
  type: "BlockStored",
  block_hashes: hashes,
  parent_block_hash: parent,
  token_ids: range(firstToken, hashes.length * BLOCK),
  block_size: BLOCK,
  lora_id: null,
  medium: "GPU",
  lora_name: null,
  ...extra,
});
const placeholder = (hashes: number[], medium: string) => ({
  type: "BlockStored",
  block_hashes: hashes,
  parent_block_hash: null,
  token_ids: [],
  block_size: 0,
  lora_id: null,
  medium,
  lora_name: null,
});
const removed = (hashes: number[], medium: string, extra = {}) => ({
  type: "BlockRemoved",
  block_hashes: hashes,
  medium,
  ...extra,
});

/** Per chunk depth: the tiers slot 3 holds it on, read back from the bucket images. */
function tiersByDepth(index: PrefixIndex): Map<number, number[]> {
  const out = new Map<number, number[]>();
  for (let b = 0; b < BUCKETS; b++)
    for (const e of decodeBucket(index.bucketImage(b)))
      if (e.slots.includes(3)) out.set(e.depth, [...(out.get(e.depth) ?? []), e.tier].sort());
  return new Map([...out].sort((a, b) => a[0] - b[0]));
}

describe("index by tier", () => {
  it("store GPU, copy to CPU, evict from GPU → still on CPU, evict from CPU → gone", () => {
    const index = newIndex();
    apply(index, [gpuStore([1, 2, 3], null, 0)]);
    expect(tiersByDepth(index)).toEqual(
      new Map([
        [1, [TIER_GPU]],
        [2, [TIER_GPU]],
        [3, [TIER_GPU]],
      ]),
    );
    // The offloading connector copies blocks 2 and 3 to CPU (hash only).
    apply(index, [placeholder([2, 3], "CPU")]);
    const chunkOf = (depth: number) =>
      [...Array(BUCKETS).keys()]
        .flatMap((b) => index.chunks.bucketEntries(b))
        .find(([, e]) => e.depth === depth) as [bigint, never];
    const [h3] = chunkOf(3);
    const entry3 = () => index.chunks.get(h3);
    expect([
      holderCount(entry3() as never, 3, TIER_GPU),
      holderCount(entry3() as never, 3, TIER_CPU),
    ]).toEqual([1, 1]);
    // A slot with both copies is published in the GPU row only.
    expect(tiersByDepth(index).get(3)).toEqual([TIER_GPU]);
    // GPU eviction of block 3 leaves its CPU copy.
    apply(index, [removed([3], "GPU")]);
    expect(tiersByDepth(index)).toEqual(
      new Map([
        [1, [TIER_GPU]],
        [2, [TIER_GPU]],
        [3, [TIER_CPU]],
      ]),
    );
    // The block is still known: a child stored on the GPU chains from it.
    apply(index, [gpuStore([4], 3, 48)]);
    expect(tiersByDepth(index).get(4)).toEqual([TIER_GPU]);
    // CPU eviction: gone from the index.
    apply(index, [removed([3], "CPU")]);
    expect(tiersByDepth(index).has(3)).toBe(false);
    expect(entry3()).toBeUndefined();
    // Removing a copy the slot does not hold changes nothing (and is counted).
    const before = index.slot("s3")?.stats.unknownRemovals ?? 0;
    apply(index, [removed([1], "CPU"), removed([3], "GPU")]);
    expect(index.slot("s3")?.stats.unknownRemovals).toBe(before + 2);
    expect(tiersByDepth(index).get(1)).toEqual([TIER_GPU]);
  });

  it("indexes a self-describing CPU or storage store (tokens and parent) on that tier", () => {
    const index = newIndex();
    apply(index, [
      { ...gpuStore([1, 2], null, 0), medium: "CPU" },
      { ...gpuStore([3], 2, 32), medium: "STORAGE" },
    ]);
    expect(tiersByDepth(index)).toEqual(
      new Map([
        [1, [TIER_CPU]],
        [2, [TIER_CPU]],
        [3, [TIER_STORAGE]],
      ]),
    );
    expect(index.slot("s3")?.stats.lowerTierStores).toBe(3);
  });

  it("counts a placeholder for an unknown block and a medium it does not know, indexes neither", () => {
    const index = newIndex();
    apply(index, [placeholder([77], "CPU"), { ...gpuStore([1], null, 0), medium: "HBM3" }]);
    expect(index.chunks.size).toBe(0);
    expect(index.slot("s3")?.stats).toMatchObject({ unresolvedPlaceholders: 1, unknownMediumBlocks: 1 });
  });

  it("AllBlocksCleared and an engine reset drop every tier", () => {
    const index = newIndex();
    apply(index, [gpuStore([1, 2], null, 0), placeholder([1, 2], "CPU"), placeholder([2], "STORAGE")]);
    expect(index.chunks.size).toBe(2);
    apply(index, [{ type: "AllBlocksCleared" }]);
    expect(index.chunks.size).toBe(0);
    expect(index.slot("s3")?.blockCount).toBe(0);
    apply(index, [gpuStore([1, 2], null, 0), placeholder([1, 2], "CPU")]);
    index.rankReset("s3", "restart");
    expect(index.chunks.size).toBe(0);
  });

  it('kv_cache_report_mode="full": reused blocks reported again neither double count nor break chains', () => {
    const index = newIndex();
    apply(index, [gpuStore([1, 2], null, 0)]);
    // A request that reuses blocks 1-2 and computes block 3: the full report repeats 1-2.
    apply(index, [gpuStore([1, 2, 3], null, 0)]);
    // And one that reuses only block 2 as a parent-linked run.
    apply(index, [gpuStore([2], 1, 16), gpuStore([3, 4], 2, 32)]);
    const stats = index.slot("s3")?.stats;
    expect(stats?.storedBlocks).toBe(4);
    expect(stats?.duplicateStores).toBe(4);
    expect([...tiersByDepth(index).keys()]).toEqual([1, 2, 3, 4]);
    for (let b = 0; b < BUCKETS; b++)
      for (const [, e] of index.chunks.bucketEntries(b)) expect(holderCount(e, 3, TIER_GPU)).toBe(1);
    // One removal per block empties the index: nothing was counted twice.
    apply(index, [removed([4, 3, 2, 1], "GPU")]);
    expect(index.chunks.size).toBe(0);
  });

  it("hybrid models: sliding-window and other groups never reach the index, nor remove group 0's blocks", () => {
    const index = newIndex();
    apply(index, [
      gpuStore([1, 2], null, 0, { group_idx: 0, kv_cache_spec_kind: "full_attention" }),
      // The same blocks' sliding-window and Mamba groups (vLLM hashes every group's block alike).
      gpuStore([1, 2], null, 0, { group_idx: 1, kv_cache_spec_kind: "sliding_window" }),
      gpuStore([5, 6], null, 500, { group_idx: 2, kv_cache_spec_kind: "mamba" }),
      gpuStore([7], null, 900, { group_idx: 0, kv_cache_spec_kind: "sliding_window" }),
      removed([1, 2], "GPU", { group_idx: 1 }),
    ]);
    expect(tiersByDepth(index)).toEqual(
      new Map([
        [1, [TIER_GPU]],
        [2, [TIER_GPU]],
      ]),
    );
    expect(index.chunks.size).toBe(2);
    expect(index.slot("s3")?.stats.storedBlocks).toBe(2);
  });
});
