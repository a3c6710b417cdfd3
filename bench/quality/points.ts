// The quality bench's rows and points: one run (ResultRow) and one (profile, workload, rate,
// policy) over its seeds (Point), with medians and distribution-free intervals.
import { medianInterval, type RunMetrics, type SeedInterval } from "./metrics.ts";

export interface ResultRow {
  /** The engines' cost model (latency.ts LATENCY_PROFILES). */
  profile: string;
  workload: string;
  qps: number;
  policy: string;
  /** The seed of this run (workload content, arrivals, tie breaks). */
  seed: number;
  metrics: RunMetrics;
  unfinished: number;
  /** Wall-clock seconds this run took (not a result; shows the bench's own cost). */
  wallS: number;
  /** The policy's own counts (kvroute: requests the filter did not route; Dynamo: queued). */
  counters?: Record<string, number>;
}

export const BOUND = "ideal-bound";
export const SUBJECT = "kvroute";

/** One (profile, workload, rate, policy) over its seeds: medians with 95% intervals. */
export interface Point {
  profile: string;
  workload: string;
  qps: number;
  policy: string;
  runs: ResultRow[];
  ttftP50: SeedInterval;
  ttftP90: SeedInterval;
  ttftP99: SeedInterval;
  e2eP50: SeedInterval;
  e2eP90: SeedInterval;
  hitRate: SeedInterval;
  outputTokPerS: SeedInterval;
  /** Seeds in which the backlog grew (the cluster, not the arrivals, set the pace). */
  saturatedSeeds: number;
  /** Seeds whose run was long enough to judge (backlogGrowth not NaN). */
  judgedSeeds: number;
  unfinished: number;
}

/** Groups per-seed rows into points, in first-seen order. */
export function pointsOf(rows: readonly ResultRow[]): Point[] {
  const groups = new Map<string, ResultRow[]>();
  for (const r of rows) {
    const key = `${r.profile}\u0000${r.workload}\u0000${r.qps}\u0000${r.policy}`;
    const g = groups.get(key);
    if (g === undefined) groups.set(key, [r]);
    else g.push(r);
  }
  return [...groups.values()].map((runs) => {
    const first = runs[0] as ResultRow;
    const of = (pick: (m: RunMetrics) => number) => medianInterval(runs.map((r) => pick(r.metrics)));
    return {
      profile: first.profile,
      workload: first.workload,
      qps: first.qps,
      policy: first.policy,
      runs,
      ttftP50: of((m) => m.ttftP50),
      ttftP90: of((m) => m.ttftP90),
      ttftP99: of((m) => m.ttftP99),
      e2eP50: of((m) => m.e2eP50),
      e2eP90: of((m) => m.e2eP90),
      hitRate: of((m) => m.hitRate),
      outputTokPerS: of((m) => m.outputTokPerS),
      saturatedSeeds: runs.filter((r) => r.metrics.saturated).length,
      judgedSeeds: runs.filter((r) => !Number.isNaN(r.metrics.backlogGrowth)).length,
      unfinished: runs.reduce((n, r) => n + r.unfinished, 0),
    };
  });
}
