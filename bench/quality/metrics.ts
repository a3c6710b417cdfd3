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
  };
}
