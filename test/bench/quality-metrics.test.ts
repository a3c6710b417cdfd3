import { describe, expect, it } from "vitest";
import { imbalance, percentile, summarize } from "../../bench/quality/metrics.ts";
import { clearlyBetter, type ResultRow, standingsOf } from "../../bench/quality/report.ts";
import type { SimRequestResult } from "../../control-plane/sim/virtual-cluster.ts";

describe("percentile (linear interpolation, numpy's default)", () => {
  it.each([
    [[5], 50, 5],
    [[1, 2, 3, 4], 0, 1],
    [[1, 2, 3, 4], 100, 4],
    [[1, 2, 3, 4], 50, 2.5],
    [[10, 20, 30, 40, 50], 90, 46],
    [[0, 100], 99, 99],
  ])("%j p%d = %d", (xs, p, want) => {
    expect(percentile(xs, p)).toBeCloseTo(want, 10);
  });

  it("is NaN for no data", () => {
    expect(percentile([], 50)).toBeNaN();
  });
});

describe("imbalance", () => {
  it("is max over mean", () => {
    expect(imbalance([1, 1, 1, 1])).toBe(1);
    expect(imbalance([4, 0, 0, 0])).toBe(4);
    expect(imbalance([0, 0])).toBeNaN();
  });
});

describe("summarize", () => {
  const result = (
    id: string,
    rank: number,
    arrival: number,
    ttft: number,
    cached: number,
  ): SimRequestResult => ({
    id,
    rank,
    arrivalMs: arrival,
    firstTokenMs: arrival + ttft,
    finishMs: arrival + ttft + 100,
    ttftMs: ttft,
    e2eMs: ttft + 100,
    promptTokens: 100,
    cachedTokens: cached,
    outputTokens: 10,
    preemptions: 0,
    outputTokenIds: [],
  });

  it("counts hits, per-rank requests and throughput over the run's span", () => {
    const m = summarize([result("a", 0, 0, 10, 50), result("b", 1, 100, 30, 0)], 2, () => 100);
    expect(m.hitRate).toBeCloseTo(0.25);
    expect(m.requestsPerRank).toEqual([1, 1]);
    expect(m.ttftP50).toBe(20);
    // 20 output tokens from t=0 to t=230 ms.
    expect(m.outputTokPerS).toBeCloseTo((20 * 1000) / 230);
    expect(m.prefillImbalance).toBeCloseTo(100 / 75);
  });

  it("adds the ideal bound's skipped tokens as hits", () => {
    const m = summarize(
      [result("a", 0, 0, 10, 0)],
      1,
      () => 100,
      () => 99,
    );
    expect(m.hitRate).toBeCloseTo(0.99);
  });
});

describe("standings (ties within 2%)", () => {
  const row = (policy: string, ttftP90: number, tput: number): ResultRow => ({
    workload: "w",
    qps: 1,
    policy,
    unfinished: 0,
    wallS: 0,
    metrics: { ...summarize([], 1, () => 0), ttftP90, outputTokPerS: tput },
  });

  it("counts only clear wins against kvroute, never the ideal bound", () => {
    expect(clearlyBetter(98, 100, true)).toBe(false);
    expect(clearlyBetter(97, 100, true)).toBe(true);
    expect(clearlyBetter(103, 100, false)).toBe(true);
    const [s] = standingsOf([
      row("kvroute", 100, 1000),
      row("a", 99, 1100),
      row("b", 50, 900),
      row("ideal-bound", 10, 5000),
    ]);
    expect(s?.betterTtft.map((r) => r.policy)).toEqual(["b"]);
    expect(s?.betterThroughput.map((r) => r.policy)).toEqual(["a"]);
  });
});
