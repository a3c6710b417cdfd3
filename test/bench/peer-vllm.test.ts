import { describe, expect, it } from "vitest";
import type { PolicyFactory } from "../../bench/quality/policies/types.ts";
import { vllmCurrentPolicy, vllmLegacyPolicy } from "../../bench/quality/policies/vllm-dp.ts";
import type { BenchRequest } from "../../bench/quality/workloads/types.ts";
import type { EngineLoad } from "../../control-plane/sim/engine.ts";
import { createSimCluster, type SimRequestResult } from "../../control-plane/sim/virtual-cluster.ts";

const load = (rank: number, waiting: number, running: number, kvUsage = 0): EngineLoad => ({
  rank,
  waiting,
  running,
  kvUsage,
  numFreeBlocks: 0,
  numCachedBlocks: 0,
});

function policyOver(factory: PolicyFactory, ranks: number) {
  const cluster = createSimCluster({ dataParallelSize: ranks, numGpuBlocks: 64, seed: 1 });
  return factory.create({ cluster, ranks, blockSize: 16, seed: 1, kvEventDelayMs: 0, release: () => {} });
}

const req = { id: "r" } as BenchRequest;
const view = { nowMs: 0, loads: [], cachedPrefixTokens: () => 0 };

describe("vLLM DP balancer, both generations", () => {
  it("≤ 0.11: lowest 4·waiting + running; ties to the lowest index from a fixed start", () => {
    const p = policyOver(vllmLegacyPolicy, 3);
    p.tick?.(0, [load(0, 1, 0), load(1, 0, 3), load(2, 0, 5)]);
    expect(p.choose?.(view, req)).toBe(1); // 4 > 3 < 5
    // Its own pick counts as waiting until the next refresh: rank 1 now scores 4 + 3 = 7.
    expect(p.choose?.(view, req)).toBe(0);
    const q = policyOver(vllmLegacyPolicy, 3);
    q.tick?.(0, [load(0, 0, 0), load(1, 0, 0), load(2, 0, 0)]);
    expect([q.choose?.(view, req), q.choose?.(view, req), q.choose?.(view, req)]).toEqual([0, 1, 2]);
  });

  it("main: max(in-flight, waiting + running) + waiting·6·max(0, kv − 0.5); rotating start", () => {
    const p = policyOver(vllmCurrentPolicy, 2);
    // Rank 0: 1 waiting at 90% KV → 1 + 1·6·0.4 = 3.4; rank 1: 3 running → 3.
    p.tick?.(0, [load(0, 1, 0, 0.9), load(1, 0, 3, 0.2)]);
    expect(p.choose?.(view, req)).toBe(1);
    // The same loads under the ≤ 0.11 rule: 4 vs 3 → rank 1 too; at 50% KV the penalty vanishes.
    const q = policyOver(vllmCurrentPolicy, 2);
    q.tick?.(0, [load(0, 1, 1, 0.5), load(1, 0, 3, 0.1)]);
    expect(q.choose?.(view, req)).toBe(0); // 2 < 3
  });

  it("main counts its own in-flight requests until they finish", () => {
    const p = policyOver(vllmCurrentPolicy, 2);
    p.tick?.(0, [load(0, 0, 0), load(1, 0, 0)]);
    const first = p.choose?.(view, req) as number;
    p.tick?.(100, [load(0, 0, 0), load(1, 0, 0)]); // a refresh erases local waiting, not in-flight
    expect(p.choose?.(view, req)).toBe(1 - first);
    p.done?.({ rank: first } as SimRequestResult, req);
    p.tick?.(200, [load(0, 0, 0), load(1, 0, 0)]);
    // Rank `1 - first` still has one in flight; `first` has none.
    expect(p.choose?.(view, req)).toBe(first);
  });

  it("labels both rules by version", () => {
    expect(vllmLegacyPolicy.name).toMatch(/0\.11/);
    expect(vllmCurrentPolicy.describe).toMatch(/00080ee/);
  });
});
