import { describe, expect, it } from "vitest";
import {
  comparePaired,
  isSaturated,
  PAIRED_LEVEL,
  SATURATION_FACTOR,
  wilcoxonSignedRank,
} from "../../bench/quality/paired.ts";

describe("exact Wilcoxon signed-rank test", () => {
  it.each([
    // differences, W+, exact two-sided p (scipy.stats.wilcoxon, method="exact", agrees)
    [[1, 2, 3, 4, 5, 6, 7, 8], 36, 2 / 256],
    [[-1, -2, -3, -4, -5, -6, -7, -8], 0, 2 / 256],
    [[1, 2, 3, 4, 5, 6], 21, 2 / 64],
    [[1, 2, 3, 4, 5], 15, 2 / 32],
    // W+ = 28 of 36: 25 of the 256 sign patterns give W+ ≤ 8
    [[1, 2, 3, 4, 5, 6, 7, -8], 28, (2 * 25) / 256],
    [[1, -2], 1, 1],
  ])("%j → W+ %d, p %f", (d, wPlus, p) => {
    const t = wilcoxonSignedRank(d);
    expect(t.wPlus).toBe(wPlus);
    expect(t.p).toBeCloseTo(p, 12);
  });

  it("drops zero differences and gives tied magnitudes their mid-rank", () => {
    const t = wilcoxonSignedRank([0, 0, 5, 5, 5, 5, 5, 5, 5, -5]);
    expect(t.n).toBe(8);
    // all |d| tied: ranks 4.5 each; W+ = 7 · 4.5; P(W+ ≥ 31.5) = P(at most one negative) = 9/256
    expect(t.wPlus).toBe(31.5);
    expect(t.p).toBeCloseTo((2 * 9) / 256, 12);
  });

  it("has nothing to say without non-zero differences", () => {
    expect(wilcoxonSignedRank([0, 0, 0]).p).toBe(1);
  });
});

describe("paired decision at the stated level", () => {
  const peer = [100, 110, 120, 130, 140, 150, 160, 170];

  it("leads when lower in every seed, with the median paired difference as effect size", () => {
    const c = comparePaired(
      peer.map((v) => v - 10),
      peer,
    );
    expect(c.verdict).toBe("leads");
    expect(c.medianDiffMs).toBe(-10);
    expect(c.medianDiffShare).toBeCloseTo(-10 / 135, 2);
    expect(c.test.p).toBeLessThan(PAIRED_LEVEL);
  });

  it("trails when higher in every seed", () => {
    expect(
      comparePaired(
        peer.map((v) => v + 1),
        peer,
      ).verdict,
    ).toBe("trails");
  });

  it("ties when 7 of 8 seeds agree but the eighth is the largest difference the other way", () => {
    const c = comparePaired([99, 108, 117, 126, 135, 144, 153, 250], peer);
    expect(c.lower).toBe(7);
    expect(c.verdict).toBe("ties");
  });

  it("rejects samples of different lengths", () => {
    expect(() => comparePaired([1, 2], [1])).toThrow(RangeError);
  });
});

describe("saturated points", () => {
  it("every router far above the unloaded floor", () => {
    expect(isSaturated([SATURATION_FACTOR * 50 + 1, 2000], 50)).toBe(true);
    expect(isSaturated([SATURATION_FACTOR * 50, 2000], 50)).toBe(false);
    expect(isSaturated([], 50)).toBe(false);
    expect(isSaturated([900], Number.NaN)).toBe(false);
  });
});
