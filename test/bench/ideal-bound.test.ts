import { describe, expect, it } from "vitest";
import { type ClusterConfig, runOne } from "../../bench/quality/harness.ts";
import { dynamoDefaultPolicy } from "../../bench/quality/policies/dynamo-default.ts";
import { gaiePrefixPolicy } from "../../bench/quality/policies/gaie-prefix.ts";
import { globallyCachedTokens, idealPolicy, isolatedDecodeMs } from "../../bench/quality/policies/ideal.ts";
import { llmdPrecisePolicy } from "../../bench/quality/policies/llmd-precise.ts";
import { randomPolicy } from "../../bench/quality/policies/random.ts";
import { roundRobinPolicy } from "../../bench/quality/policies/round-robin.ts";
import { sglangCacheAwarePolicy } from "../../bench/quality/policies/sglang-cache-aware.ts";
import { chainBlockKeys } from "../../bench/quality/policies/token-blocks.ts";
import type { PolicyFactory, RoutingPolicy } from "../../bench/quality/policies/types.ts";
import { vllmCurrentPolicy, vllmLegacyPolicy } from "../../bench/quality/policies/vllm-dp.ts";
import type { BenchRequest, WorkloadRun } from "../../bench/quality/workloads/types.ts";
import { DEFAULT_LATENCY } from "../../control-plane/sim/latency.ts";
import { Rng } from "../../control-plane/sim/rng.ts";

describe("ideal bound: hit-rate ceiling", () => {
  it("counts the prefix any earlier request sent, in whole blocks, keeping one token to compute", () => {
    const a = Array.from({ length: 64 }, (_, i) => i);
    const seen = new Set(chainBlockKeys(a, 16));
    expect(globallyCachedTokens([...a.slice(0, 40), 999, 998], seen, 16)).toBe(32);
    expect(globallyCachedTokens(a, seen, 16)).toBe(63);
    expect(globallyCachedTokens([7, ...a], seen, 16)).toBe(0);
  });

  it("decode floor: one step per token after the first, each reading its growing context", () => {
    expect(isolatedDecodeMs(DEFAULT_LATENCY, 100, 1)).toBe(0);
    const two = isolatedDecodeMs(DEFAULT_LATENCY, 100, 3);
    const step = (ctx: number) =>
      DEFAULT_LATENCY.stepOverheadMs +
      DEFAULT_LATENCY.decodePerSeqMs +
      ctx * (DEFAULT_LATENCY.kvReadPerTokenMs ?? 0);
    expect(two).toBeCloseTo(step(101) + step(102), 9);
  });
});

/** Groups of prompts sharing a long prefix, Poisson arrivals fast enough to queue. */
function sharedPrefixRun(seed: number): WorkloadRun {
  const rng = new Rng(seed);
  const prefixes = Array.from({ length: 6 }, () => Array.from({ length: 1024 }, () => 1000 + rng.int(30000)));
  let t = 0;
  const arrivals = Array.from({ length: 160 }, (_, i) => {
    const g = rng.int(prefixes.length);
    const tokens = [...(prefixes[g] as number[]), ...Array.from({ length: 64 }, () => 1000 + rng.int(30000))];
    t += -Math.log(1 - rng.next()) * 8;
    const text = `group ${g} ${"x".repeat(400)} request ${i}`;
    const request: BenchRequest = {
      id: `r${i}`,
      messages: [{ role: "user", content: text }],
      maxTokens: 8 + rng.int(40),
      tokens,
      body: new Uint8Array(),
      messagesJson: JSON.stringify([{ role: "user", content: text }]),
      routingText: text,
    };
    return { atMs: t, request };
  });
  return { arrivals };
}

const cluster: ClusterConfig = {
  workers: 2,
  ranksPerWorker: 2,
  blockSize: 16,
  numGpuBlocks: 300,
  maxNumSeqs: 64,
  maxNumBatchedTokens: 2048,
  statsIntervalMs: 100,
  kvEventDelayMs: 20,
  tickMs: 10,
  maxVirtualMs: 600_000,
};

describe("ideal bound: no router passes it", () => {
  const routers: PolicyFactory[] = [
    randomPolicy,
    roundRobinPolicy,
    vllmLegacyPolicy,
    vllmCurrentPolicy,
    gaiePrefixPolicy,
    sglangCacheAwarePolicy,
    dynamoDefaultPolicy,
    llmdPrecisePolicy,
  ];
  const vocab = Array.from({ length: 100 }, (_, i) => 500 + i);

  it.each([1, 2])(
    "seed %d: every router's hit rate ≤ the ceiling and TTFT / E2E percentiles ≥ the floors",
    (seed) => {
      let bound: RoutingPolicy | undefined;
      const capture: PolicyFactory = {
        ...idealPolicy,
        create: (ctx) => {
          bound = idealPolicy.create(ctx);
          return bound;
        },
      };
      const run = runOne(sharedPrefixRun(seed), capture, cluster, seed, vocab);
      const ideal = bound?.bound?.(run.metrics);
      if (ideal === undefined) throw new Error("no bound");
      expect(ideal.outputTokPerS).toBeNaN();
      expect(ideal.hitRate).toBeGreaterThan(0.5);
      for (const p of routers) {
        const m = runOne(sharedPrefixRun(seed), p, cluster, seed, vocab).metrics;
        expect(m.requests, p.name).toBe(160);
        expect(m.hitRate, p.name).toBeLessThanOrEqual(ideal.hitRate + 1e-12);
        expect(m.ttftP50, p.name).toBeGreaterThanOrEqual(ideal.ttftP50 - 1e-9);
        expect(m.ttftP90, p.name).toBeGreaterThanOrEqual(ideal.ttftP90 - 1e-9);
        expect(m.ttftP99, p.name).toBeGreaterThanOrEqual(ideal.ttftP99 - 1e-9);
        expect(m.e2eP90, p.name).toBeGreaterThanOrEqual(ideal.e2eP90 - 1e-9);
      }
    },
  );
});
