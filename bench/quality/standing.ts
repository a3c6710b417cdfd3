// kvroute's standing at each point (cost profile, workload, rate): against every peer, on TTFT p90
// and p99, decided per seed by the paired test of paired.ts; saturated points (every router far
// above the unloaded floor) are set apart instead of being called ties; and how many requests the
// filter did not route there (must be 0 or explained).
import { comparePaired, isSaturated, type PairedComparison } from "./paired.ts";
import { BOUND, type Point, SUBJECT } from "./points.ts";

export type PairedMetric = "ttftP90" | "ttftP99";
export const PAIRED_METRICS: readonly PairedMetric[] = ["ttftP90", "ttftP99"];

export interface PeerComparison {
  peer: Point;
  byMetric: Record<PairedMetric, PairedComparison>;
}

export interface PairedStanding {
  profile: string;
  workload: string;
  qps: number;
  subject: Point;
  peers: PeerComparison[];
  /** Every router's median TTFT p90 is above SATURATION_FACTOR × the ideal bound's. */
  saturated: boolean;
  /** The ideal bound's median TTFT p90 (the unloaded floor), NaN without a bound row. */
  floorP90: number;
  /** Σ over seeds of the requests kvroute's filter did not route (harness round robin, fail-open,
   * fail-closed, rejected). */
  unrouted: number;
}

/** `a` against `b` on one metric, paired by seed (seeds either lacks are left out). */
export function pairedOn(a: Point, b: Point, m: PairedMetric): PairedComparison {
  const bySeed = new Map(b.runs.map((r) => [r.seed, r.metrics[m]]));
  const runs = a.runs.filter((r) => bySeed.has(r.seed));
  return comparePaired(
    runs.map((r) => r.metrics[m]),
    runs.map((r) => bySeed.get(r.seed) as number),
  );
}

export function unroutedOf(p: Point): number {
  let n = 0;
  for (const r of p.runs) for (const v of Object.values(r.counters ?? {})) n += v;
  return n;
}

/** `points` may span profiles and workloads; one standing per (profile, workload, rate). */
export function pairedStandings(points: readonly Point[]): PairedStanding[] {
  const out: PairedStanding[] = [];
  for (const subject of points.filter((p) => p.policy === SUBJECT)) {
    const here = points.filter(
      (p) => p.profile === subject.profile && p.workload === subject.workload && p.qps === subject.qps,
    );
    const bound = here.find((p) => p.policy === BOUND);
    const routers = here.filter((p) => p.policy !== BOUND);
    const floorP90 = bound?.ttftP90.median ?? Number.NaN;
    const peers = routers
      .filter((p) => p !== subject)
      .map((peer) => {
        const byMetric = {} as Record<PairedMetric, PairedComparison>;
        for (const m of PAIRED_METRICS) byMetric[m] = pairedOn(subject, peer, m);
        return { peer, byMetric };
      });
    out.push({
      profile: subject.profile,
      workload: subject.workload,
      qps: subject.qps,
      subject,
      peers,
      saturated: isSaturated(
        routers.map((p) => p.ttftP90.median),
        floorP90,
      ),
      floorP90,
      unrouted: unroutedOf(subject),
    });
  }
  return out;
}

/** Whether the point `p` is on (its profile, workload and rate) is saturated in `standings`. */
export function saturatedAt(standings: readonly PairedStanding[], p: Point): boolean {
  return standings.some(
    (s) => s.saturated && s.profile === p.profile && s.workload === p.workload && s.qps === p.qps,
  );
}

/** Peers kvroute trails on either TTFT metric at a non-saturated point. */
export function trailingPeers(s: PairedStanding): Point[] {
  if (s.saturated) return [];
  return s.peers
    .filter((c) => PAIRED_METRICS.some((m) => c.byMetric[m].verdict === "trails"))
    .map((c) => c.peer);
}
