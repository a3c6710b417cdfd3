// Runs one (workload, rate, policy) on a fresh simulated cluster in virtual time. Arrivals are
// submitted when their time comes (so closed-loop turns and the ideal bound see requests in
// arrival order) and the clock advances in ticks; at every tick the policy may take a metrics
// snapshot, so routers that scrape see loads as stale as their scrape interval. A policy with a
// clock of its own (kvroute's gateways and control plane) also stops the clock whenever it has
// something due, and hears each request's first token, at the engines' virtual times.
import type { LoraSettings } from "../../control-plane/sim/engine.ts";
import type { LatencyModel } from "../../control-plane/sim/latency.ts";
import { createSimCluster, type SimRequestResult } from "../../control-plane/sim/virtual-cluster.ts";
import { type RunMetrics, summarize } from "./metrics.ts";
import type { PolicyContext, PolicyFactory, RoutingPolicy } from "./policies/types.ts";
import type { Arrival, BenchRequest, WorkloadRun } from "./workloads/types.ts";

export interface ClusterConfig {
  workers: number;
  ranksPerWorker: number;
  blockSize: number;
  /** KV capacity per rank in blocks. */
  numGpuBlocks: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  /** vLLM's DP coordinator stats period (its balancer's staleness). */
  statsIntervalMs: number;
  kvEventDelayMs: number;
  tickMs: number;
  /** Safety stop: a run that has not drained by then is reported as such. */
  maxVirtualMs: number;
  /** LoRA serving on every rank (the LoRA bench); absent: off. */
  lora?: LoraSettings;
  /** The engines' step-cost model (latency.ts LATENCY_PROFILES); absent: the H100-derived one. */
  latency?: LatencyModel;
}

export interface RunOutput {
  metrics: RunMetrics;
  /** Every finished request, in completion order (for analyses beyond the summary). */
  results: SimRequestResult[];
  unfinished: number;
  virtualMs: number;
  /** The policy's own counts (RoutingPolicy.counters), empty when it keeps none. */
  counters: Record<string, number>;
}

/** Pending arrivals kept sorted by time (follow-ups are inserted as they are generated). */
class ArrivalQueue {
  readonly #items: Arrival[] = [];

  push(a: Arrival): void {
    let lo = 0;
    let hi = this.#items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#items[mid] as Arrival).atMs <= a.atMs) lo = mid + 1;
      else hi = mid;
    }
    this.#items.splice(lo, 0, a);
  }

  /** Removes and returns the arrivals due by `tMs`, in time order. */
  takeUntil(tMs: number): Arrival[] {
    let n = 0;
    while (n < this.#items.length && (this.#items[n] as Arrival).atMs <= tMs) n++;
    return this.#items.splice(0, n);
  }

  get size(): number {
    return this.#items.length;
  }
}

export function runOne(
  run: WorkloadRun,
  factory: PolicyFactory,
  cfg: ClusterConfig,
  seed: number,
  outputVocab: readonly number[],
): RunOutput {
  const ranks = cfg.workers * cfg.ranksPerWorker;
  const requests = new Map<string, BenchRequest>();
  const results: SimRequestResult[] = [];
  const queue = new ArrivalQueue();
  for (const a of run.arrivals) queue.push(a);
  let policy: RoutingPolicy | undefined;
  /** First arrival of each request a router's queue held, so its wait counts in TTFT and E2E. */
  const firstArrival = new Map<string, number>();
  const cluster = createSimCluster({
    dataParallelSize: ranks,
    numGpuBlocks: cfg.numGpuBlocks,
    blockSize: cfg.blockSize,
    maxNumSeqs: cfg.maxNumSeqs,
    maxNumBatchedTokens: cfg.maxNumBatchedTokens,
    seed,
    outputVocab,
    balancerRule: "legacy",
    statsIntervalMs: cfg.statsIntervalMs,
    lora: cfg.lora ?? null,
    latency: cfg.latency,
    onKvEvents: (rank, events, at) => policy?.kvEvents?.(rank, events, at),
    onFirstToken: (id, rank, at) => policy?.firstToken?.(id, rank, at),
    onRequestDone: (submitted) => {
      const arrived = firstArrival.get(submitted.id);
      const held = arrived === undefined ? 0 : submitted.arrivalMs - arrived;
      const result =
        held === 0
          ? submitted
          : {
              ...submitted,
              arrivalMs: arrived as number,
              ttftMs: submitted.ttftMs + held,
              e2eMs: submitted.e2eMs + held,
            };
      results.push(result);
      const request = requests.get(result.id) as BenchRequest;
      policy?.done?.(result, request);
      const next = run.followUp?.(request, result.outputTokenIds, result.finishMs);
      if (next) queue.push(next);
    },
  });
  let chooser: RoutingPolicy["choose"];
  const submit = (request: BenchRequest, atMs: number) =>
    cluster.submit(
      {
        id: request.id,
        tokens: policy?.submitTokens?.(request) ?? request.tokens,
        maxTokens: request.maxTokens,
        loraName: request.lora ?? null,
        rank:
          chooser === undefined
            ? undefined
            : (view) => (chooser as NonNullable<typeof chooser>)(view, request),
      },
      atMs,
    );
  const ctx: PolicyContext = {
    cluster,
    ranks,
    blockSize: cfg.blockSize,
    seed,
    kvEventDelayMs: cfg.kvEventDelayMs,
    release(request) {
      if (!firstArrival.has(request.id)) throw new Error(`${request.id} was not held`);
      submit(request, cluster.nowMs);
    },
  };
  policy = factory.create(ctx);
  const p = policy;
  const choose = p.choose?.bind(p);
  chooser =
    choose === undefined
      ? undefined
      : (view, request) => {
          const rank = choose(view, request);
          if (rank === null && !firstArrival.has(request.id)) firstArrival.set(request.id, view.nowMs);
          return rank;
        };
  let submitted = 0;
  let t = 0;
  let counters: Record<string, number> = {};
  p.tick?.(0, cluster.loads());
  try {
    while (queue.size > 0 || results.length < submitted) {
      if (t > cfg.maxVirtualMs) break;
      for (const a of queue.takeUntil(t + cfg.tickMs)) {
        requests.set(a.request.id, a.request);
        submit(a.request, Math.max(a.atMs, t));
        submitted++;
      }
      // The next tick, or earlier when the policy's own clock has something due.
      const due = p.nextEventMs?.() ?? Number.POSITIVE_INFINITY;
      t = due > t && due < t + cfg.tickMs ? due : t + cfg.tickMs;
      cluster.advanceTo(t);
      p.tick?.(t, cluster.loads());
    }
    counters = p.counters?.() ?? {};
  } finally {
    p.close?.();
  }
  const metrics = summarize(
    results,
    ranks,
    (id) => (requests.get(id) as BenchRequest).tokens.length,
    p.extraCachedTokens === undefined
      ? undefined
      : (id) => p.extraCachedTokens?.(requests.get(id) as BenchRequest) ?? 0,
  );
  return { metrics, results, unfinished: submitted - results.length + queue.size, virtualMs: t, counters };
}
