// Storage tiers, hybrid-model groups and SGLang's tagged maps, one fixture per upstream
// definition, written with the msgspec-faithful encoder (msgspec.ts), not with msgpackr:
// - vLLM ≥ v0.26 (vllm/distributed/kv_events.py, PR #42892): `KVCacheEvent(tag=True,
//   omit_defaults=True)` maps tagged under "type"; `EventBatch` a map {ts, events,
//   data_parallel_rank}; BlockStored fields block_hashes, parent_block_hash, token_ids,
//   block_size, lora_id, medium, lora_name (no defaults: always written), extra_keys, group_idx,
//   kv_cache_spec_kind, kv_cache_spec_sliding_window (default None: omitted); BlockRemoved
//   block_hashes, medium, group_idx.
// - vLLM < v0.26: the same structs with array_like=True, positional.
// - vLLM's OffloadingConnector.take_events: a copy to CPU is `BlockStored(block_hashes,
//   parent_block_hash=None, token_ids=[], lora_id=None, block_size=<size, 0 in newer releases>,
//   medium="CPU", lora_name=None)`; its eviction `BlockRemoved(block_hashes, medium="CPU")`.
//   Newer releases can describe the copy in full (tokens, parent, group_idx, spec kind).
// - SGLang (REFERENCE §8): tagged-map events with `cache_salt` and `session_id`, medium GPU /
//   CPU_TIER1 / CPU_TIER2 (HiCache host memory and its storage backend), signed int64 hashes,
//   batch `[ts, events, attn_dp_rank]`.
import { describe, expect, it } from "vitest";
import { decodeBatch } from "../../control-plane/src/events/batch-decoder.ts";
import { TIER_CPU, TIER_GPU, TIER_STORAGE, tierOfMedium } from "../../control-plane/src/index/tier.ts";
import type { BlockRemoved, BlockStored, KvEvent } from "../../control-plane/src/vocabulary/kv-events.ts";
import { encode, F64, range } from "./msgspec.ts";

function decoded(payload: Buffer) {
  const r = decodeBatch(payload);
  if (!r.ok) throw new Error(`decode failed: ${r.error}`);
  return r.batch;
}
const stored = (evs: KvEvent[]) => evs.filter((e): e is BlockStored => e.type === "BlockStored");

describe("vLLM ≥ v0.26 map events in a map batch", () => {
  const gpuStore = {
    type: "BlockStored",
    block_hashes: [0xfedc_ba98_7654_3210n, 7],
    parent_block_hash: null,
    token_ids: range(100, 32),
    block_size: 16,
    lora_id: null,
    medium: "GPU",
    lora_name: null,
  };
  // OffloadingConnector.take_events: the CPU copy names the blocks only.
  const cpuPlaceholder = {
    type: "BlockStored",
    block_hashes: [0xfedc_ba98_7654_3210n, 7],
    parent_block_hash: null,
    token_ids: [],
    block_size: 0,
    lora_id: null,
    medium: "CPU",
    lora_name: null,
  };
  const gpuEvicted = { type: "BlockRemoved", block_hashes: [7], medium: "GPU" };
  const cpuEvicted = { type: "BlockRemoved", block_hashes: [7], medium: "CPU" };

  it("decodes a GPU store, its CPU placeholder copy and per-medium removals", () => {
    const b = decoded(
      encode({
        ts: new F64(1.5),
        events: [gpuStore, cpuPlaceholder, gpuEvicted, cpuEvicted],
        data_parallel_rank: 0,
      }),
    );
    expect(b.rank).toBe(0);
    expect(b.errors).toEqual({});
    const [g, c] = stored(b.events) as [BlockStored, BlockStored];
    expect([g.medium, g.tokenIds.length, g.blockSize]).toEqual(["GPU", 32, 16]);
    expect([c.medium, c.tokenIds, c.blockSize, c.parent, c.hashes]).toEqual([
      "CPU",
      [],
      0,
      null,
      [0xfedc_ba98_7654_3210n, 7n],
    ]);
    const removed = b.events.filter((e): e is BlockRemoved => e.type === "BlockRemoved");
    expect(removed.map((r) => [r.medium, r.hashes])).toEqual([
      ["GPU", [7n]],
      ["CPU", [7n]],
    ]);
  });

  it("decodes a self-describing offloaded copy (tokens, parent, group, spec kind on the CPU)", () => {
    const full = {
      ...gpuStore,
      parent_block_hash: 3,
      medium: "CPU",
      group_idx: 0,
      kv_cache_spec_kind: "full_attention",
    };
    const [ev] = stored(decoded(encode({ ts: new F64(1), events: [full] })).events) as [BlockStored];
    expect([ev.medium, ev.parent, ev.tokenIds.length, ev.groupIdx]).toEqual(["CPU", 3n, 32, 0]);
  });

  it("refuses near-miss placeholders: tokens without a block size, no hashes, a short token list", () => {
    const b = decoded(
      encode({
        ts: new F64(1),
        events: [
          { ...cpuPlaceholder, token_ids: [1, 2], block_size: 0 },
          { ...cpuPlaceholder, block_hashes: [] },
          { ...gpuStore, token_ids: range(0, 31) },
          { ...cpuPlaceholder, block_size: -1 },
        ],
      }),
    );
    expect(b.events).toEqual([]);
    expect(b.errors).toEqual({ block_size: 3, token_count: 1 });
  });
});

describe("vLLM < v0.26 array events", () => {
  it("decodes the CPU placeholder and CPU removal in positional form", () => {
    const b = decoded(
      encode([
        new F64(2),
        [
          ["BlockStored", [1, 2], null, range(0, 32), 16, null, "GPU", null],
          ["BlockStored", [1, 2], null, [], 16, null, "CPU", null],
          ["BlockRemoved", [1, 2], "GPU"],
          ["BlockRemoved", [2], "CPU", 0],
        ],
        0,
      ]),
    );
    expect(b.errors).toEqual({});
    expect(b.events.map((e) => (e.type === "AllBlocksCleared" ? e.type : [e.type, e.medium]))).toEqual([
      ["BlockStored", "GPU"],
      ["BlockStored", "CPU"],
      ["BlockRemoved", "GPU"],
      ["BlockRemoved", "CPU"],
    ]);
  });
});

describe("hybrid models: only the full-attention group 0 is a prefix cache", () => {
  it("skips stores and removals of other groups and non-main kinds, in both encodings", () => {
    const s = { block_hashes: [9], parent_block_hash: null, token_ids: [1, 2], block_size: 2, lora_id: null };
    const b = decoded(
      encode({
        ts: new F64(1),
        events: [
          {
            type: "BlockStored",
            ...s,
            medium: "GPU",
            lora_name: null,
            group_idx: 1,
            kv_cache_spec_kind: "full_attention",
          },
          {
            type: "BlockStored",
            ...s,
            medium: "GPU",
            lora_name: null,
            group_idx: 0,
            kv_cache_spec_kind: "sliding_window",
            kv_cache_spec_sliding_window: 4096,
          },
          { type: "BlockStored", ...s, medium: "GPU", lora_name: null, kv_cache_spec_kind: "mamba" },
          { type: "BlockStored", ...s, medium: "CPU", lora_name: null, group_idx: 2 },
          ["BlockStored", [9], null, [1, 2], 2, null, "GPU", null, null, 1, "full_attention"],
          ["BlockStored", [9], null, [1, 2], 2, null, "GPU", null, null, 0, "chunked_local_attention"],
          { type: "BlockRemoved", block_hashes: [9], medium: "GPU", group_idx: 1 },
          ["BlockRemoved", [9], "GPU", 3],
          {
            type: "BlockStored",
            ...s,
            medium: "GPU",
            lora_name: null,
            group_idx: 0,
            kv_cache_spec_kind: "full_attention",
          },
        ],
        data_parallel_rank: 0,
      }),
    );
    expect(b.events).toHaveLength(1);
    expect((b.events[0] as BlockStored).groupIdx).toBe(0);
    expect(b.ignored).toEqual({ group_idx: 5, spec_kind: 3 });
  });
});

describe("SGLang tagged maps", () => {
  const neg = -0x0123_4567_89ab_cdefn;
  const sglStore = (medium: string, extra: Record<string, unknown> = {}) => ({
    type: "BlockStored",
    block_hashes: [neg],
    parent_block_hash: null,
    token_ids: range(0, 4),
    block_size: 4,
    lora_id: null,
    medium,
    cache_salt: "tenant-a",
    session_id: "sess-42",
    ...extra,
  });

  it("reads cache_salt, session_id and the HiCache media, with signed hashes and attn_dp_rank", () => {
    const b = decoded(
      encode([
        new F64(3),
        [
          sglStore("GPU"),
          sglStore("CPU_TIER1", { token_ids: [], block_size: 4 }),
          sglStore("CPU_TIER2", { token_ids: [], block_size: 4 }),
          { type: "BlockRemoved", block_hashes: [neg], medium: "GPU" },
        ],
        2,
      ]),
    );
    expect(b.rank).toBe(2);
    expect(b.errors).toEqual({});
    const evs = stored(b.events);
    expect(evs.map((e) => [e.medium, e.cacheSalt, e.sessionId, e.hashes[0]])).toEqual([
      ["GPU", "tenant-a", "sess-42", BigInt.asUintN(64, neg)],
      ["CPU_TIER1", "tenant-a", "sess-42", BigInt.asUintN(64, neg)],
      ["CPU_TIER2", "tenant-a", "sess-42", BigInt.asUintN(64, neg)],
    ]);
  });

  it("drops a store whose session_id or cache_salt is not a string", () => {
    const b = decoded(
      encode([new F64(3), [sglStore("GPU", { session_id: 7 }), sglStore("GPU", { cache_salt: ["x"] })], 0]),
    );
    expect(b.events).toEqual([]);
    expect(b.errors).toEqual({ field_type: 2 });
  });
});

describe("medium → tier", () => {
  it.each([
    ["GPU", TIER_GPU],
    ["CPU", TIER_CPU],
    ["CPU_PINNED", TIER_CPU],
    ["CPU_TIER1", TIER_CPU],
    ["CPU_TIER2", TIER_STORAGE],
    ["STORAGE", TIER_STORAGE],
    ["DISK", TIER_STORAGE],
    ["EXTERNAL", TIER_STORAGE],
  ])("%s is tier %i", (medium, tier) => {
    expect(tierOfMedium(medium)).toBe(tier);
  });

  it("knows no near misses: other case, padding, prefixes and unknown media are not tiers", () => {
    for (const m of ["gpu", "Cpu", " GPU", "GPU ", "CPU_TIER", "CPU_TIER3", "GPU0", "NVME_X", ""])
      expect(tierOfMedium(m)).toBeNull();
  });
});
