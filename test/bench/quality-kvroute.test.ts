// kvroute's rows of the quality bench come from the shipped filter: build/kvroute.wasm in the
// Proxy-Wasm host, several gateways of several threads, synced from the control plane's own parts
// on the virtual clock. A small shared-prefix run shows the pieces are really in the loop.
import { beforeAll, describe, expect, it, vi } from "vitest";
import type { ClusterConfig } from "../../bench/quality/harness.ts";
import { runOne } from "../../bench/quality/harness.ts";
import { type KvrouteStats, kvroutePolicy } from "../../bench/quality/policies/kvroute.ts";
import { BenchTokenizer } from "../../bench/quality/tokens.ts";
import { generatedSharedPrefix } from "../../bench/quality/workloads/generated-shared-prefix.ts";
import type { Workload } from "../../bench/quality/workloads/types.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";

let tok: BenchTokenizer;
let workload: Workload;
beforeAll(() => {
  tok = new BenchTokenizer();
  workload = generatedSharedPrefix(tok, {
    groups: 4,
    promptsPerGroup: 8,
    systemTokens: 512,
    questionTokens: 32,
    outputTokens: 16,
    qps: [40],
    seed: 3,
  });
});

const cluster: ClusterConfig = {
  workers: 2,
  ranksPerWorker: 2,
  blockSize: 16,
  numGpuBlocks: 4096,
  maxNumSeqs: 64,
  maxNumBatchedTokens: 4096,
  statsIntervalMs: 100,
  kvEventDelayMs: 20,
  tickMs: 50,
  maxVirtualMs: 120_000,
};

function run(o: { gateways: number; threads: number }) {
  const stats: KvrouteStats = { outcomes: new Map() };
  const policy = kvroutePolicy(
    { workers: 2, ranksPerWorker: 2, speculative: true, gateways: o.gateways, threadsPerGateway: o.threads },
    "kvroute",
    stats,
  );
  const out = runOne(workload.run(40), policy, cluster, 3, tok.wordIds);
  return { out, stats };
}

describe("kvroute in the quality bench", () => {
  it("routes every request through the filter of every gateway, synced and reporting", () => {
    const { out, stats } = run({ gateways: 2, threads: 2 });
    expect(out.unfinished).toBe(0);
    expect(out.metrics.requests).toBe(32);
    // Every decision is the filter's own (its counters), none fell through without a destination.
    const routed = [...stats.outcomes.values()].reduce((a, b) => a + b, 0);
    expect(routed).toBe(32);
    expect(stats.outcomes.get("fail_open") ?? 0).toBe(0);
    // Both gateways took requests; their leaders polled and reported.
    expect(stats.routedByGateway).toEqual([16, 16]);
    expect(stats.reports).toBeGreaterThan(2);
    expect(stats.polls).toBeGreaterThan(2);
    // KV events went through the subscriber's state machine, none dropped.
    expect(stats.kvBatches).toBeGreaterThan(32);
    expect(stats.kvDropped).toBe(0);
    // Shared prefixes found through KV events, reports and speculative routes.
    expect(
      (stats.outcomes.get("prefix_hit") ?? 0) + (stats.outcomes.get("speculative_hit") ?? 0),
    ).toBeGreaterThan(16);
    expect(out.metrics.hitRate).toBeGreaterThan(0.5);
  });

  it("indexes KV batches on the core's fast path, as the control plane does", () => {
    // app.ts registers slots with the pool's token-bytes table, so vLLM's batches skip the
    // JavaScript decoder; the bench's control plane must too, or its rows measure another path.
    const scanned = vi.spyOn(PrefixIndex.prototype, "applyScanned");
    const decoded = vi.spyOn(PrefixIndex.prototype, "event");
    try {
      const { stats } = run({ gateways: 1, threads: 1 });
      expect(stats.kvBatches).toBeGreaterThan(32);
      expect(scanned).toHaveBeenCalledTimes(stats.kvBatches ?? 0);
      expect(decoded).not.toHaveBeenCalled();
    } finally {
      scanned.mockRestore();
      decoded.mockRestore();
    }
  });

  it("is repeatable for a seed", () => {
    const a = run({ gateways: 2, threads: 2 });
    const b = run({ gateways: 2, threads: 2 });
    expect(b.out.metrics).toEqual(a.out.metrics);
    expect([...b.stats.outcomes]).toEqual([...a.stats.outcomes]);
  });
});
