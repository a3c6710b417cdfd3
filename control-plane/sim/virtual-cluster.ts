// The virtual-time simulator: N engines (DP ranks) driven by an event queue instead of
// timers, so thousands of requests run in seconds with no sleeping. It runs the same Engine
// (scheduler, latency model, paged prefix cache, KV events) as the HTTP server.
//
// A router in the loop: give `submit` a rank, or a function that is called at the request's
// arrival time with the cluster's state (per-rank load, time) and returns the rank — so the
// router sees exactly what it would have seen then. Without a rank, vLLM's own DP balancer
// picks, from stats refreshed every `statsIntervalMs` of virtual time.

import { type BalancerRule, VllmDpBalancer } from "./balancer.ts";
import { type BlockExtraKeys, type BlockHash, BlockHasher, noneHash } from "./block-hash.ts";
import type { CachedBlockInfo } from "./block-pool.ts";
import {
  Engine,
  type EngineLoad,
  type EngineRequest,
  type LoraSettings,
  type ScheduledStep,
} from "./engine.ts";
import { EventHeap } from "./heap.ts";
import type { KvEvent } from "./kv-events.ts";
import type { LatencyModel } from "./latency.ts";

export interface SimClusterOptions {
  dataParallelSize: number;
  numGpuBlocks: number;
  blockSize?: number;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  maxModelLen?: number;
  latency?: LatencyModel;
  seed?: number;
  /** Token ids to sample output from; defaults to ids 1000..30999. */
  outputVocab?: readonly number[];
  /** vLLM's balancer for requests without a rank. */
  balancerRule?: BalancerRule;
  /** How stale the balancer's stats are: the DP coordinator's publish interval (0 = always fresh). */
  statsIntervalMs?: number;
  /** Observes every KV event batch as an engine would publish it, stamped with virtual time. */
  onKvEvents?: (rank: number, events: KvEvent[], virtualTimeMs: number) => void;
  /** Observes each request's first output token (the first streamed byte a client sees). */
  onFirstToken?: (id: string, rank: number, virtualTimeMs: number) => void;
  /** Observes each finished request. */
  onRequestDone?: (result: SimRequestResult) => void;
  /** LoRA serving on every rank (engine.ts); absent: adapters are neither limited nor loaded. */
  lora?: LoraSettings | null;
}

export interface ClusterView {
  nowMs: number;
  loads: EngineLoad[];
  /** The cached-prefix length (tokens) this request would find on each rank right now. */
  cachedPrefixTokens(rank: number): number;
}

/** A rank, or null when the router holds the request in a queue of its own (Dynamo's router
 * queue): no engine gets it, and the caller submits it again when the router lets it go. */
export type RankChooser = (view: ClusterView, request: SimRequest) => number | null;

export interface SimRequest {
  id?: string;
  tokens: readonly number[];
  maxTokens: number;
  loraName?: string | null;
  cacheSalt?: string | null;
  /** A fixed rank, a router called at arrival, or undefined for vLLM's balancer. */
  rank?: number | RankChooser;
}

export interface SimRequestResult {
  id: string;
  rank: number;
  arrivalMs: number;
  firstTokenMs: number;
  finishMs: number;
  ttftMs: number;
  e2eMs: number;
  promptTokens: number;
  cachedTokens: number;
  outputTokens: number;
  preemptions: number;
  outputTokenIds: number[];
}

type SimEvent =
  | { kind: "arrival"; timeMs: number; priority: 0; request: SimRequest; id: string }
  | { kind: "step"; timeMs: number; priority: 1; rank: number; step: ScheduledStep }
  | { kind: "kick"; timeMs: number; priority: 2; rank: number }
  | { kind: "stats"; timeMs: number; priority: 3 };

export class SimCluster {
  readonly engines: Engine[];
  private readonly heap = new EventHeap<SimEvent>();
  private now = 0;
  private readonly balancer: VllmDpBalancer;
  private readonly statsIntervalMs: number;
  private statsScheduled = false;
  private readonly kickPending: boolean[];
  private readonly done: SimRequestResult[] = [];
  private nextId = 0;
  private readonly opts: SimClusterOptions;

  constructor(opts: SimClusterOptions) {
    if (!Number.isInteger(opts.dataParallelSize) || opts.dataParallelSize < 1) {
      throw new RangeError("dataParallelSize must be a positive integer");
    }
    this.opts = opts;
    const seed = opts.seed ?? 0;
    const vocab = opts.outputVocab ?? Array.from({ length: 30000 }, (_, i) => 1000 + i);
    const root = noneHash(seed);
    this.engines = Array.from(
      { length: opts.dataParallelSize },
      (_, rank) =>
        new Engine({
          rank,
          blockSize: opts.blockSize ?? 16,
          numGpuBlocks: opts.numGpuBlocks,
          maxNumSeqs: opts.maxNumSeqs ?? 256,
          maxNumBatchedTokens: opts.maxNumBatchedTokens ?? 8192,
          maxModelLen: opts.maxModelLen,
          latency: opts.latency,
          seed,
          outputVocab: vocab,
          hashRoot: root,
          lora: opts.lora ?? null,
        }),
    );
    this.kickPending = new Array(opts.dataParallelSize).fill(false);
    this.balancer = new VllmDpBalancer(opts.dataParallelSize, opts.balancerRule ?? "current");
    this.statsIntervalMs = opts.statsIntervalMs ?? 100;
  }

  get nowMs(): number {
    return this.now;
  }

  /** Exact per-rank load now (what a router with perfect information sees). */
  loads(): EngineLoad[] {
    return this.engines.map((e) => e.load());
  }

  /** Queues a request arriving at `atMs` (default: now). Returns its id. */
  submit(request: SimRequest, atMs: number = this.now): string {
    if (atMs < this.now) throw new RangeError(`cannot submit in the past (${atMs} < ${this.now})`);
    if (typeof request.rank === "number") this.checkRank(request.rank);
    const id = request.id ?? `req-${this.nextId++}`;
    this.heap.push({ kind: "arrival", timeMs: atMs, priority: 0, request, id });
    this.ensureStats(atMs);
    return id;
  }

  /** Runs every event up to and including `tMs`, then sets the clock to `tMs`. */
  advanceTo(tMs: number): void {
    for (let ev = this.heap.peek(); ev !== undefined && ev.timeMs <= tMs; ev = this.heap.peek()) {
      this.heap.pop();
      this.now = ev.timeMs;
      this.handle(ev);
    }
    if (tMs > this.now) this.now = tMs;
  }

  /** Runs until no event is left; returns the results of all requests finished so far. */
  runUntilIdle(): SimRequestResult[] {
    for (let ev = this.heap.pop(); ev !== undefined; ev = this.heap.pop()) {
      this.now = ev.timeMs;
      this.handle(ev);
    }
    return this.results();
  }

  results(): SimRequestResult[] {
    return this.done.slice();
  }

  /** The cached blocks of one rank (hash → parent and token ids). */
  cachedContents(rank: number): Map<BlockHash, CachedBlockInfo> {
    this.checkRank(rank);
    return (this.engines[rank] as Engine).pool.cachedContents();
  }

  /** vLLM's /reset_prefix_cache on one rank; false while requests hold blocks. */
  resetPrefixCache(rank: number): boolean {
    this.checkRank(rank);
    const engine = this.engines[rank] as Engine;
    const ok = engine.resetPrefixCache();
    const events = engine.drainEvents();
    if (events.length > 0) this.opts.onKvEvents?.(rank, events, this.now);
    return ok;
  }

  private view(): ClusterView {
    return {
      nowMs: this.now,
      loads: this.loads(),
      cachedPrefixTokens: (rank: number) => this.cachedPrefixTokensOf(rank),
    };
  }

  private pendingTokens: readonly number[] = [];
  private pendingKeys: BlockExtraKeys = {};
  private pendingHashes: BlockHash[] | null = null;

  private cachedPrefixTokensOf(rank: number): number {
    this.checkRank(rank);
    const engine = this.engines[rank] as Engine;
    // All ranks share block size and hash root: hash the pending prompt once per arrival.
    if (this.pendingHashes === null) {
      const hasher = new BlockHasher(engine.config.blockSize, engine.config.hashRoot, this.pendingKeys);
      hasher.update(this.pendingTokens, this.pendingTokens.length);
      this.pendingHashes = hasher.hashes;
    }
    return engine.probeCachedHashes(this.pendingHashes, this.pendingTokens.length);
  }

  private handle(ev: SimEvent): void {
    switch (ev.kind) {
      case "arrival": {
        const req = ev.request;
        let rank: number;
        this.pendingHashes = null;
        if (typeof req.rank === "function") {
          this.pendingTokens = req.tokens;
          this.pendingKeys = { loraName: req.loraName, cacheSalt: req.cacheSalt };
          this.pendingHashes = null;
          const chosen = req.rank(this.view(), req);
          if (chosen === null) {
            this.pendingHashes = null;
            break;
          }
          rank = chosen;
          this.checkRank(rank);
          this.balancer.routed(rank);
        } else if (typeof req.rank === "number") {
          rank = req.rank;
          this.balancer.routed(rank);
        } else rank = this.balancer.pick();
        const engine = this.engines[rank] as Engine;
        engine.add(
          {
            id: ev.id,
            promptTokens: req.tokens,
            maxTokens: req.maxTokens,
            loraName: req.loraName,
            cacheSalt: req.cacheSalt,
            promptBlockHashes: this.pendingHashes ?? undefined,
          },
          this.now,
        );
        this.pendingHashes = null;
        this.kick(rank);
        break;
      }
      case "step": {
        const engine = this.engines[ev.rank] as Engine;
        const result = engine.complete(ev.step, this.now);
        if (result.events.length > 0) this.opts.onKvEvents?.(ev.rank, result.events, this.now);
        for (const out of result.outputs) {
          if (out.first) this.opts.onFirstToken?.(out.request.spec.id, ev.rank, this.now);
          if (out.finished) this.finish(ev.rank, out.request);
        }
        this.startStep(ev.rank);
        break;
      }
      case "kick":
        this.kickPending[ev.rank] = false;
        this.startStep(ev.rank);
        break;
      case "stats":
        this.statsScheduled = false;
        this.balancer.updateStats(this.loads());
        if (this.heap.size > 0 || this.engines.some((e) => e.hasWork())) this.ensureStats(this.now);
        break;
    }
  }

  private ensureStats(fromMs: number): void {
    if (this.statsScheduled) return;
    if (this.statsIntervalMs <= 0) return;
    const next = (Math.floor(fromMs / this.statsIntervalMs) + 1) * this.statsIntervalMs;
    this.statsScheduled = true;
    this.heap.push({ kind: "stats", timeMs: next, priority: 3 });
  }

  private kick(rank: number): void {
    if (this.statsIntervalMs <= 0) this.balancer.updateStats(this.loads());
    const engine = this.engines[rank] as Engine;
    if (engine.busy || this.kickPending[rank]) return;
    // Deferred to after all arrivals at this instant, so simultaneous requests share a step.
    this.kickPending[rank] = true;
    this.heap.push({ kind: "kick", timeMs: this.now, priority: 2, rank });
  }

  private startStep(rank: number): void {
    const engine = this.engines[rank] as Engine;
    if (engine.busy) return;
    const step = engine.schedule();
    if (step) this.heap.push({ kind: "step", timeMs: this.now + step.durationMs, priority: 1, rank, step });
    const events = step ? [] : engine.drainEvents();
    if (events.length > 0) this.opts.onKvEvents?.(rank, events, this.now);
  }

  private finish(rank: number, req: EngineRequest): void {
    this.balancer.finished(rank);
    if (this.statsIntervalMs <= 0) this.balancer.updateStats(this.loads());
    const result: SimRequestResult = {
      id: req.spec.id,
      rank,
      arrivalMs: req.arrivalMs,
      firstTokenMs: req.firstTokenMs,
      finishMs: req.finishMs,
      ttftMs: req.firstTokenMs - req.arrivalMs,
      e2eMs: req.finishMs - req.arrivalMs,
      promptTokens: req.numPromptTokens,
      cachedTokens: req.cachedTokens,
      outputTokens: req.outputTokens,
      preemptions: req.preemptions,
      outputTokenIds: req.tokens.slice(req.numPromptTokens),
    };
    this.done.push(result);
    this.opts.onRequestDone?.(result);
  }

  private checkRank(rank: number): void {
    if (!Number.isInteger(rank) || rank < 0 || rank >= this.engines.length) {
      throw new RangeError(`rank ${rank} is out of range [0, ${this.engines.length})`);
    }
  }
}

export function createSimCluster(opts: SimClusterOptions): SimCluster {
  return new SimCluster(opts);
}
