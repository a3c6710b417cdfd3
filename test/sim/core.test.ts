// Pure parts of the simulator: wire encoding, hashing, the paged cache, scheduling, header
// parsing, the balancer rules and the virtual-time cluster.
import { createHash } from "node:crypto";
import { Unpackr } from "msgpackr";
import { describe, expect, it } from "vitest";
import { VllmDpBalancer } from "../../control-plane/sim/balancer.ts";
import { BlockHasher, hashBlock, noneHash } from "../../control-plane/sim/block-hash.ts";
import { BlockPool } from "../../control-plane/sim/block-pool.ts";
import { Engine, type EngineLoad } from "../../control-plane/sim/engine.ts";
import { encodeEventBatch } from "../../control-plane/sim/kv-events.ts";
import {
  offsetEndpointPort,
  parseKvEventsConfig,
  publisherBinds,
} from "../../control-plane/sim/kv-events-config.ts";
import { DEFAULT_LATENCY } from "../../control-plane/sim/latency.ts";
import { Float64, packMsgspec } from "../../control-plane/sim/msgpack.ts";
import { frontsOf, parsePythonInt, resolveRankHeader } from "../../control-plane/sim/rank-header.ts";
import { createSimCluster } from "../../control-plane/sim/virtual-cluster.ts";
import { sharedPrefixWorkload, type TimedRequest } from "../../control-plane/sim/workloads.ts";
import { applyEvents, decodePayload } from "./helpers.ts";

const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: "bigint" });

describe("msgspec-compatible msgpack", () => {
  it.each([
    [0, "00"],
    [127, "7f"],
    [128, "cc80"],
    [65535, "cdffff"],
    [65536, "ce00010000"],
    [2 ** 32, "cf0000000100000000"],
    [-1, "ff"],
    [-33, "d0df"],
    [2n ** 63n, "cf8000000000000000"],
    [2n ** 64n - 1n, "cfffffffffffffffff"],
    [5n, "05"],
    [null, "c0"],
    ["GPU", "a3475055"],
  ])("%s → %s (smallest form, unsigned above 2^63)", (v, hex) => {
    expect(packMsgspec(v as never).toString("hex")).toBe(hex);
  });

  it("writes Python floats as float64 even when integral", () => {
    expect(packMsgspec(new Float64(2)).toString("hex")).toBe("cb4000000000000000");
  });

  it("round-trips through msgpackr", () => {
    const v = { a: [1, 2n ** 63n + 7n, "x", null], b: true };
    expect(unpackr.unpack(packMsgspec(v))).toEqual({ a: [1, 2n ** 63n + 7n, "x", null], b: true });
  });
});

describe("KV event encoding", () => {
  const stored = {
    type: "BlockStored" as const,
    blockHashes: [2n ** 63n + 1n, 42n],
    parentBlockHash: null,
    tokenIds: [1, 2, 3, 4],
    blockSize: 2,
    loraName: null,
    extraKeys: null,
  };

  it("array form: tagged tuples, trailing default fields omitted, batch [ts, events, rank]", () => {
    const b = unpackr.unpack(
      encodeEventBatch(
        12.5,
        [stored, { type: "BlockRemoved", blockHashes: [42n] }, { type: "AllBlocksCleared" }],
        3,
        "array",
      ),
    );
    expect(b).toEqual([
      12.5,
      [
        ["BlockStored", [2n ** 63n + 1n, 42], null, [1, 2, 3, 4], 2, null, "GPU", null],
        ["BlockRemoved", [42], "GPU"],
        ["AllBlocksCleared"],
      ],
      3,
    ]);
  });

  it("map form: tagged maps, fields without defaults always present", () => {
    const b = unpackr.unpack(encodeEventBatch(1, [{ ...stored, extraKeys: [["salt"], null] }], 0, "map"));
    expect(b[2]).toBe(0);
    expect(b[1][0]).toEqual({
      type: "BlockStored",
      block_hashes: [2n ** 63n + 1n, 42],
      parent_block_hash: null,
      token_ids: [1, 2, 3, 4],
      block_size: 2,
      lora_id: null,
      medium: "GPU",
      lora_name: null,
      extra_keys: [["salt"], null],
    });
    const lora = unpackr.unpack(
      encodeEventBatch(
        1,
        [{ ...stored, loraName: "ad", loraId: 1, extraKeys: [["ad", "s"], ["ad"]] }],
        0,
        "array",
      ),
    );
    expect(lora[1][0].slice(5)).toEqual([1, "GPU", "ad", [["ad", "s"], ["ad"]]]);
    const loraMap = unpackr.unpack(
      encodeEventBatch(1, [{ ...stored, loraName: "ad", extraKeys: [["ad", "s"], ["ad"]] }], 0, "map"),
    );
    // Raw values in the map form too (vLLM's extra_keys: list[tuple[Any, ...] | None]).
    expect(loraMap[1][0].extra_keys).toEqual([["ad", "s"], ["ad"]]);
    expect(unpackr.unpack(encodeEventBatch(1, [{ type: "AllBlocksCleared" }], 0, "map"))[1]).toEqual([
      { type: "AllBlocksCleared" },
    ]);
  });
});

describe("block hashes", () => {
  it("chain over the parent, differ with cache_salt (first block) and LoRA (every block), reach ≥ 2^63", () => {
    const tokens = Array.from({ length: 64 }, (_, i) => i);
    const plain = new BlockHasher(16, noneHash(0), {});
    plain.update(tokens, 64);
    const again = new BlockHasher(16, noneHash(0), {});
    again.update(tokens.slice(0, 40), 40);
    again.update(tokens, 64);
    expect(again.hashes).toEqual(plain.hashes);
    const salted = new BlockHasher(16, noneHash(0), { cacheSalt: "s" });
    salted.update(tokens, 64);
    expect(salted.hashes.every((x, i) => x !== plain.hashes[i])).toBe(true);
    const other = new BlockHasher(16, noneHash(1), {});
    other.update(tokens, 64);
    expect(other.hashes[0]).not.toBe(plain.hashes[0]);
    const many: bigint[] = [];
    for (let s = 0; s < 64; s++) many.push(noneHash(s));
    expect(many.some((x) => x >= 2n ** 63n)).toBe(true);
    expect(many.some((x) => x < 2n ** 63n)).toBe(true);
  });

  it("the memo of hashed blocks gives what SHA-256 gives, for many children of one parent and any extra keys", () => {
    const sha = (parent: bigint, block: number[], extra: string[] | null): bigint => {
      const h = createHash("sha256");
      const p = Buffer.alloc(8);
      p.writeBigUInt64BE(parent);
      h.update(p);
      const body = Buffer.alloc(block.length * 4);
      for (const [i, t] of block.entries()) body.writeUInt32LE(t, i * 4);
      h.update(body);
      if (extra !== null) h.update(JSON.stringify(extra));
      return h.digest().readBigUInt64BE(0);
    };
    const parent = noneHash(7);
    // More children than a parent keeps, asked twice in a row and then in reverse, so some
    // answers come from the memo and some after their entry was dropped.
    const blocks = Array.from({ length: 20 }, (_, c) => Array.from({ length: 16 }, (_, i) => c * 100 + i));
    const extras: (string[] | null)[] = [null, ["lora-a"], ["lora-a", "salt"], []];
    for (const order of [blocks, blocks, [...blocks].reverse()])
      for (const block of order)
        for (const extra of extras) {
          const padded = [9, 9, ...block, 9];
          expect(hashBlock(parent, padded, 2, 18, extra)).toBe(sha(parent, block, extra));
        }
    // One token off, same parent and extra keys: not the memoised block's hash.
    const near = [...(blocks[0] as number[])];
    near[15] = (near[15] as number) + 1;
    expect(hashBlock(parent, near, 0, 16, null)).toBe(sha(parent, near, null));
    expect(hashBlock(parent, near, 0, 16, null)).not.toBe(sha(parent, blocks[0] as number[], null));
  });
});

describe("BlockPool", () => {
  it("evicts the least recently freed cached block first and reports it", () => {
    const pool = new BlockPool(4);
    const a = pool.allocate(2) as number[];
    pool.cacheBlock(a[0] as number, 1n, null, [1]);
    pool.cacheBlock(a[1] as number, 2n, 1n, [2]);
    pool.release(a); // freed tail-first: block of hash 2 goes to the queue before hash 1
    expect(pool.usage).toBe(0);
    expect(pool.numCachedBlocks).toBe(2);
    pool.drainEvents();
    pool.allocate(2); // the two never-used blocks come first
    expect(pool.drainEvents()).toEqual([]);
    pool.allocate(1);
    expect(pool.drainEvents()).toEqual([{ type: "BlockRemoved", blockHashes: [2n] }]);
    expect(pool.isCached(1n)).toBe(true);
    expect(pool.allocate(2)).toBeNull();
  });

  it("a hit takes a free cached block out of the LRU queue", () => {
    const pool = new BlockPool(2);
    const [b] = pool.allocate(1) as number[];
    pool.cacheBlock(b as number, 9n, null, [9]);
    pool.release([b as number]);
    expect(pool.freeAmongCached([9n], 1)).toBe(1);
    pool.touch([9n], 1);
    expect(pool.numFreeBlocks).toBe(1);
    pool.allocate(1);
    expect(pool.isCached(9n)).toBe(true);
    expect(pool.reset()).toBe(false); // blocks in use
  });
});

function engine(over: Partial<ConstructorParameters<typeof Engine>[0]> = {}): Engine {
  return new Engine({
    rank: 0,
    blockSize: 4,
    numGpuBlocks: 16,
    maxNumSeqs: 8,
    maxNumBatchedTokens: 64,
    seed: 1,
    outputVocab: [100, 101, 102],
    hashRoot: noneHash(1),
    ...over,
  });
}

function drive(e: Engine): void {
  let t = 0;
  for (let s = e.schedule(); s; s = e.schedule()) {
    t += s.durationMs;
    e.complete(s, t);
  }
}

describe("Engine", () => {
  it("second identical prompt hits the cache up to prompt − 1 tokens, and the step cost reflects it", () => {
    const e = engine();
    const prompt = Array.from({ length: 12 }, (_, i) => i + 1);
    const r1 = e.add({ id: "a", promptTokens: prompt, maxTokens: 2 }, 0);
    const s1 = e.schedule();
    expect(s1?.prefillTokens).toBe(12);
    drive(e);
    expect(r1.cachedTokens).toBe(0);
    const r2 = e.add({ id: "b", promptTokens: prompt, maxTokens: 2 }, 0);
    const s2 = e.schedule();
    // 12 tokens = 3 full blocks; the last must be recomputed, so 8 cached and 4 computed.
    expect(s2?.prefillTokens).toBe(4);
    drive(e);
    expect(r2.cachedTokens).toBe(8);
    expect(e.counters.prefixCacheQueries).toBe(24);
    expect(e.counters.prefixCacheHits).toBe(8);
    expect(r2.tokens.slice(12)).toEqual(r1.tokens.slice(12)); // same seed + prompt → same text
  });

  it("chunks long prompts by the token budget and stores blocks as they fill", () => {
    const e = engine({ maxNumBatchedTokens: 8, numGpuBlocks: 32 });
    e.add({ id: "a", promptTokens: Array.from({ length: 20 }, (_, i) => i), maxTokens: 1 }, 0);
    const steps: number[] = [];
    let stored = 0;
    let t = 0;
    for (let s = e.schedule(); s; s = e.schedule()) {
      steps.push(s.prefillTokens);
      t += s.durationMs;
      for (const ev of e.complete(s, t).events)
        if (ev.type === "BlockStored") stored += ev.blockHashes.length;
    }
    expect(steps).toEqual([8, 8, 4]);
    expect(stored).toBe(5);
  });

  it("rejects requests longer than the model length with vLLM's message", () => {
    const e = engine({ maxModelLen: 10 });
    expect(() => e.add({ id: "x", promptTokens: [1, 2, 3, 4, 5, 6, 7, 8], maxTokens: 3 }, 0)).toThrow(
      /maximum context length is 10 tokens/,
    );
  });

  it("preempts the last running request when blocks run out and still finishes everything", () => {
    const e = engine({ numGpuBlocks: 6, maxNumBatchedTokens: 64 });
    const reqs = [0, 1, 2].map((k) =>
      e.add({ id: `r${k}`, promptTokens: Array.from({ length: 7 }, (_, i) => 50 * k + i), maxTokens: 9 }, 0),
    );
    drive(e);
    expect(reqs.every((r) => r.status === "finished" && r.outputTokens === 9)).toBe(true);
    expect(e.counters.preemptions).toBeGreaterThan(0);
    expect(e.pool.numFreeBlocks).toBe(6);
  });
});

describe("rank header (Python int())", () => {
  it.each([
    ["3", 3n],
    [" 3 ", 3n],
    ["\t+3\n", 3n],
    ["-1", -1n],
    ["1_0", 10n],
    ["007", 7n],
    ["99999999999999999999999", 99999999999999999999999n],
  ])("%j parses as %s", (s, v) => expect(parsePythonInt(s)).toBe(v));

  it.each(["", " ", "abc", "1.0", "0x1", "1__0", "_1", "1_", "+-1", "١"])("%j is not an int", (s) =>
    expect(parsePythonInt(s)).toBeNull(),
  );

  it("out of range → vLLM's ValueError text as a 400; garbage → balance", () => {
    expect(resolveRankHeader("4", 4)).toEqual({
      kind: "error",
      status: 400,
      message: "data_parallel_rank 4 is out of range [0, 4).",
    });
    expect(resolveRankHeader("-1", 4)).toMatchObject({
      message: "data_parallel_rank -1 is out of range [0, 4).",
    });
    expect(resolveRankHeader("x", 4)).toEqual({ kind: "balance" });
    expect(resolveRankHeader(undefined, 4)).toEqual({ kind: "balance" });
    expect(resolveRankHeader(" 2", 4)).toEqual({ kind: "index", index: 2 });
  });

  it("fronts per DP mode", () => {
    expect(frontsOf({ mode: "internal", size: 4, sizeLocal: 4, startRank: 0 })).toEqual([
      { portOffset: 0, ranks: [0, 1, 2, 3] },
    ]);
    expect(frontsOf({ mode: "hybrid", size: 4, sizeLocal: 2, startRank: 2 })).toEqual([
      { portOffset: 0, ranks: [2, 3] },
    ]);
    expect(frontsOf({ mode: "external", size: 4, sizeLocal: 2, startRank: 2 })).toEqual([
      { portOffset: 0, ranks: [2] },
      { portOffset: 1, ranks: [3] },
    ]);
  });
});

describe("kv-events-config", () => {
  it("parses vLLM's JSON with defaults and offsets ports per rank", () => {
    const c = parseKvEventsConfig(
      '{"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5657"}',
    );
    expect(c).toMatchObject({ publisher: "zmq", bufferSteps: 10_000, hwm: 100_000, topic: "" });
    expect(offsetEndpointPort("tcp://*:5557", 3)).toBe("tcp://*:5560");
    expect(offsetEndpointPort("inproc://cache", 2)).toBe("inproc://cache_dp2");
    expect(publisherBinds("tcp://*:5557")).toBe(true);
    expect(publisherBinds("tcp://127.0.0.1:5557")).toBe(false);
    expect(() => parseKvEventsConfig('{"enable_kv_cache_events":"yes"}')).toThrow(/enable_kv_cache_events/);
    expect(() => parseKvEventsConfig("{")).toThrow(/not valid JSON/);
  });
});

describe("vLLM DP balancer", () => {
  it("legacy: lowest 4*waiting + running, local increments between stats", () => {
    const b = new VllmDpBalancer(3, "legacy");
    b.updateStats([
      { waiting: 1, running: 0, kvUsage: 0 },
      { waiting: 0, running: 3, kvUsage: 0 },
      { waiting: 0, running: 5, kvUsage: 0 },
    ]);
    expect(b.pick()).toBe(1); // 3 < 4 < 5
    expect(b.pick()).toBe(0); // engine 1 now scores 7
  });

  it("current: max(in-flight, waiting + running) + KV-pressure penalty, rotating ties", () => {
    const b = new VllmDpBalancer(2, "current");
    b.updateStats([
      { waiting: 0, running: 0, kvUsage: 0 },
      { waiting: 0, running: 0, kvUsage: 0 },
    ]);
    expect([b.pick(), b.pick(), b.pick(), b.pick()]).toEqual([0, 1, 0, 1]);
    const c = new VllmDpBalancer(2, "current");
    c.updateStats([
      { waiting: 2, running: 0, kvUsage: 1 }, // 2 + 2*6*0.5 = 8
      { waiting: 0, running: 5, kvUsage: 1 },
    ]);
    expect(c.pick()).toBe(1);
  });
});

describe("virtual-time cluster", () => {
  const workload = sharedPrefixWorkload({
    requests: 400,
    groups: 8,
    systemTokens: 256,
    questionTokens: 32,
    outputTokens: 16,
    ratePerSecond: 200,
    seed: 5,
  });

  function run(seed: number) {
    const batches: Array<{ rank: number; t: number; n: number }> = [];
    let removed = 0;
    const caches = [new Map(), new Map()] as Array<Map<bigint, { parent: bigint | null; tokens: number[] }>>;
    const c = createSimCluster({
      dataParallelSize: 2,
      numGpuBlocks: 120,
      seed,
      onKvEvents: (rank, events, t) => {
        batches.push({ rank, t, n: events.length });
        removed += events.filter((e) => e.type === "BlockRemoved").length;
        // Round-trip through the wire encoding and an independent decoder.
        applyEvents(
          caches[rank] as Map<bigint, never>,
          decodePayload(encodeEventBatch(t / 1000, events, rank, "map")).events,
        );
      },
    });
    for (const w of workload) c.submit(w.request, w.atMs);
    const results = c.runUntilIdle();
    return { c, results, batches, caches, removed };
  }

  it("is deterministic for a seed and rebuilds each rank's cache exactly from its events", () => {
    const a = run(3);
    const b = run(3);
    expect(a.results).toEqual(b.results);
    expect(a.batches).toEqual(b.batches);
    expect(a.results).toHaveLength(400);
    for (const rank of [0, 1]) {
      const truth = new Map(
        [...a.c.cachedContents(rank)].map(([k, v]) => [k, { parent: v.parent, tokens: v.tokenIds }]),
      );
      expect(a.caches[rank]).toEqual(truth);
    }
    // Capacity pressure: 8 prefixes × 16 blocks do not fit in 120 blocks per rank.
    expect(a.removed).toBeGreaterThan(0);
    expect(a.results.some((r) => r.cachedTokens > 0)).toBe(true);
    const diff = run(4);
    expect(diff.results.map((r) => r.outputTokenIds)).not.toEqual(a.results.map((r) => r.outputTokenIds));
  });

  it("a router in the loop sees the state at arrival time and pins groups to ranks", () => {
    const seen: number[] = [];
    const c = createSimCluster({ dataParallelSize: 2, numGpuBlocks: 400, seed: 1 });
    for (const w of workload.slice(0, 100)) {
      c.submit(
        {
          ...w.request,
          rank: (view) => {
            seen.push(view.nowMs);
            const hit0 = view.cachedPrefixTokens(0);
            const hit1 = view.cachedPrefixTokens(1);
            if (hit0 !== hit1) return hit0 > hit1 ? 0 : 1;
            const [l0, l1] = view.loads as [EngineLoad, EngineLoad];
            return l0.running + l0.waiting <= l1.running + l1.waiting ? 0 : 1;
          },
        },
        w.atMs,
      );
    }
    const res = c.runUntilIdle();
    expect(seen).toEqual(workload.slice(0, 100).map((w) => w.atMs));
    const byGroup = new Map<number, Set<number>>();
    for (const r of res) {
      const g = (workload[Number(r.id.slice(1))] as TimedRequest).group;
      byGroup.set(g, (byGroup.get(g) ?? new Set()).add(r.rank));
    }
    // Cache-aware routing keeps most groups on one rank.
    expect([...byGroup.values()].filter((s) => s.size === 1).length).toBeGreaterThanOrEqual(6);
  });

  it("advanceTo exposes load mid-run; explicit ranks are validated", () => {
    const c = createSimCluster({ dataParallelSize: 2, numGpuBlocks: 100, seed: 0, statsIntervalMs: 0 });
    c.submit({ tokens: Array.from({ length: 64 }, (_, i) => i + 1), maxTokens: 50, rank: 1 }, 0);
    c.advanceTo(10);
    expect(c.loads()[1]).toMatchObject({ running: 1, waiting: 0 });
    expect(c.loads()[0]).toMatchObject({ running: 0 });
    expect(() => c.submit({ tokens: [1], maxTokens: 1, rank: 2 })).toThrow(/out of range/);
    expect(() => c.submit({ tokens: [1], maxTokens: 1 }, 5)).toThrow(/past/);
    const [r] = c.runUntilIdle();
    expect(r).toMatchObject({ rank: 1, promptTokens: 64, outputTokens: 50, cachedTokens: 0 });
    // One prefill step: overhead, 64 tokens, and their causal attention among themselves
    // (64·63/2 pairs; the cost model's prefill attention term, added in issue #15).
    expect(r?.ttftMs).toBeCloseTo(
      5.75 + 64 * 0.01725 + ((64 * 63) / 2) * (DEFAULT_LATENCY.prefillAttentionPerPairMs ?? 0),
      6,
    );
  });
});

describe("kvroute sim --virtual-requests", () => {
  it("summarises a shared-prefix run, identically for a seed", async () => {
    const { runVirtual } = await import("../../control-plane/sim/cli.ts");
    const o = {
      model: "m",
      host: "127.0.0.1",
      port: 0,
      dataParallelSize: 2,
      blockSize: 16,
      numGpuBlocks: 2000,
      maxNumSeqs: 64,
      maxNumBatchedTokens: 4096,
      eventEncoding: "array",
      kvEventsReplayForm: "topic",
      seed: 9,
      timeScale: 1,
      lbRule: "current",
      lbStatsIntervalMs: 100,
      enablePromptTokensDetails: true,
      stepOverheadMs: 5.75,
      prefillTokenMs: 0.01725,
      decodeSeqMs: 0.006,
      frontend: "vllm",
      virtualRequests: 300,
      virtualRate: 50,
    } as const;
    const { wallSeconds: _a, ...a } = runVirtual(o);
    const { wallSeconds: _b, ...b } = runVirtual(o);
    expect(a).toEqual(b);
    expect(a.requests).toBe(300);
    expect(a.cachedTokenFraction).toBeGreaterThan(0);
    const { wallSeconds: _c, ...c } = runVirtual({ ...o, seed: 10 });
    expect(c).not.toEqual(a);
  });
});

describe("kvroute sim --latency-profile", () => {
  const base = {
    model: "m",
    host: "127.0.0.1",
    port: 0,
    dataParallelSize: 1,
    blockSize: 16,
    numGpuBlocks: 100,
    maxNumSeqs: 8,
    maxNumBatchedTokens: 256,
    eventEncoding: "array",
    kvEventsReplayForm: "topic",
    seed: 1,
    timeScale: 1,
    lbRule: "current",
    lbStatsIntervalMs: 100,
    enablePromptTokensDetails: true,
    frontend: "vllm",
  } as const;

  it("takes the named profile whole, and the three flags override only their terms", async () => {
    const { configOf } = await import("../../control-plane/sim/cli.ts");
    const { H200_MEASURED_LATENCY } = await import("../../control-plane/sim/latency.ts");
    expect(configOf({ ...base, latencyProfile: "h200-measured" } as never).latency).toEqual(
      H200_MEASURED_LATENCY,
    );
    expect(configOf({ ...base } as never).latency).toEqual(DEFAULT_LATENCY);
    const mixed = configOf({ ...base, latencyProfile: "h200-measured", decodeSeqMs: 0.006 } as never).latency;
    expect(mixed?.decodePerSeqMs).toBe(0.006);
    expect(mixed?.kvReadPerTokenMs).toBe(H200_MEASURED_LATENCY.kvReadPerTokenMs);
  });
});
