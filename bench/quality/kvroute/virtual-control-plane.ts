// kvroute's control plane for the quality bench, assembled from the service's own parts but run on
// the virtual clock instead of sockets and timers (what control-plane/src/app.ts wires to HTTP,
// ZMQ and setInterval):
// - KV events: every batch an engine publishes is encoded in vLLM's wire form and, after
//   `kvEventDelayMs`, read by the rank's subscriber state machine (RankIngest: frames → sequence
//   checks → batch decoder) into the prefix index — the path a ZMQ message takes;
// - load: every `load.scrapeIntervalMs` each worker's /metrics page is rendered by the simulator,
//   parsed by the scraper's parser and folded in by the fleet model, as a scrape does;
// - publication: the service's Publisher on its 5 ms period (speculative and gateway expiry,
//   changed images into the sync log);
// - the gateways' calls: GET /v1/sync (a long poll: parked until the log moves or `longPollMs`
//   passes) and POST /v1/report (decoded and applied as the service does), served as the hosts'
//   in-process control-plane cluster, each way `latencyMs` late.
import type { Engine } from "../../../control-plane/sim/engine.ts";
import { encodeEventBatch, type KvEvent as SimKvEvent } from "../../../control-plane/sim/kv-events.ts";
import { renderMetrics } from "../../../control-plane/sim/metrics.ts";
import { parseConfig } from "../../../control-plane/src/config/load-config.ts";
import type { Config, PoolConfig } from "../../../control-plane/src/config/schema.ts";
import { RankIngest } from "../../../control-plane/src/events/rank-ingest.ts";
import { newRankStats, type RankStats, ThrottledLog } from "../../../control-plane/src/events/stats.ts";
import { coreChunkHasher } from "../../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../../control-plane/src/index/prefix-index.ts";
import { parseEngineMetrics } from "../../../control-plane/src/load/engine-metrics.ts";
import { Fleet } from "../../../control-plane/src/model/fleet.ts";
import { LoadModel } from "../../../control-plane/src/model/slot-load.ts";
import { type Slot, SlotTable } from "../../../control-plane/src/model/slot-table.ts";
import { loadPoolTokens, type PoolTokens } from "../../../control-plane/src/pools/pool-tokens.ts";
import { encodeCfgImage } from "../../../control-plane/src/publish/images.ts";
import { Publisher } from "../../../control-plane/src/publish/publisher.ts";
import { applyReport } from "../../../control-plane/src/reports/apply-report.ts";
import { decodeReport, ReportDecodeError } from "../../../control-plane/src/reports/report-codec.ts";
import { syncAnswer } from "../../../control-plane/src/sync/sync-handler.ts";
import { SyncLog } from "../../../control-plane/src/sync/sync-log.ts";
import type { ClusterHandler, InProcessAnswer, InProcessCall } from "../../../host/core.ts";
import { MODEL, QWEN3_DIR } from "../tokens.ts";
import type { VirtualTimers } from "./virtual-timers.ts";

export interface VirtualControlPlaneOptions {
  workers: number;
  ranksPerWorker: number;
  /** Engine publish → read by the subscriber (ms of virtual time). */
  kvEventDelayMs: number;
  /** One way, gateway ↔ control plane and control plane ↔ engine /metrics (ms of virtual time). */
  latencyMs: number;
  /** Merged into the config's `routing` (weights, temperature…). */
  routing?: Record<string, unknown>;
  /** The config's `load` section (scrapeIntervalMs…). */
  load?: Record<string, unknown>;
  /** False: the filter writes no speculative routes (kvr.cfg carries a TTL of 0). */
  speculative: boolean;
  /** Merged into the pool's configuration (shedding…). */
  pool?: Record<string, unknown>;
}

/** The service's default publication period (ControlPlaneOptions.publishIntervalMs). */
const PUBLISH_INTERVAL_MS = 5;
const MAX_SLOTS = 64;
/** Fixed, so a run is repeatable (the service draws one per start). */
const EPOCH = 0x6b76_726f_7574_6531n;
const TOPIC = "kv";
let poolTokens: PoolTokens | undefined;

export function benchConfig(o: VirtualControlPlaneOptions): Config {
  const cfg = parseConfig(
    {
      pools: [
        {
          name: "qwen3",
          models: [MODEL],
          tokenizer: QWEN3_DIR,
          engine: "vllm",
          // One API server per worker serving its local ranks (vLLM hybrid LB, REFERENCE §1.2).
          dpMode: "hybrid",
          blockSize: 16,
          endpoints: Array.from({ length: o.workers }, (_, w) => ({
            address: workerAddress(w),
            ranks: Array.from({ length: o.ranksPerWorker }, (_, i) => w * o.ranksPerWorker + i),
            startRank: w * o.ranksPerWorker,
          })),
          ...o.pool,
        },
      ],
      routing: o.routing ?? {},
      load: o.load ?? {},
    },
    "quality bench",
    {},
  );
  // The schema's floor is 100 ms; the filter reads 0 as "no speculative routes" (a bench knob).
  if (!o.speculative) cfg.cache.speculativeTtlMs = 0;
  return cfg;
}

export function workerAddress(worker: number): string {
  return `10.0.0.${worker + 1}:8000`;
}

interface ParkedPoll {
  query: URLSearchParams;
  respond: (a: InProcessAnswer) => void;
  gaveUpMs: number;
}

export class VirtualControlPlane {
  readonly cfg: Config;
  readonly slots = new SlotTable(MAX_SLOTS);
  readonly load: LoadModel;
  readonly index: PrefixIndex;
  readonly log = new SyncLog();
  /** Sim rank → slot (ids come from the slot table, not assumed). */
  readonly slotOfRank: Slot[] = [];
  readonly #fleet: Fleet;
  readonly #publisher: Publisher;
  readonly #ingest = new Map<number, RankIngest>();
  readonly #ingestStats: RankStats[] = [];
  readonly #seq = new Map<number, number>();
  #parked: ParkedPoll[] = [];
  readonly #pool: PoolConfig;
  /** Counters for the run's notes. */
  readonly stats = { reports: 0, badReports: 0, polls: 0 };

  /** KV-event batches the subscribers applied, and messages or events they dropped. */
  get kvEventTotals(): { batches: number; dropped: number } {
    let batches = 0;
    let dropped = 0;
    for (const s of this.#ingestStats) {
      batches += s.batches;
      for (const n of Object.values(s.dropped)) dropped += n ?? 0;
    }
    return { batches, dropped };
  }

  constructor(
    readonly o: VirtualControlPlaneOptions,
    private readonly timers: VirtualTimers,
    /** Envoy's and the control plane's wall clock: virtual time plus a fixed offset. */
    private readonly clock: () => number,
    private readonly engines: readonly Engine[],
  ) {
    this.cfg = benchConfig(o);
    const pool = this.cfg.pools[0];
    if (pool === undefined) throw new Error("no pool");
    this.#pool = pool;
    poolTokens ??= loadPoolTokens(pool);
    const tokens = poolTokens;
    const detokenize = tokens.detokenize;
    if (detokenize === null || tokens.segmentTemplate === null)
      throw new Error(`Qwen3 tokenizer unusable for kvroute: ${tokens.problems.join("; ")}`);
    this.load = new LoadModel(this.cfg.load.unhealthyAfter);
    this.index = new PrefixIndex({
      buckets: this.cfg.cache.buckets,
      ways: this.cfg.cache.ways,
      fullWays: this.cfg.cache.fullWays,
      fullKeep: this.cfg.cache.fullKeep,
      maxSlots: MAX_SLOTS,
      now: clock,
    });
    const hasher = coreChunkHasher(this.cfg.routing.chunkSize);
    const silent = { warn: () => {} } as unknown as ConstructorParameters<typeof ThrottledLog>[0];
    this.#fleet = new Fleet(
      this.slots,
      this.load,
      {
        slotsAdded: (added) => {
          for (const s of added) {
            this.slotOfRank[s.globalRank] = s;
            // As the control plane registers them (app.ts): with the pool's token-bytes table,
            // so KV batches take the core's fast path, as they do in production.
            this.index.addSlot({
              slotKey: s.key,
              slotId: s.id,
              model: MODEL,
              hasher,
              detokenize,
              tokenTable: tokens.tokenTable,
            });
            const stats = newRankStats(s.key, s.globalRank, "virtual", "connect", null);
            this.#ingestStats.push(stats);
            this.#ingest.set(
              s.globalRank,
              new RankIngest({
                slotKey: s.key,
                rank: s.globalRank,
                topic: TOPIC,
                sink: this.index,
                stats,
                log: new ThrottledLog(silent, 60_000, clock),
                replay: null,
                maxPending: 1000,
                now: clock,
              }),
            );
          }
        },
        slotsRemoved: () => {},
      },
      clock,
    );
    this.#fleet.setEndpoints(pool, pool.endpoints);
    this.#publisher = new Publisher({
      log: this.log,
      index: this.index,
      slots: this.slots,
      load: this.load,
      poolIndex: (name) => this.cfg.pools.findIndex((p) => p.name === name),
      adapterId: (name, adapter) =>
        this.cfg.pools.find((p) => p.name === name)?.adapters.indexOf(adapter) ?? -1,
    });
    this.#publisher.start(
      encodeCfgImage(this.cfg, this.index.slotWords, new Map([[pool.name, tokens.rendering]])),
      clock(),
    );
    const now = timers.now;
    timers.every(now, PUBLISH_INTERVAL_MS, () => {
      this.publish();
      return true;
    });
    timers.every(now, this.cfg.load.scrapeIntervalMs, () => {
      this.scrape();
      return true;
    });
  }

  /** An engine published a batch at `atMs` (virtual); its subscriber reads it `kvEventDelayMs` later. */
  kvEvents(rank: number, events: SimKvEvent[], atMs: number): void {
    const seq = this.#seq.get(rank) ?? 0;
    this.#seq.set(rank, seq + 1);
    const seqFrame = Buffer.alloc(8);
    seqFrame.writeBigUInt64BE(BigInt(seq));
    const frames = [Buffer.from(TOPIC), seqFrame, encodeEventBatch(atMs / 1000, events, rank, "map")];
    this.timers.at(atMs + this.o.kvEventDelayMs, () => this.#ingest.get(rank)?.onFrames(frames));
  }

  /** Changed images into the sync log; parked polls hear about it. */
  publish(): void {
    const before = this.log.version;
    this.#publisher.publish(this.clock());
    if (this.log.version === before || this.#parked.length === 0) return;
    const parked = this.#parked;
    this.#parked = [];
    for (const p of parked) this.#answerPoll(p.query, p.respond, false);
  }

  /** One scrape round: every worker's /metrics as the simulator renders it, read `latencyMs` later. */
  scrape(): void {
    const targets = this.#fleet.scrapeTargets();
    for (const [w, endpoint] of this.#pool.endpoints.entries()) {
      const target = targets.find((t) => t.key.endsWith(`/${endpoint.address}`));
      if (target === undefined) continue;
      const ranks = this.engines.slice(w * this.o.ranksPerWorker, (w + 1) * this.o.ranksPerWorker);
      const text = renderMetrics(MODEL, ranks);
      this.timers.after(this.o.latencyMs, () =>
        this.#fleet.onScrape(target, { ok: true, metrics: parseEngineMetrics(text) }),
      );
    }
  }

  /** The hosts' control-plane cluster: requests reach us, and answers them, `latencyMs` late. */
  readonly handler: ClusterHandler = (call, respond) => {
    const late = (a: InProcessAnswer) => this.timers.after(this.o.latencyMs, () => respond(a));
    this.timers.after(this.o.latencyMs, () => this.#serve(call, late));
  };

  #serve(call: InProcessCall, respond: (a: InProcessAnswer) => void): void {
    const header = (name: string) => call.headers.find(([k]) => k === name)?.[1] ?? "";
    const url = new URL(header(":path"), "http://control-plane");
    const route = `${header(":method")} ${url.pathname}`;
    if (route === "GET /v1/sync") {
      this.stats.polls++;
      this.#answerPoll(url.searchParams, respond, true, call.timeoutMs);
    } else if (route === "POST /v1/report") {
      this.stats.reports++;
      try {
        applyReport(this, decodeReport(call.body), this.clock());
        respond(reply(204, new Uint8Array(0)));
      } catch (err) {
        if (!(err instanceof ReportDecodeError)) throw err;
        this.stats.badReports++;
        respond(reply(400, Buffer.from(err.message)));
      }
    } else respond(reply(404, new Uint8Array(0)));
  }

  #answerPoll(
    query: URLSearchParams,
    respond: (a: InProcessAnswer) => void,
    mayWait: boolean,
    timeoutMs = 0,
  ): void {
    const opts = { log: this.log, epoch: EPOCH, pageBytes: this.cfg.sync.snapshotPageBytes };
    const answer = syncAnswer(opts, query, mayWait);
    if (answer === null) {
      respond(reply(400, new Uint8Array(0)));
      return;
    }
    if (!answer.wait) {
      respond(reply(200, answer.body));
      return;
    }
    // A long poll: the log moving answers it (publish()); otherwise the service's wait ends it
    // with an empty page — unless the gateway's own call timeout comes first (Envoy's 504).
    const wait = this.cfg.sync.longPollMs;
    const parked: ParkedPoll = { query, respond, gaveUpMs: this.timers.now + wait };
    this.#parked.push(parked);
    const limit = timeoutMs > 0 && timeoutMs < wait ? timeoutMs : wait;
    this.timers.after(limit, () => {
      const i = this.#parked.indexOf(parked);
      if (i < 0) return;
      this.#parked.splice(i, 1);
      if (limit < wait) respond(reply(504, Buffer.from("upstream request timeout")));
      else this.#answerPoll(query, respond, false);
    });
  }
}

function reply(status: number, body: Uint8Array): InProcessAnswer {
  return { headers: [[":status", String(status)]], body, trailers: [] };
}
