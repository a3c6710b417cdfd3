import { describe, expect, it } from "vitest";
import { noneHash } from "../../control-plane/sim/block-hash.ts";
import { Engine } from "../../control-plane/sim/engine.ts";
import {
  chunkAttentionPairs,
  DEFAULT_LATENCY,
  isolatedPrefillMs,
  type LatencyModel,
  stepDurationMs,
} from "../../control-plane/sim/latency.ts";

const none = { prefillTokens: 0, decodeSeqs: 0, decodeContextTokens: 0, prefillAttentionPairs: 0 };
const unit: LatencyModel = {
  stepOverheadMs: 5,
  prefillPerTokenMs: 0.01,
  decodePerSeqMs: 0.1,
  kvReadPerTokenMs: 0.001,
  prefillAttentionPerPairMs: 0.0001,
};

describe("step cost terms", () => {
  it.each([
    ["overhead only", none, 5],
    ["prefill tokens", { ...none, prefillTokens: 100 }, 5 + 1],
    ["attention pairs", { ...none, prefillAttentionPairs: 10_000 }, 5 + 1],
    ["decode sequences", { ...none, decodeSeqs: 10 }, 5 + 1],
    ["decode context (KV read)", { ...none, decodeContextTokens: 1000 }, 5 + 1],
  ])("%s", (_name, work, want) => {
    expect(stepDurationMs(unit, work)).toBeCloseTo(want, 9);
  });

  it("a three-term model ignores the context terms (hand-written models keep their meaning)", () => {
    const old = { stepOverheadMs: 5, prefillPerTokenMs: 0.01, decodePerSeqMs: 0.1 };
    expect(stepDurationMs(old, { ...none, decodeContextTokens: 1e6, prefillAttentionPairs: 1e9 })).toBe(5);
  });

  it.each([
    [1, 0, 0],
    [4, 0, 6], // 0+1+2+3
    [2, 10, 21], // 10 + 11
    [128, 2048, 128 * 2048 + (128 * 127) / 2],
  ])("chunk of %d new tokens after %d has %d attention pairs", (n, ctx, want) => {
    expect(chunkAttentionPairs(n, ctx)).toBe(want);
  });
});

describe("H100 defaults", () => {
  it("reading 8k tokens of KV per decode step costs ~50x the per-sequence term", () => {
    const perSeq8k = 8192 * (DEFAULT_LATENCY.kvReadPerTokenMs ?? 0);
    // 8192 × 128 KiB / (3.35 TB/s × 0.77) ≈ 0.42 ms.
    expect(perSeq8k).toBeGreaterThan(0.4);
    expect(perSeq8k).toBeLessThan(0.44);
    expect(perSeq8k / DEFAULT_LATENCY.decodePerSeqMs).toBeGreaterThan(50);
  });

  it("attention over a 6k cached prefix is a fraction of the 1.2k-token question's linear cost", () => {
    const attention = chunkAttentionPairs(1200, 6000) * (DEFAULT_LATENCY.prefillAttentionPerPairMs ?? 0);
    const linear = 1200 * DEFAULT_LATENCY.prefillPerTokenMs;
    expect(attention).toBeGreaterThan(0.3 * linear);
    expect(attention).toBeLessThan(linear);
  });
});

describe("isolated prefill (the TTFT floor)", () => {
  it("is one step per chunk of the token budget", () => {
    const one = stepDurationMs(unit, {
      ...none,
      prefillTokens: 100,
      prefillAttentionPairs: chunkAttentionPairs(100, 0),
    });
    expect(isolatedPrefillMs(unit, 100, 0, 8192)).toBeCloseTo(one, 9);
    const a = stepDurationMs(unit, {
      ...none,
      prefillTokens: 60,
      prefillAttentionPairs: chunkAttentionPairs(60, 0),
    });
    const b = stepDurationMs(unit, {
      ...none,
      prefillTokens: 40,
      prefillAttentionPairs: chunkAttentionPairs(40, 60),
    });
    expect(isolatedPrefillMs(unit, 100, 0, 60)).toBeCloseTo(a + b, 9);
  });

  it("always computes the last token, and falls as more of the prompt is cached", () => {
    const all = isolatedPrefillMs(DEFAULT_LATENCY, 4096, 4096, 8192);
    expect(all).toBeCloseTo(isolatedPrefillMs(DEFAULT_LATENCY, 4096, 4095, 8192), 9);
    let last = Number.POSITIVE_INFINITY;
    for (const cached of [0, 1024, 2048, 3072, 4000]) {
      const t = isolatedPrefillMs(DEFAULT_LATENCY, 32_768, cached * 8, 8192);
      expect(t).toBeLessThan(last);
      last = t;
    }
  });

  it("equals what the engine charges a lone prompt", () => {
    const engine = new Engine({
      rank: 0,
      blockSize: 16,
      numGpuBlocks: 1000,
      maxNumSeqs: 8,
      maxNumBatchedTokens: 512,
      seed: 1,
      outputVocab: [7],
      hashRoot: noneHash(1),
    });
    engine.add({ id: "a", promptTokens: Array.from({ length: 1200 }, (_, i) => i + 1), maxTokens: 2 }, 0);
    let t = 0;
    for (let s = engine.schedule(); s !== null; s = engine.schedule()) {
      t += s.durationMs;
      if (engine.complete(s, t).outputs.some((o) => o.first)) break;
    }
    expect(t).toBeCloseTo(isolatedPrefillMs(DEFAULT_LATENCY, 1200, 0, 512), 9);
  });
});

describe("engine step accounting", () => {
  it("charges a decode step for the KV its sequences read", () => {
    const engine = new Engine({
      rank: 0,
      blockSize: 16,
      numGpuBlocks: 1000,
      maxNumSeqs: 8,
      maxNumBatchedTokens: 8192,
      seed: 1,
      outputVocab: [7],
      hashRoot: noneHash(1),
    });
    engine.add({ id: "a", promptTokens: Array.from({ length: 3000 }, (_, i) => i + 1), maxTokens: 3 }, 0);
    const prefill = engine.schedule();
    if (prefill === null) throw new Error("nothing scheduled");
    engine.complete(prefill, prefill.durationMs);
    const decode = engine.schedule();
    expect(decode).toMatchObject({ decodeSeqs: 1, decodeContextTokens: 3000, prefillTokens: 0 });
    expect(decode?.durationMs).toBeCloseTo(5.75 + 0.006 + 3000 * (DEFAULT_LATENCY.kvReadPerTokenMs ?? 0), 9);
  });
});

describe("shared-prefix workload answer lengths", () => {
  it("are fixed by default and drawn from a distribution when given one", async () => {
    const { sharedPrefixWorkload } = await import("../../control-plane/sim/workloads.ts");
    const fixed = sharedPrefixWorkload({ requests: 50, ratePerSecond: 10, seed: 1, outputTokens: 33 });
    expect(new Set(fixed.map((w) => w.request.maxTokens))).toEqual(new Set([33]));
    const drawn = sharedPrefixWorkload({
      requests: 50,
      ratePerSecond: 10,
      seed: 1,
      outputLengths: { kind: "uniform", min: 10, max: 20 },
    });
    const lengths = drawn.map((w) => w.request.maxTokens);
    expect(new Set(lengths).size).toBeGreaterThan(3);
    for (const n of lengths) expect(n >= 10 && n <= 20).toBe(true);
  });
});
