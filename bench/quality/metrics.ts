// Summary statistics of one run: latency percentiles, throughput, cache hit rate and how evenly
// the ranks were used. Pure functions over the simulator's per-request results.
import type { SimRequestResult } from "../../control-plane/sim/virtual-cluster.ts";

/** Percentile by linear interpolation between closest ranks (numpy's default); NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  if (p <= 0) return sorted[0] as number;
  if (p >= 100) return sorted[sorted.length - 1] as number;
  const at = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  const a = sorted[lo] as number;
  return a + ((sorted[hi] as number) - a) * (at - lo);
}

/** max / mean of the values (1 = perfectly even); NaN when the mean is 0. */
export function imbalance(values: readonly number[]): number {
  const mean = values.reduce((s, v) => s + v, 0) / values.length;
  return mean === 0 ? Number.NaN : Math.max(...values) / mean;
}

export interface RunMetrics {
  requests: number;
  ttftP50: number;
  ttftP90: number;
  ttftP99: number;
  e2eP50: number;
  e2eP90: number;
  /** Output tokens per second of virtual time, first arrival → last finish. */
  outputTokPerS: number;
  /** Cached prompt tokens / prompt tokens. */
  hitRate: number;
  requestsPerRank: number[];
  /** max/mean of requests per rank. */
  requestImbalance: number;
  /** max/mean of prompt tokens each rank had to compute (uncached prefill work). */
  prefillImbalance: number;
  preemptions: number;
  /** Requests in the system (arrived, not finished) at 90% of the arrival window over those at
   * 50%: about 1 when the cluster keeps up with arrivals, growing when a backlog builds. NaN when
   * the window is shorter than 4× the unqueued E2E (the run never filled; nothing to judge). */
  backlogGrowth: number;
  /** The backlog grew (N(90%) ≥ 1.5 · N(50%) + 8): the cluster, not the arrivals, set the pace. */
  saturated: boolean;
}

/** Requests arrived by `t` and not finished by then. */
export function inSystemAt(results: readonly SimRequestResult[], t: number): number {
  let n = 0;
  for (const r of results) if (r.arrivalMs <= t && r.finishMs > t) n++;
  return n;
}

/**
 * Backlog at 90% vs 50% of the arrival window; saturated when it grew by half plus 8 requests.
 * Judged only when the window is at least 4× the median E2E of the requests that arrived in its
 * first 10% (before any queue could build): a shorter run is still filling at its midpoint.
 */
export function backlogOf(results: readonly SimRequestResult[]): { growth: number; saturated: boolean } {
  if (results.length === 0) return { growth: Number.NaN, saturated: false };
  let first = Number.POSITIVE_INFINITY;
  let last = 0;
  for (const r of results) {
    first = Math.min(first, r.arrivalMs);
    last = Math.max(last, r.arrivalMs);
  }
  const span = last - first;
  const early = results
    .filter((r) => r.arrivalMs <= first + 0.1 * span)
    .map((r) => r.e2eMs)
    .sort((a, b) => a - b);
  if (span < 4 * percentile(early, 50)) return { growth: Number.NaN, saturated: false };
  const mid = inSystemAt(results, first + 0.5 * span);
  const late = inSystemAt(results, first + 0.9 * span);
  return { growth: late / Math.max(1, mid), saturated: late >= 1.5 * mid + 8 };
}

/** `extraCached(id)`: prompt tokens counted as hits beyond the simulator's (the ideal bound). */
export function summarize(
  results: readonly SimRequestResult[],
  ranks: number,
  promptTokensOf: (id: string) => number,
  extraCached: (id: string) => number = () => 0,
): RunMetrics {
  const byTtft = results.map((r) => r.ttftMs).sort((a, b) => a - b);
  const byE2e = results.map((r) => r.e2eMs).sort((a, b) => a - b);
  const perRank = new Array<number>(ranks).fill(0);
  const prefill = new Array<number>(ranks).fill(0);
  let prompt = 0;
  let cached = 0;
  let output = 0;
  let preemptions = 0;
  let start = Number.POSITIVE_INFINITY;
  let end = 0;
  for (const r of results) {
    const full = promptTokensOf(r.id);
    const hit = r.cachedTokens + extraCached(r.id);
    perRank[r.rank] = (perRank[r.rank] as number) + 1;
    prefill[r.rank] = (prefill[r.rank] as number) + (full - hit);
    prompt += full;
    cached += hit;
    output += r.outputTokens;
    preemptions += r.preemptions;
    start = Math.min(start, r.arrivalMs);
    end = Math.max(end, r.finishMs);
  }
  const backlog = backlogOf(results);
  return {
    requests: results.length,
    ttftP50: percentile(byTtft, 50),
    ttftP90: percentile(byTtft, 90),
    ttftP99: percentile(byTtft, 99),
    e2eP50: percentile(byE2e, 50),
    e2eP90: percentile(byE2e, 90),
    outputTokPerS: end > start ? (output * 1000) / (end - start) : 0,
    hitRate: prompt === 0 ? 0 : cached / prompt,
    requestsPerRank: perRank,
    requestImbalance: imbalance(perRank),
    prefillImbalance: imbalance(prefill),
    preemptions,
    backlogGrowth: backlog.growth,
    saturated: backlog.saturated,
  };
}

/** P(Binomial(n, 1/2) ≤ k). */
function binomialHalfCdf(n: number, k: number): number {
  let term = 0.5 ** n;
  let sum = 0;
  for (let i = 0; i <= k; i++) {
    sum += term;
    term = (term * (n - i)) / (i + 1);
  }
  return sum;
}

export interface SeedInterval {
  median: number;
  lo: number;
  hi: number;
  /** The probability that [lo, hi] holds the population median (distribution-free). */
  coverage: number;
  n: number;
}

/**
 * Median of per-seed values and a distribution-free confidence interval for the median: the
 * order statistics [x(k), x(n+1−k)] with the largest k whose coverage 1 − 2·P(Bin(n, ½) ≤ k−1)
 * reaches `level`. Six seeds reach 95% with [min, max] (96.9%); five give at most 93.8%, which
 * the coverage field then says. NaN values (a bound's throughput) give NaN.
 */
export function medianInterval(values: readonly number[], level = 0.95): SeedInterval {
  const xs = [...values].sort((a, b) => a - b);
  const n = xs.length;
  if (n === 0 || xs.some(Number.isNaN))
    return { median: Number.NaN, lo: Number.NaN, hi: Number.NaN, coverage: 0, n };
  const median = percentile(xs, 50);
  let k = 1;
  while (k + 1 <= n + 1 - (k + 1) && 1 - 2 * binomialHalfCdf(n, k) >= level) k++;
  return {
    median,
    lo: xs[k - 1] as number,
    hi: xs[n - k] as number,
    coverage: 1 - 2 * binomialHalfCdf(n, k - 1),
    n,
  };
}

/** `a` is better than `b` only when their intervals do not overlap (a single seed has no
 * interval, so it never separates). */
export function separatedBetter(a: SeedInterval, b: SeedInterval, lowerIsBetter: boolean): boolean {
  if (Number.isNaN(a.lo) || Number.isNaN(b.lo) || a.n < 2 || b.n < 2) return false;
  return lowerIsBetter ? a.hi < b.lo : a.lo > b.hi;
}
