// Pool-level cache hit rate over time, in fixed time buckets, for the dashboard's chart.
// Kept on the server (not computed in the browser from the decisions feed) because the feed
// holds only the newest 50 decisions: at a few hundred requests per second the browser would
// see a sample, and a freshly opened page would have no history at all.

export interface HitRatePoint {
  /** Start of the bucket, epoch ms. */
  t: number;
  requests: number;
  /** Requests routed on a prefix or speculative hit. */
  hits: number;
  promptBytes: number;
  cachedBytes: number;
}

export class HitRateSeries {
  /** pool → buckets, oldest first. */
  readonly #pools = new Map<string, HitRatePoint[]>();

  constructor(
    readonly bucketMs = 5_000,
    readonly buckets = 120,
  ) {}

  add(pool: string, atMs: number, promptBytes: number, cachedBytes: number, hit: boolean): void {
    const t = atMs - (atMs % this.bucketMs);
    let points = this.#pools.get(pool);
    if (points === undefined) {
      points = [];
      this.#pools.set(pool, points);
    }
    // A report stamped before the newest bucket (clock step back) counts in the newest one
    // rather than reordering history.
    let last = points[points.length - 1];
    if (last === undefined || last.t < t) {
      last = { t, requests: 0, hits: 0, promptBytes: 0, cachedBytes: 0 };
      points.push(last);
    }
    last.requests++;
    if (hit) last.hits++;
    last.promptBytes += promptBytes;
    last.cachedBytes += cachedBytes;
    this.#trim(points, atMs);
  }

  /** Buckets inside the window ending now, per pool; pools without traffic in it are left out. */
  snapshot(nowMs: number): { bucketMs: number; windowMs: number; pools: Record<string, HitRatePoint[]> } {
    const pools: Record<string, HitRatePoint[]> = {};
    for (const [pool, points] of this.#pools) {
      this.#trim(points, nowMs);
      if (points.length > 0) pools[pool] = points.map((p) => ({ ...p }));
    }
    return { bucketMs: this.bucketMs, windowMs: this.bucketMs * this.buckets, pools };
  }

  #trim(points: HitRatePoint[], nowMs: number): void {
    const oldest = nowMs - this.bucketMs * this.buckets;
    let drop = 0;
    while (drop < points.length && (points[drop] as HitRatePoint).t < oldest) drop++;
    if (drop > 0) points.splice(0, drop);
  }
}
