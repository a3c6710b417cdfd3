// vLLM's internal data-parallel balancer (DPLBAsyncMPClient), used when a request carries no
// rank header. The API server sees per-engine (waiting, running, kv usage) from the DP
// coordinator, refreshed about every 100 ms; between refreshes it adds each routed request to
// its local copy of the chosen engine's waiting count, so bursts still spread.
// Two generations of the rule:
// - "legacy" (vLLM ≤ ~0.11, the rule most deployments know): lowest `4*waiting + running`,
//   scanning from the client's fixed start index, first minimum wins;
// - "current" (newer vLLM): score = max(clientCount * this client's in-flight count,
//   waiting + running), plus `waiting * 6 * max(0, kvUsage - 0.5)` when anything waits; the
//   scan start rotates after every pick so ties do not favour one engine.

export type BalancerRule = "current" | "legacy";

export interface EngineStats {
  waiting: number;
  running: number;
  kvUsage: number;
}

export class VllmDpBalancer {
  private counts: EngineStats[];
  private readonly inflight: number[];
  private startIndex: number;

  constructor(
    private readonly numEngines: number,
    readonly rule: BalancerRule = "current",
    private readonly clientCount = 1,
    clientIndex = 0,
  ) {
    this.counts = Array.from({ length: numEngines }, () => ({ waiting: 0, running: 0, kvUsage: 0 }));
    this.inflight = new Array(numEngines).fill(0);
    this.startIndex = Math.floor((numEngines * clientIndex) / clientCount);
  }

  /** A coordinator snapshot replaces the local counts (and erases the local increments). */
  updateStats(stats: readonly EngineStats[]): void {
    this.counts = stats.map((s) => ({ waiting: s.waiting, running: s.running, kvUsage: s.kvUsage }));
  }

  pick(): number {
    const n = this.numEngines;
    let best = 0;
    let min = Number.POSITIVE_INFINITY;
    for (let i = 0; i < n; i++) {
      const idx = (this.startIndex + i) % n;
      const c = this.counts[idx] as EngineStats;
      let score: number;
      if (this.rule === "legacy") score = 4 * c.waiting + c.running;
      else {
        score = Math.max(this.clientCount * (this.inflight[idx] as number), c.waiting + c.running);
        if (c.waiting) score += c.waiting * 6 * Math.max(0, c.kvUsage - 0.5);
      }
      if (score < min) {
        min = score;
        best = idx;
      }
    }
    (this.counts[best] as EngineStats).waiting += this.clientCount;
    if (this.rule === "current") this.startIndex = (this.startIndex + 1) % n;
    this.routed(best);
    return best;
  }

  /** Counts a request sent to `engine`, whether picked here or pinned by a rank header. */
  routed(engine: number): void {
    this.inflight[engine] = (this.inflight[engine] as number) + 1;
  }

  /** A request this client sent to `engine` has finished. */
  finished(engine: number): void {
    this.inflight[engine] = Math.max(0, (this.inflight[engine] as number) - 1);
  }
}
