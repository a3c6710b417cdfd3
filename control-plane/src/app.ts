// The control plane, assembled: sources (discovery, KV events, /metrics scrapes, gateway
// reports) → model (slot table, prefix index, load) → publication (shared-data images in the
// sync log, the HTTP API). Data flows one way; only this file knows all the parts.
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { KubeConfig } from "@kubernetes/client-node";
import { type Logger, pino } from "pino";
import { dashboardRoutes } from "./api/dashboard/routes.ts";
import { createHttpServer, type HttpServer, type Routes, sendJson } from "./api/http-server.ts";
import { outcomeName } from "./api/outcomes.ts";
import { buildMetrics } from "./api/prometheus.ts";
import { registerConfigMetrics } from "./api/prometheus-config.ts";
import { registerEppMetrics } from "./api/prometheus-epp.ts";
import { registerEmbeddedFilterMetrics } from "./api/prometheus-epp-filter.ts";
import { registerHttpMetrics } from "./api/prometheus-http.ts";
import { registerReplicaMetrics } from "./api/prometheus-replicas.ts";
import { ReportStats } from "./api/report-stats.ts";
import { buildStatus, type StatusInput } from "./api/status.ts";
import { loadConfigFile } from "./config/load-config.ts";
import { type ReloadResult, ReloadStats } from "./config/reload-stats.ts";
import type { Config, PoolConfig } from "./config/schema.ts";
import { type ConfigFileWatch, watchConfigFile } from "./config/watch-config-file.ts";
import { type ReloadParts, reloadConfig } from "./config-reload.ts";
import { AdapterDiscovery } from "./discovery/adapter-discovery.ts";
import { discoveryFor } from "./discovery/discovery.ts";
import type { Discovery } from "./discovery/source.ts";
import type { Epp } from "./epp/server.ts";
import { subscriptionFor } from "./events/endpoints.ts";
import { EventsSupervisor } from "./events/index.ts";
import { applyRelayedBatch } from "./events/relayed-batch.ts";
import { coreChunkHasher } from "./index/core-hasher.ts";
import { PrefixIndex } from "./index/prefix-index.ts";
import { MetricsScraper } from "./load/scraper.ts";
import { AdapterCatalog } from "./model/adapter-catalog.ts";
import { Fleet } from "./model/fleet.ts";
import { SessionTable } from "./model/session-table.ts";
import { LoadModel } from "./model/slot-load.ts";
import { type Slot, SlotTable } from "./model/slot-table.ts";
import { loadPoolTokens, type PoolTokens } from "./pools/pool-tokens.ts";
import { encodeCfgImage } from "./publish/images.ts";
import { Publisher } from "./publish/publisher.ts";
import { PoolSharding } from "./replicas/pool-sharding.ts";
import { ReplicaExchange } from "./replicas/replica-exchange.ts";
import { applyReport as applyReportTo } from "./reports/apply-report.ts";
import { RecentDecisions } from "./reports/recent-decisions.ts";
import type { Report } from "./reports/report-codec.ts";
import { createReportHandler } from "./reports/report-handler.ts";
import { GatewayRegistry } from "./sync/gateways.ts";
import { createSyncHandler } from "./sync/sync-handler.ts";
import { SyncLog } from "./sync/sync-log.ts";
import { traceFilterDecisions } from "./tracing/filter-decisions.ts";
import { tracedRoute } from "./tracing/http-route.ts";
import { tracedEventSink } from "./tracing/kv-batches.ts";
import { tracingStarted } from "./tracing/sdk.ts";

export interface ControlPlaneOptions {
  logger?: Logger;
  /** Overrides cfg.listen (tests use 127.0.0.1:0). */
  listen?: string;
  /** How often changed images are published (ms). */
  publishIntervalMs?: number;
  /** Slot table size: fixes the bitmap width of bucket images. */
  maxSlots?: number;
  /** Where endpoints come from; by default what the configuration asks for (discovery/discovery.ts). */
  discovery?: Discovery;
  /** Overrides cfg.epp.listen (tests use 127.0.0.1:0). */
  eppListen?: string;
  /**
   * The file cfg was read from: watched, and reloaded when it changes (what can change live is
   * applied, config-reload.ts). Unset: only reloadConfig() reloads.
   */
  configFile?: string;
  /** The cluster the picker watches `epp.resources` in (tests); default in-cluster / kubeconfig. */
  eppKubeConfig?: KubeConfig;
}

export interface ControlPlane {
  url: string;
  epoch: bigint;
  readonly log: SyncLog;
  readonly index: PrefixIndex;
  readonly slots: SlotTable;
  readonly load: LoadModel;
  readonly fleet: Fleet;
  /** The fleet's session → slot table, learned from reports (model/session-table.ts). */
  readonly sessions: SessionTable;
  /** Each pool's LoRA adapters, configured and discovered (model/adapter-catalog.ts). */
  readonly adapters: AdapterCatalog;
  /** The GAIE endpoint picker, when the configuration has `epp` (epp/part.ts). */
  readonly epp: Epp | null;
  /** Report sharing with peer replicas over NATS, when the configuration has `nats` (replicas/). */
  readonly replicas: ReplicaExchange | null;
  /** Pools sharded over the replicas, when `nats.shardPools` is on (replicas/pool-sharding.ts). */
  readonly sharding: PoolSharding | null;
  /** Publishes pending changes now (tests; the timer does it otherwise). */
  publish(): void;
  /** The configuration running now (a reload may have changed its live fields). */
  config(): Config;
  /** Reloads the configuration from `load` (SIGHUP, the file watch): config-reload.ts. */
  reloadConfig(load: () => Config): ReloadResult;
  readonly reloads: ReloadStats;
  ready(): boolean;
  stop(): Promise<void>;
}

function splitHostPort(listen: string): [string, number] {
  const colon = listen.lastIndexOf(":");
  return [listen.slice(0, colon).replace(/^\[|\]$/g, ""), Number(listen.slice(colon + 1))];
}

/**
 * Starts the control plane in the order data flows: the model's parts, the sources that feed it
 * (discovery reports the first picture of every pool before anything is published), publication
 * (the sync log's first images, reports, peers), the HTTP API, then the timed parts and the EPP.
 */
export async function startControlPlane(cfg: Config, opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const logger = opts.logger ?? pino({ level: cfg.logLevel });
  const model = buildModel(cfg, opts, logger);
  const replicas = connectReplicas(cfg, model, logger);
  const sources = connectSources(cfg, model, replicas, logger);
  const discovery = opts.discovery ?? discoveryFor(cfg);
  await discovery.start((pool, endpoints) => {
    sources.fleet.setEndpoints(pool, endpoints);
    sources.scraper.setTargets(sources.fleet.scrapeTargets());
  });
  const live = { cfg };
  const publication = startPublication(live, model, sources, replicas, logger);
  const reloads = new ReloadStats();
  const { server, metrics } = createApi(live, model, sources, publication, reloads, logger);
  const address = await listen(server, opts.listen ?? cfg.listen);
  const url = `http://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}`;
  sources.scraper.start();
  publication.replicas?.start();
  publication.adapterDiscovery.start();
  const timer = setInterval(publication.publish, opts.publishIntervalMs ?? 5);
  const epp = await startEppIfConfigured(cfg, opts, address, model, publication, logger);
  if (epp !== null) {
    registerEppMetrics(metrics, epp.stats);
    registerEmbeddedFilterMetrics(metrics, epp.filter.host);
  }
  if (publication.replicas !== null) registerReplicaMetrics(metrics, publication.replicas, sources.sharding);
  logger.info(
    {
      url,
      dashboard: `${url}/dashboard`,
      epoch: model.epoch.toString(),
      pools: cfg.pools.map((p) => p.name),
    },
    "control plane listening",
  );
  const reloadParts: ReloadParts = { live, publishCfg: publication.publishCfg, logger, stats: reloads };
  // Static pools' endpoints change live like discovered ones, unless a test brought its own discovery.
  if (opts.discovery === undefined)
    reloadParts.endpointsChanged = (pool) => {
      sources.fleet.setEndpoints(pool, pool.endpoints);
      sources.scraper.setTargets(sources.fleet.scrapeTargets());
    };
  const reload = (load: () => Config) => reloadConfig(reloadParts, load);
  const configFile = opts.configFile;
  const watch: ConfigFileWatch | null =
    configFile === undefined
      ? null
      : watchConfigFile(configFile, () => reload(() => loadConfigFile(configFile)));
  return {
    url,
    epoch: model.epoch,
    log: model.log,
    index: model.index,
    slots: model.slots,
    load: model.load,
    fleet: sources.fleet,
    sessions: model.sessions,
    adapters: model.adapters,
    epp,
    replicas,
    sharding: sources.sharding,
    publish: publication.publish,
    config: () => live.cfg,
    reloadConfig: reload,
    reloads,
    ready: publication.ready,
    async stop() {
      watch?.close();
      await epp?.close();
      await replicas?.stop();
      clearInterval(timer);
      await discovery.stop();
      sources.scraper.stop();
      await publication.adapterDiscovery.stop();
      await sources.eventsSettled();
      await sources.events.stop();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/** What the control plane knows: the parts the sources feed and publication reads. */
interface Model {
  /** Random per start: gateways that synced from a previous run (or another replica) resync. */
  epoch: bigint;
  log: SyncLog;
  gateways: GatewayRegistry;
  decisions: RecentDecisions;
  slots: SlotTable;
  load: LoadModel;
  index: PrefixIndex;
  poolTokens: Map<string, PoolTokens>;
  sessions: SessionTable;
  adapters: AdapterCatalog;
}

function buildModel(cfg: Config, opts: ControlPlaneOptions, logger: Logger): Model {
  const maxSlots = opts.maxSlots ?? 256;
  return {
    epoch: randomBytes(8).readBigUInt64LE(0) | 1n,
    log: new SyncLog(),
    gateways: new GatewayRegistry(),
    decisions: new RecentDecisions(),
    slots: new SlotTable(maxSlots),
    load: new LoadModel(cfg.load.unhealthyAfter),
    index: new PrefixIndex({
      buckets: cfg.cache.buckets,
      ways: cfg.cache.ways,
      fullWays: cfg.cache.fullWays,
      fullKeep: cfg.cache.fullKeep,
      maxSlots,
      maxBlocksPerSlot: cfg.cache.maxBlocksPerSlot,
    }),
    poolTokens: loadEveryPoolTokens(cfg, logger),
    sessions: new SessionTable(cfg.routing.sessionTtlMs),
    adapters: new AdapterCatalog(cfg),
  };
}

/** Each pool's tokenizer-derived parts; what is missing or partial is logged. */
function loadEveryPoolTokens(cfg: Config, logger: Logger): Map<string, PoolTokens> {
  const poolTokens = new Map<string, PoolTokens>();
  for (const pool of cfg.pools) {
    const tokens = loadPoolTokens(pool);
    poolTokens.set(pool.name, tokens);
    for (const p of tokens.problems) logger.warn({ pool: pool.name }, p);
    for (const n of tokens.notes) logger.info({ pool: pool.name }, n);
  }
  return poolTokens;
}

/** Peer replicas over NATS (replicas/), when configured: their gateways' reports apply like ours. */
function connectReplicas(cfg: Config, model: Model, logger: Logger): ReplicaExchange | null {
  if (cfg.nats === undefined) return null;
  // Peers' gateways apply like ours; their reports are not counted in `reports` (each replica's
  // counters are its own gateways', so Prometheus sums over replicas without counting twice).
  const { epoch, slots } = model;
  return new ReplicaExchange({ nats: cfg.nats, epoch, slots, apply: reportApplier(model), logger });
}

/** A gateway's report (ours or a peer's) into the model. */
function reportApplier(model: Model): (report: Report) => void {
  const { load, slots, index, decisions, sessions } = model;
  return (report) => applyReportTo({ load, slots, index, decisions, sessions }, report, Date.now());
}

/** The sources wired to the model: KV events into the index, /metrics scrapes into the fleet. */
interface Sources {
  events: EventsSupervisor;
  /** With `nats.shardPools`: KV events of owned pools only, the others' relayed by their owners. */
  sharding: PoolSharding | null;
  fleet: Fleet;
  scraper: MetricsScraper;
  /** Resolves when the latest change of KV event subscriptions is done. */
  eventsSettled(): Promise<void>;
}

function connectSources(
  cfg: Config,
  model: Model,
  replicas: ReplicaExchange | null,
  logger: Logger,
): Sources {
  const { slots, index, poolTokens } = model;
  // A sampled share of KV-event batches is traced when this process exports traces.
  const indexSink = tracingStarted() ? tracedEventSink(index, cfg.tracing.kvEventBatchRatio) : index;
  const sharding =
    replicas === null || cfg.nats?.shardPools !== true
      ? null
      : new PoolSharding({
          exchange: replicas,
          pools: cfg.pools.map((p) => p.name),
          sink: indexSink,
          poolOf: (key) => slots.byKey(key)?.pool ?? null,
          slotsOf: (pool) =>
            slots
              .present()
              .filter((s) => s.pool === pool)
              .map((s) => s.key),
          applyBatch: (sink, key, payload) => applyRelayedBatch(sink, key, payload, Date.now()),
          changed: () => resubscribe(),
          logger,
        });
  const events = new EventsSupervisor({ sink: sharding?.sink ?? indexSink, logger });
  let eventsSync: Promise<void> = Promise.resolve();
  const resubscribe = () => {
    const specs = slots
      .present()
      .filter((s) => s.kvEvents !== null && poolTokens.get(s.pool)?.detokenize != null)
      // Sharded: the other pools' events come from their owners (replicas/kv-relay.ts).
      .filter((s) => sharding === null || sharding.owns(s.pool))
      .map((s) =>
        subscriptionFor(s.key, s.globalRank, s.address, s.kvEvents as NonNullable<Slot["kvEvents"]>),
      );
    eventsSync = eventsSync
      .then(() => events.sync(specs))
      .catch((err: unknown) => logger.error({ err }, "KV event subscriptions failed"));
  };
  const fleet = new Fleet(slots, model.load, fleetChanges(cfg, model, resubscribe, logger));
  const scraper = new MetricsScraper({
    intervalMs: cfg.load.scrapeIntervalMs,
    timeoutMs: cfg.load.scrapeTimeoutMs,
    onResult: (target, outcome) => {
      fleet.onScrape(target, outcome);
      if (!outcome.ok) logger.debug({ target: target.url, error: outcome.error }, "scrape failed");
    },
  });
  return { events, sharding, fleet, scraper, eventsSettled: () => eventsSync };
}

/** Slots the fleet adds or removes: into or out of the prefix index, then resubscribe KV events. */
function fleetChanges(cfg: Config, model: Model, resubscribe: () => void, logger: Logger) {
  const { index, poolTokens } = model;
  const hasher = coreChunkHasher(cfg.routing.chunkSize);
  return {
    slotsAdded: (added: Slot[], pool: PoolConfig) => {
      const tokens = poolTokens.get(pool.name);
      const detokenize = tokens?.detokenize;
      for (const s of added) {
        if (detokenize != null)
          index.addSlot({
            slotKey: s.key,
            slotId: s.id,
            model: pool.models[0] as string,
            hasher,
            detokenize,
            tokenTable: tokens?.tokenTable,
          });
        logger.info({ slot: s.key, id: s.id, headerRank: s.headerRank }, "slot added");
      }
      resubscribe();
    },
    slotsRemoved: (removed: Slot[]) => {
      for (const s of removed) {
        index.removeSlot(s.key);
        logger.info({ slot: s.key, id: s.id }, "slot removed");
      }
      resubscribe();
    },
  };
}

/** Publication: images into the sync log, gateway reports back into the model, peer replicas. */
interface Publication {
  publish(): void;
  /** Images are published, every rank is resolved and there is a slot to route to. */
  ready(): boolean;
  applyReport(report: Report): void;
  /** Publishes kvr.cfg from the running configuration (a reload changed it). */
  publishCfg(): void;
  adapterDiscovery: AdapterDiscovery;
  replicas: ReplicaExchange | null;
}

function startPublication(
  live: { cfg: Config },
  model: Model,
  sources: Sources,
  replicas: ReplicaExchange | null,
  logger: Logger,
): Publication {
  // Restart-only fields (pools, cache geometry, load, nats) are read from the start's configuration;
  // kvr.cfg from the running one, whose live fields a reload may change.
  const cfg = live.cfg;
  const { log, index, slots, load, sessions, adapters, poolTokens } = model;
  const { fleet } = sources;
  const renderings = new Map([...poolTokens].map(([name, t]) => [name, t.rendering]));
  const poolIndex = (name: string) => cfg.pools.findIndex((p) => p.name === name);
  const adapterId = (pool: string, name: string) => adapters.idOf(pool, name);
  const cfgImage = () => encodeCfgImage(live.cfg, index.slotWords, renderings, (p) => adapters.adapters(p));
  const publisher = new Publisher({ log, index, slots, load, poolIndex, sessions, adapterId });
  const publish = () => publisher.publish(Date.now());
  publisher.start(cfgImage(), Date.now());
  const published = true;
  const adapterDiscovery = new AdapterDiscovery({
    intervalMs: cfg.load.modelsIntervalMs,
    timeoutMs: cfg.load.scrapeTimeoutMs,
    targets: () => fleet.endpoints().map((e) => ({ pool: e.pool, base: `http://${e.address}` })),
    onCards: (pool, cards) => {
      const refusedBefore = adapters.refused.size;
      if (adapters.discovered(pool, cards)) {
        logger.info({ pool, adapters: adapters.adapters(pool) }, "LoRA adapters discovered");
        publisher.updateCfg(cfgImage());
      }
      if (adapters.refused.size > refusedBefore)
        logger.warn({ pool, refused: Object.fromEntries(adapters.refused) }, "LoRA adapters not routed");
    },
  });
  const applyReport = reportApplier(model);
  const ready = () => published && fleet.ranksResolved() && slots.present().length > 0;
  const publishCfg = () => publisher.updateCfg(cfgImage());
  return { publish, ready, applyReport, publishCfg, adapterDiscovery, replicas };
}

/** The HTTP API (sync, reports, status, dashboard, metrics, health) and its Prometheus registry. */
function createApi(
  live: { cfg: Config },
  model: Model,
  sources: Sources,
  publication: Publication,
  reloads: ReloadStats,
  logger: Logger,
) {
  const cfg = live.cfg;
  const { slots } = model;
  const reports = new ReportStats((id) => slots.get(id)?.pool ?? "unknown");
  const statusInput: StatusInput = {
    get cfg() {
      return live.cfg;
    },
    epoch: model.epoch,
    log: model.log,
    slots,
    load: model.load,
    index: model.index,
    gateways: model.gateways,
    decisions: model.decisions,
    poolTokens: model.poolTokens,
    events: sources.events,
    reports,
    replicas: publication.replicas,
    sharding: sources.sharding,
    sessions: model.sessions,
    adapters: model.adapters,
  };
  const metrics = buildMetrics(statusInput);
  const server: HttpServer = createHttpServer(
    {
      ...gatewayRoutes(cfg, model, publication, reports),
      "GET /v1/status": (_req, res) => sendJson(res, 200, buildStatus(statusInput)),
      ...dashboardRoutes(() => buildStatus(statusInput)),
      "GET /metrics": async (_req, res) => {
        const body = await metrics.metrics();
        res.writeHead(200, { "content-type": metrics.contentType }).end(body);
      },
      ...healthRoutes(model, sources, publication),
    },
    logger,
    cfg.http,
  );
  registerHttpMetrics(metrics, server.stats);
  registerConfigMetrics(metrics, reloads);
  return { server, metrics };
}

/** What gateways call: the long-poll sync and their reports (applied here and relayed to peers). */
function gatewayRoutes(cfg: Config, model: Model, publication: Publication, reports: ReportStats): Routes {
  const { applyReport, replicas } = publication;
  const names = {
    slot: (id: number) => model.slots.get(id),
    outcome: outcomeName,
  };
  return {
    "GET /v1/sync": tracedRoute(
      "kvroute.sync",
      createSyncHandler({
        log: model.log,
        epoch: model.epoch,
        gateways: model.gateways,
        authToken: cfg.authToken,
        longPollMs: cfg.sync.longPollMs,
        pageBytes: cfg.sync.snapshotPageBytes,
      }),
    ),
    "POST /v1/report": tracedRoute(
      "kvroute.report",
      reports.counting(
        createReportHandler({
          authToken: cfg.authToken,
          maxBytes: 16 << 20,
          apply: reports.observing((report, _from, body) => {
            applyReport(report);
            replicas?.relay(body);
            traceFilterDecisions(report, names);
          }),
        }),
      ),
    ),
  };
}

function healthRoutes(model: Model, sources: Sources, publication: Publication): Routes {
  const { replicas, ready } = publication;
  return {
    "GET /healthz": (_req, res) => sendJson(res, 200, { ok: true }),
    "GET /readyz": (_req, res) => {
      const ok = ready();
      sendJson(res, ok ? 200 : 503, {
        ready: ok,
        ranksResolved: sources.fleet.ranksResolved(),
        slots: model.slots.present().length,
        // A detail, not a condition: without NATS this replica still serves every gateway from
        // its own complete view (docs/operations.md "Control-plane replicas").
        ...(replicas === null
          ? {}
          : { replicas: { connected: replicas.connected, peers: replicas.peers().length } }),
      });
    },
  };
}

async function listen(server: HttpServer, listenAddress: string): Promise<AddressInfo> {
  const [host, port] = splitHostPort(listenAddress);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return server.address() as AddressInfo;
}

/** The GAIE endpoint picker, loaded only when configured: it brings the Node Proxy-Wasm host and gRPC. */
async function startEppIfConfigured(
  cfg: Config,
  opts: ControlPlaneOptions,
  address: AddressInfo,
  model: Model,
  publication: Publication,
  logger: Logger,
): Promise<Epp | null> {
  if (cfg.epp === undefined) return null;
  const { replicas, ready } = publication;
  const { startEppPart } = await import("./epp/part.ts");
  return startEppPart(
    cfg,
    { ...cfg.epp, listen: opts.eppListen ?? cfg.epp.listen },
    {
      httpHost: address.address,
      httpPort: address.port,
      epoch: model.epoch,
      ready,
      slots: model.slots,
      load: model.load,
      logger,
      ...(opts.eppKubeConfig === undefined ? {} : { kubeConfig: opts.eppKubeConfig }),
      // Peers apply this picker's reports too: each replica's picker needs its own gateway id.
      ...(replicas === null ? {} : { gatewayId: `kvroute-epp@${replicas.replicaId}` }),
    },
  );
}
