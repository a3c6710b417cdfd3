// One routing policy under test. The harness turns `choose` into the simulator's RankChooser
// (called at the request's arrival in virtual time with the cluster's state then); a policy
// without `choose` leaves the rank to the simulator's model of vLLM's own DP balancer.
import type { EngineLoad } from "../../../control-plane/sim/engine.ts";
import type { KvEvent } from "../../../control-plane/sim/kv-events.ts";
import type {
  ClusterView,
  SimCluster,
  SimRequestResult,
} from "../../../control-plane/sim/virtual-cluster.ts";
import type { RunMetrics } from "../metrics.ts";
import type { BenchRequest } from "../workloads/types.ts";

export interface PolicyContext {
  cluster: SimCluster;
  ranks: number;
  blockSize: number;
  seed: number;
  /** How late KV events reach an event-driven router (ms of virtual time). */
  kvEventDelayMs: number;
  /** Submits a request `choose` held (returned null for) again, now: a router's own queue lets
   * it go. Its TTFT and E2E still count from its first arrival. */
  release(request: BenchRequest): void;
}

export interface RoutingPolicy {
  /** A rank, or null to hold the request in the router's own queue until it calls ctx.release. */
  choose?(view: ClusterView, request: BenchRequest): number | null;
  /** The token ids to submit (the ideal bound shortens prompts); default: the request's. */
  submitTokens?(request: BenchRequest): readonly number[];
  /** Every harness tick (virtual time), with the exact loads then: metric scrapes happen here. */
  tick?(nowMs: number, loads: readonly EngineLoad[]): void;
  kvEvents?(rank: number, events: KvEvent[], atMs: number): void;
  /** A request's first output token, at its virtual time (the first byte its client sees). */
  firstToken?(id: string, rank: number, atMs: number): void;
  done?(result: SimRequestResult, request: BenchRequest): void;
  /** A policy with its own virtual clock (kvroute's gateways): when it next needs the harness to
   * stop, so what it reads of the engines (a scrape) is their state at that time. */
  nextEventMs?(): number;
  /** The run is over: release what the policy holds (hosts, VMs). */
  close?(): void;
  /** Prompt tokens counted as cache hits beyond what the simulator reports (the ideal bound). */
  extraCachedTokens?(request: BenchRequest): number;
  /** Counts the run's row records (kvroute: requests the filter did not route; Dynamo: requests
   * its queue held), read once when the run ends. */
  counters?(): Record<string, number>;
  /** A bound, not a router (the ideal bound): its metrics replace the run's, given the run's. */
  bound?(run: RunMetrics): RunMetrics;
}

export interface PolicyFactory {
  name: string;
  /** One line for the report: the rule, its constants and where they come from. */
  describe: string;
  create(ctx: PolicyContext): RoutingPolicy;
}

/** A snapshot of per-rank loads refreshed every `intervalMs` of virtual time: what a router
 * that scrapes metrics sees (stale by up to one interval). */
export class StaleLoads {
  #loads: readonly EngineLoad[] = [];
  #takenMs = Number.NEGATIVE_INFINITY;

  constructor(readonly intervalMs: number) {}

  tick(nowMs: number, loads: readonly EngineLoad[]): void {
    if (nowMs - this.#takenMs < this.intervalMs) return;
    this.#loads = loads;
    this.#takenMs = nowMs;
  }

  get loads(): readonly EngineLoad[] {
    return this.#loads;
  }
}
