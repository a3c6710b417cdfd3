// Paired comparison of kvroute with one peer at one point: every router sees the same arrivals
// for a seed, so the evidence is the per-seed difference, not two overlapping ranges. The test
// is the exact two-sided Wilcoxon signed-rank test (zero differences dropped, tied |d| given
// their mid-rank, the null distribution enumerated exactly over all 2ⁿ sign patterns), at
// PAIRED_LEVEL. Hand-written because it is a dozen lines over a small dynamic programme and the
// npm statistics packages give only the normal approximation, which is wrong at n = 8.
// The effect size is the median paired difference, in ms and as a share of the peer's value.

/** Two-sided significance level of the leads / trails decisions. */
export const PAIRED_LEVEL = 0.05;

export interface SignedRankTest {
  /** Pairs with a non-zero difference. */
  n: number;
  /** Sum of the ranks of the positive differences. */
  wPlus: number;
  /** Exact two-sided p-value (1 when n = 0). */
  p: number;
}

/** Mid-ranks (1-based) of `values`; equal values share the mean of the ranks they span. */
function midRanks(values: readonly number[]): number[] {
  const order = values.map((v, i) => ({ v, i })).sort((a, b) => a.v - b.v);
  const ranks = new Array<number>(values.length);
  for (let start = 0; start < order.length; ) {
    let end = start;
    while (
      end + 1 < order.length &&
      (order[end + 1] as { v: number }).v === (order[start] as { v: number }).v
    )
      end++;
    const rank = (start + end + 2) / 2;
    for (let k = start; k <= end; k++) ranks[(order[k] as { i: number }).i] = rank;
    start = end + 1;
  }
  return ranks;
}

export function wilcoxonSignedRank(differences: readonly number[]): SignedRankTest {
  const d = differences.filter((x) => x !== 0 && !Number.isNaN(x));
  const n = d.length;
  if (n === 0) return { n, wPlus: 0, p: 1 };
  // Doubled mid-ranks are integers, so the distribution of 2·W+ is a count over integer sums.
  const ranks2 = midRanks(d.map(Math.abs)).map((r) => Math.round(r * 2));
  const wPlus2 = ranks2.reduce((s, r, i) => s + ((d[i] as number) > 0 ? r : 0), 0);
  const total = ranks2.reduce((s, r) => s + r, 0);
  let counts = new Array<number>(total + 1).fill(0);
  counts[0] = 1;
  for (const r of ranks2) {
    const next = counts.slice();
    for (let s = 0; s + r <= total; s++) next[s + r] = (next[s + r] as number) + (counts[s] as number);
    counts = next;
  }
  const all = 2 ** n;
  let below = 0;
  let above = 0;
  counts.forEach((c, s) => {
    if (s <= wPlus2) below += c;
    if (s >= wPlus2) above += c;
  });
  return { n, wPlus: wPlus2 / 2, p: Math.min(1, (2 * Math.min(below, above)) / all) };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0
    ? Number.NaN
    : s.length % 2 === 1
      ? (s[m] as number)
      : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

export type PairedVerdict = "leads" | "ties" | "trails";

export interface PairedComparison {
  verdict: PairedVerdict;
  /** Median over seeds of subject − peer (ms; negative: the subject is faster). */
  medianDiffMs: number;
  /** Median over seeds of (subject − peer) / peer. */
  medianDiffShare: number;
  test: SignedRankTest;
  /** Seeds compared, and those where the subject was lower / higher. */
  pairs: number;
  lower: number;
  higher: number;
}

/** Lower is better. `subject[i]` and `peer[i]` come from the same seed. */
export function comparePaired(subject: readonly number[], peer: readonly number[]): PairedComparison {
  if (subject.length !== peer.length) throw new RangeError("paired samples differ in length");
  const diffs = subject.map((s, i) => s - (peer[i] as number));
  const test = wilcoxonSignedRank(diffs);
  const medianDiffMs = median(diffs);
  const verdict: PairedVerdict = test.p >= PAIRED_LEVEL ? "ties" : medianDiffMs < 0 ? "leads" : "trails";
  return {
    verdict,
    medianDiffMs,
    medianDiffShare: median(diffs.map((x, i) => x / (peer[i] as number))),
    test,
    pairs: diffs.length,
    lower: diffs.filter((x) => x < 0).length,
    higher: diffs.filter((x) => x > 0).length,
  };
}

/** A point is saturated when every router's median TTFT p90 is above this multiple of the
 * unloaded floor (the ideal bound: each request alone on an idle rank with the best hit any
 * router could get): queueing, not routing, sets TTFT there. */
export const SATURATION_FACTOR = 10;

export function isSaturated(routerMedians: readonly number[], unloadedFloor: number): boolean {
  return (
    routerMedians.length > 0 &&
    Number.isFinite(unloadedFloor) &&
    routerMedians.every((m) => m > SATURATION_FACTOR * unloadedFloor)
  );
}
