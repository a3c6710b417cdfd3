// The control plane, assembled: sources (discovery, KV events, /metrics scrapes, gateway
// reports) → model (slot table, prefix index, load) → publication (shared-data images in the
// sync log, the HTTP API). Data flows one way; only this file knows all the parts.
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { type Logger, pino } from "pino";
import { dashboardRoutes } from "./api/dashboard/routes.ts";
import { createHttpServer, type HttpServer, sendJson } from "./api/http-server.ts";
import { buildMetrics } from "./api/prometheus.ts";
import { registerEppMetrics } from "./api/prometheus-epp.ts";
import { registerHttpMetrics } from "./api/prometheus-http.ts";
import { registerReplicaMetrics } from "./api/prometheus-replicas.ts";
import { ReportStats } from "./api/report-stats.ts";
import { buildStatus } from "./api/status.ts";
import type { Config, PoolConfig } from "./config/schema.ts";
import { AdapterDiscovery } from "./discovery/adapter-discovery.ts";
import { discoveryFor } from "./discovery/discovery.ts";
import type { Discovery } from "./discovery/source.ts";
import type { Epp } from "./epp/server.ts";
import { subscriptionFor } from "./events/endpoints.ts";
import { EventsSupervisor } from "./events/index.ts";
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
import { ReplicaExchange } from "./replicas/replica-exchange.ts";
import { applyReport as applyReportTo } from "./reports/apply-report.ts";
import { RecentDecisions } from "./reports/recent-decisions.ts";
import type { Report } from "./reports/report-codec.ts";
import { createReportHandler } from "./reports/report-handler.ts";
import { GatewayRegistry } from "./sync/gateways.ts";
import { createSyncHandler } from "./sync/sync-handler.ts";
import { SyncLog } from "./sync/sync-log.ts";

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
  /** Publishes pending changes now (tests; the timer does it otherwise). */
  publish(): void;
  ready(): boolean;
  stop(): Promise<void>;
}

function splitHostPort(listen: string): [string, number] {
  const colon = listen.lastIndexOf(":");
  return [listen.slice(0, colon).replace(/^\[|\]$/g, ""), Number(listen.slice(colon + 1))];
}

export async function startControlPlane(cfg: Config, opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const logger = opts.logger ?? pino({ level: cfg.logLevel });
  // A random epoch per start: gateways that synced from a previous run (or another replica) resync.
  const epoch = randomBytes(8).readBigUInt64LE(0) | 1n;
  const maxSlots = opts.maxSlots ?? 256;
  const log = new SyncLog();
  const gateways = new GatewayRegistry();
  const decisions = new RecentDecisions();
  const slots = new SlotTable(maxSlots);
  const load = new LoadModel(cfg.load.unhealthyAfter);
  const index = new PrefixIndex({
    buckets: cfg.cache.buckets,
    ways: cfg.cache.ways,
    maxSlots,
    maxBlocksPerSlot: cfg.cache.maxBlocksPerSlot,
  });
  const hasher = coreChunkHasher(cfg.routing.chunkSize);

  const poolTokens = new Map<string, PoolTokens>();
  for (const pool of cfg.pools) {
    const tokens = loadPoolTokens(pool);
    poolTokens.set(pool.name, tokens);
    for (const p of tokens.problems) logger.warn({ pool: pool.name }, p);
    for (const n of tokens.notes) logger.info({ pool: pool.name }, n);
  }
  const poolIndex = (name: string) => cfg.pools.findIndex((p) => p.name === name);

  const events = new EventsSupervisor({ sink: index, logger });
  let eventsSync: Promise<void> = Promise.resolve();
  const resubscribe = () => {
    const specs = slots
      .present()
      .filter((s) => s.kvEvents !== null && poolTokens.get(s.pool)?.detokenize != null)
      .map((s) =>
        subscriptionFor(s.key, s.globalRank, s.address, s.kvEvents as NonNullable<Slot["kvEvents"]>),
      );
    eventsSync = eventsSync
      .then(() => events.sync(specs))
      .catch((err: unknown) => logger.error({ err }, "KV event subscriptions failed"));
  };

  const fleet = new Fleet(slots, load, {
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
  });
  const scraper = new MetricsScraper({
    intervalMs: cfg.load.scrapeIntervalMs,
    timeoutMs: cfg.load.scrapeTimeoutMs,
    onResult: (target, outcome) => {
      fleet.onScrape(target, outcome);
      if (!outcome.ok) logger.debug({ target: target.url, error: outcome.error }, "scrape failed");
    },
  });
  const discovery = opts.discovery ?? discoveryFor(cfg);
  await discovery.start((pool, endpoints) => {
    fleet.setEndpoints(pool, endpoints);
    scraper.setTargets(fleet.scrapeTargets());
  });

  const renderings = new Map([...poolTokens].map(([name, t]) => [name, t.rendering]));
  const sessions = new SessionTable(cfg.routing.sessionTtlMs);
  const adapters = new AdapterCatalog(cfg);
  const adapterId = (pool: string, name: string) => adapters.idOf(pool, name);
  const cfgImage = () => encodeCfgImage(cfg, index.slotWords, renderings, (p) => adapters.adapters(p));
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

  const applyReport = (report: Report) =>
    applyReportTo({ load, slots, index, decisions, sessions }, report, Date.now());
  // Peers' gateways apply like ours; their reports are not counted in `reports` (each replica's
  // counters are its own gateways', so Prometheus sums over replicas without counting twice).
  const replicas =
    cfg.nats === undefined
      ? null
      : new ReplicaExchange({ nats: cfg.nats, epoch, slots, apply: applyReport, logger });

  const reports = new ReportStats((id) => slots.get(id)?.pool ?? "unknown");
  const statusInput = {
    cfg,
    epoch,
    log,
    slots,
    load,
    index,
    gateways,
    decisions,
    poolTokens,
    events,
    reports,
    replicas,
    sessions,
    adapters,
  };
  const metrics = buildMetrics(statusInput);
  const server: HttpServer = createHttpServer(
    {
      "GET /v1/sync": createSyncHandler({
        log,
        epoch,
        gateways,
        authToken: cfg.authToken,
        longPollMs: cfg.sync.longPollMs,
        pageBytes: cfg.sync.snapshotPageBytes,
      }),
      "POST /v1/report": reports.counting(
        createReportHandler({
          authToken: cfg.authToken,
          maxBytes: 16 << 20,
          apply: reports.observing((report, _from, body) => {
            applyReport(report);
            replicas?.relay(body);
          }),
        }),
      ),
      "GET /v1/status": (_req, res) => sendJson(res, 200, buildStatus(statusInput)),
      ...dashboardRoutes(() => buildStatus(statusInput)),
      "GET /metrics": async (_req, res) => {
        const body = await metrics.metrics();
        res.writeHead(200, { "content-type": metrics.contentType }).end(body);
      },
      "GET /healthz": (_req, res) => sendJson(res, 200, { ok: true }),
      "GET /readyz": (_req, res) => {
        const ok = ready();
        sendJson(res, ok ? 200 : 503, {
          ready: ok,
          ranksResolved: fleet.ranksResolved(),
          slots: slots.present().length,
          // A detail, not a condition: without NATS this replica still serves every gateway from
          // its own complete view (docs/operations.md "Control-plane replicas").
          ...(replicas === null
            ? {}
            : { replicas: { connected: replicas.connected, peers: replicas.peers().length } }),
        });
      },
    },
    logger,
    cfg.http,
  );
  registerHttpMetrics(metrics, server.stats);
  const ready = () => published && fleet.ranksResolved() && slots.present().length > 0;

  const [host, port] = splitHostPort(opts.listen ?? cfg.listen);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}`;
  scraper.start();
  replicas?.start();
  adapterDiscovery.start();
  const timer = setInterval(publish, opts.publishIntervalMs ?? 5);
  // Loaded only when configured: it brings the Node Proxy-Wasm host and the gRPC server.
  const epp =
    cfg.epp === undefined
      ? null
      : await (await import("./epp/part.ts")).startEppPart(
          cfg,
          { ...cfg.epp, listen: opts.eppListen ?? cfg.epp.listen },
          {
            httpHost: address.address,
            httpPort: address.port,
            epoch,
            ready,
            slots,
            load,
            logger,
            // Peers apply this picker's reports too: each replica's picker needs its own gateway id.
            ...(replicas === null ? {} : { gatewayId: `kvroute-epp@${replicas.replicaId}` }),
          },
        );
  if (epp !== null) registerEppMetrics(metrics, epp.stats);
  if (replicas !== null) registerReplicaMetrics(metrics, replicas);
  logger.info(
    { url, dashboard: `${url}/dashboard`, epoch: epoch.toString(), pools: cfg.pools.map((p) => p.name) },
    "control plane listening",
  );

  return {
    url,
    epoch,
    log,
    index,
    slots,
    load,
    fleet,
    sessions,
    adapters,
    epp,
    replicas,
    publish,
    ready,
    async stop() {
      await epp?.close();
      await replicas?.stop();
      clearInterval(timer);
      await discovery.stop();
      scraper.stop();
      await adapterDiscovery.stop();
      await eventsSync;
      await events.stop();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
