import { describe, expect, it } from "vitest";
import {
  backlogOf,
  imbalance,
  inSystemAt,
  medianInterval,
  percentile,
  separatedBetter,
  summarize,
} from "../../bench/quality/metrics.ts";
import { pointsOf, type ResultRow, throughputRegime } from "../../bench/quality/report.ts";
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

describe("95% interval for the median over seeds", () => {
  it.each([
    // n, coverage of [min, max]
    [3, 0.75],
    [5, 0.9375],
    [6, 0.96875],
  ])("%d seeds: [min, max] covers the median with probability %d", (n, coverage) => {
    const iv = medianInterval(Array.from({ length: n }, (_, i) => i));
    expect(iv.lo).toBe(0);
    expect(iv.hi).toBe(n - 1);
    expect(iv.coverage).toBeCloseTo(coverage, 12);
  });

  it("narrows to inner order statistics once they still reach 95% (10 seeds: x(2)..x(9), 97.9%)", () => {
    const iv = medianInterval([10, 1, 9, 2, 8, 3, 7, 4, 6, 5]);
    expect(iv.median).toBe(5.5);
    expect([iv.lo, iv.hi]).toEqual([2, 9]);
    expect(iv.coverage).toBeCloseTo(1 - 2 * (11 / 1024), 12);
  });

  it("is NaN for no values or a NaN value (a bound has no throughput)", () => {
    expect(medianInterval([]).median).toBeNaN();
    expect(medianInterval([1, Number.NaN, 3]).lo).toBeNaN();
    expect(medianInterval([7]).median).toBe(7);
  });
});

describe("separation rule", () => {
  const iv = (lo: number, hi: number) => ({ median: (lo + hi) / 2, lo, hi, coverage: 0.97, n: 6 });
  it.each([
    [iv(10, 20), iv(21, 30), true, true], // a entirely below b: better when lower is better
    [iv(10, 20), iv(20, 30), true, false], // touching intervals overlap: tied
    [iv(10, 25), iv(21, 30), true, false], // overlap: tied
    [iv(21, 30), iv(10, 20), false, true], // higher is better (throughput)
    [iv(21, 30), iv(10, 21), false, false],
  ])("%j vs %j (lower better %s) → %s", (a, b, lower, want) => {
    expect(separatedBetter(a, b, lower)).toBe(want);
  });

  it("a single seed has no interval and never separates", () => {
    const one = (v: number) => medianInterval([v]);
    expect(separatedBetter(one(10), one(20), true)).toBe(false);
    expect(separatedBetter(iv(10, 11), { ...iv(20, 21), n: 1 }, true)).toBe(false);
  });
});

describe("backlog (is the cluster or the arrivals setting the pace?)", () => {
  const r = (arrival: number, finish: number): SimRequestResult => ({
    id: `${arrival}`,
    rank: 0,
    arrivalMs: arrival,
    firstTokenMs: arrival + 1,
    finishMs: finish,
    ttftMs: 1,
    e2eMs: finish - arrival,
    promptTokens: 1,
    cachedTokens: 0,
    outputTokens: 1,
    preemptions: 0,
    outputTokenIds: [],
  });
  const steady = Array.from({ length: 1000 }, (_, i) => r(i * 10, i * 10 + 100)); // keeps up
  const growing = Array.from({ length: 1000 }, (_, i) => r(i * 10, 100 + i * 20)); // serves at half the rate

  it("counts requests in the system", () => {
    expect(inSystemAt(steady, 5000)).toBe(10);
    expect(inSystemAt(growing, 5000)).toBe(255); // 501 arrived, 246 finished
  });

  it("a steady system is not saturated; a growing backlog is", () => {
    expect(backlogOf(steady)).toEqual({ growth: 1, saturated: false });
    const g = backlogOf(growing);
    expect(g.saturated).toBe(true);
    expect(g.growth).toBeCloseTo(455 / 255, 9); // at 8991 ms: 900 arrived, 445 finished
  });

  it("a run shorter than 4x an early request's E2E is not judged", () => {
    const short = Array.from({ length: 100 }, (_, i) => r(i * 10, i * 10 + 400)); // span 990 < 4 · 400
    const b = backlogOf(short);
    expect(b.growth).toBeNaN();
    expect(b.saturated).toBe(false);
  });
});

describe("throughput regime over seeds", () => {
  const run = (
    policy: string,
    seed: number,
    ttftP90: number,
    tput: number,
    saturated = false,
  ): ResultRow => ({
    profile: "p",
    workload: "w",
    qps: 1,
    policy,
    seed,
    unfinished: 0,
    wallS: 0,
    metrics: {
      ...summarize([], 1, () => 0),
      ttftP90,
      ttftP99: ttftP90 * 2,
      outputTokPerS: tput,
      hitRate: 0.5,
      saturated,
      backlogGrowth: saturated ? 3 : 1,
    },
  });
  const seeds = [1, 2, 3, 4, 5, 6];
  const rows = (policy: string, ttft: number[], tput: number[], saturated = false) =>
    seeds.map((s, i) => run(policy, s, ttft[i] as number, tput[i] as number, saturated));

  it("no throughput ranking while arrival-bound; ranked once a router's backlog grows", () => {
    const calm = pointsOf([
      ...rows("kvroute", [10, 10, 10, 10, 10, 10], [100, 101, 102, 103, 104, 105]),
      ...rows("a", [10, 10, 10, 10, 10, 10], [200, 201, 202, 203, 204, 205]),
    ]);
    expect(throughputRegime(calm)).toBe("arrival-bound");
    const busy = pointsOf([
      ...rows("kvroute", [10, 10, 10, 10, 10, 10], [100, 101, 102, 103, 104, 105], true),
      ...rows("a", [10, 10, 10, 10, 10, 10], [200, 201, 202, 203, 204, 205]),
    ]);
    expect(throughputRegime(busy)).toBe("saturated");
  });

  it("cannot tell saturation from runs that never filled", () => {
    const short = pointsOf(
      rows("kvroute", [10, 10, 10, 10, 10, 10], [1, 1, 1, 1, 1, 1]).map((r) => ({
        ...r,
        metrics: { ...r.metrics, backlogGrowth: Number.NaN },
      })),
    );
    expect(throughputRegime(short)).toBe("too short");
  });
});
