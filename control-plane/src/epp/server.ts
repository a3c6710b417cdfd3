// The endpoint picker (GAIE's EPP) as a gRPC server: envoy.service.ext_proc.v3.ExternalProcessor,
// each stream run through the embedded filter (exchange.ts), and grpc.health.v1.Health
// (health.ts), on one port (9002 by default, like GAIE's pickers) and optionally a second,
// health-only port (GAIE's charts probe 9003). A message that does not decode, or comes out of
// order, ends its stream with INVALID_ARGUMENT and says why; nothing a client sends can crash
// the process, and a stream that ends early still runs the filter's on_log.
import { readFileSync } from "node:fs";
import { Server, ServerCredentials, type ServerDuplexStream, status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { EmbeddedFilter, type EmbeddedFilterOptions } from "./embedded-filter.ts";
import { Exchange, type ExchangeEvent } from "./exchange.ts";
import type { Pairs } from "./header-mutation.ts";
import { HealthService } from "./health.ts";
import type { ProcessingRequest, ProcessingResponse } from "./messages.ts";
import { applyObjective, type ObjectiveMap } from "./objective.ts";
import { extProcService, healthService, MalformedMessage } from "./protos.ts";
import { EppResources, type PoolRef } from "./resources.ts";
import { eligibleEndpoints, type SubsetMatch } from "./subset-match.ts";
import { decodeTimes, TimingStats } from "./timing.ts";

export interface EppOptions {
  /** host:port of the ext_proc + health listener. */
  listen: string;
  /** Optional second listener with the health service only. */
  healthListen?: string;
  tls?: { certFile: string; keyFile: string };
  filter: EmbeddedFilterOptions;
  /** Body modes assumed when the gateway's first message carries no protocol_config. */
  requestBodyMode: number;
  responseBodyMode: number;
  /** The control plane has a published index with ready slots. */
  controlPlaneReady(): boolean;
  /** The control plane's epoch: the embedded filter is ready once it synced from this run. */
  epoch: bigint;
  /** Some ready endpoint for requests the filter does not route, or null. */
  anyEndpoint(): string | null;
  /** How a gateway's subset hint selects endpoints (subset-match.ts); default "ip", as llm-d-router. */
  subsetMatch?: SubsetMatch;
  /** Every endpoint (ip:port) of the pools, for "ip" subset matching. */
  endpoints?(): string[];
  /** GAIE objectives → priority levels (epp.objectives); absent = objectives are not read. */
  objectives?: Omit<ObjectiveMap, "priorities"> & { priorities: ReadonlyMap<string, number> };
  /**
   * Body bytes held before the embedded filter is shown them (exchange.ts); default the filter's
   * maxBodyBytes + 1. 1 = every chunk as it comes (the bench's before/after baseline).
   */
  holdBodyBytes?: number;
  /** The InferencePool whose InferenceObjectives and InferenceModelRewrites count (resources.ts). */
  pool?: PoolRef | null;
  logger: Logger;
}

export interface EppStats {
  streams: number;
  routed: number;
  immediate: Record<string, number>;
  invalid: number;
  internalErrors: number;
  /** Responses the gateway reports served by another endpoint than the pick (a retry down the list). */
  servedElsewhere: number;
  /** Inference requests answered 400 because the body is not JSON. */
  invalidJson: number;
  /** Streams refused because the gateway's request body mode cannot carry a decision, by mode. */
  unsupportedBodyMode: Record<string, number>;
  /** The request phases' own time and its split (timing.ts). */
  timing: TimingStats;
  /** Requests naming an objective: mapped to a priority, or not listed in epp.objectives. */
  objectives: Record<"mapped" | "unknown", number>;
}

export interface Epp {
  /** host:port actually bound (port 0 resolved). */
  address: string;
  healthAddress: string | null;
  filter: EmbeddedFilter;
  health: HealthService;
  stats: EppStats;
  /** Objectives and model rewrites (configured, and watched by part.ts). */
  resources: EppResources;
  ready(): boolean;
  close(): Promise<void>;
}

type Call = ServerDuplexStream<ProcessingRequest | MalformedMessage, ProcessingResponse>;

function splitHostPort(listen: string): [string, number] {
  const colon = listen.lastIndexOf(":");
  return [listen.slice(0, colon).replace(/^\[|\]$/g, ""), Number(listen.slice(colon + 1))];
}

async function bind(server: Server, listen: string, creds: ServerCredentials): Promise<string> {
  const [host, port] = splitHostPort(listen);
  const target = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(target, creds, (err, p) => (err ? reject(err) : resolve(p))),
  );
  return `${host.includes(":") ? `[${host}]` : host}:${bound}`;
}

/**
 * Starts the picker: the embedded filter and its readiness, the per-stream handler that runs each
 * ext_proc stream through it, then the gRPC listener(s).
 */
export async function startEpp(opts: EppOptions): Promise<Epp> {
  const filter = new EmbeddedFilter(opts.filter);
  const ready = () => {
    if (!opts.controlPlaneReady()) return false;
    const v = filter.cacheVersion();
    return v !== null && v.epoch === opts.epoch;
  };
  const health = new HealthService(ready);
  const stats = newEppStats();
  const resources = new EppResources(opts.objectives?.priorities ?? new Map(), opts.pool ?? null);
  const processStream = streamHandler(filter, opts, stats, resources);
  const { server, healthServer, address, healthAddress } = await listen(opts, processStream, health, filter);
  opts.logger.info(
    { address, healthAddress, tls: opts.tls !== undefined },
    "endpoint picker (GAIE ext_proc) listening",
  );
  return {
    address,
    healthAddress,
    filter,
    health,
    stats,
    resources,
    ready,
    async close() {
      health.close();
      await Promise.all([shutDown(server), ...(healthServer === null ? [] : [shutDown(healthServer)])]);
      filter.close();
    },
  };
}

function newEppStats(): EppStats {
  return {
    streams: 0,
    routed: 0,
    immediate: {},
    invalid: 0,
    internalErrors: 0,
    servedElsewhere: 0,
    unsupportedBodyMode: {},
    invalidJson: 0,
    timing: new TimingStats(),
    objectives: { mapped: 0, unknown: 0 },
  };
}

/** Reads a request's GAIE objective into a priority (counted), when epp.objectives is configured. */
function objectiveFilter(objectives: EppOptions["objectives"], resources: EppResources, stats: EppStats) {
  if (objectives === undefined) return undefined;
  const m: ObjectiveMap = { ...objectives, priorities: resources };
  return (pairs: Pairs): Pairs => {
    const { pairs: seen, result } = applyObjective(pairs, m);
    if (result !== "none") stats.objectives[result]++;
    return seen;
  };
}

/** Counts what each exchange decided. */
function statsObserver(stats: EppStats, log: Logger): (e: ExchangeEvent) => void {
  return (e) => {
    if (e.kind === "routed") stats.routed++;
    else if (e.kind === "immediate") stats.immediate[e.status] = (stats.immediate[e.status] ?? 0) + 1;
    else if (e.kind === "timing") stats.timing.add(e);
    else if (e.kind === "invalidJson") stats.invalidJson++;
    else if (e.kind === "unsupportedMode") {
      const n = (stats.unsupportedBodyMode[e.mode] ?? 0) + 1;
      stats.unsupportedBodyMode[e.mode] = n;
      // Once per mode: a misconfigured gateway would otherwise log on every request.
      if (n === 1)
        log.warn(
          { mode: e.mode },
          "epp: the gateway's ext_proc request_body_mode cannot carry a routing decision; configure FULL_DUPLEX_STREAMED",
        );
    } else {
      stats.servedElsewhere++;
      log.debug({ picked: e.destination, served: e.served }, "epp: the gateway served another endpoint");
    }
  };
}

/**
 * One ext_proc stream: its messages go through an Exchange with the embedded filter; a malformed
 * or out-of-order message ends it with INVALID_ARGUMENT, a failure of ours with INTERNAL.
 */
function streamHandler(
  filter: EmbeddedFilter,
  opts: EppOptions,
  stats: EppStats,
  resources: EppResources,
): (call: Call) => void {
  const log = opts.logger;
  const filterHeaders = objectiveFilter(opts.objectives, resources, stats);
  const observe = statsObserver(stats, log);
  const subsetMatch = opts.subsetMatch ?? "ip";
  const endpoints = opts.endpoints ?? (() => []);
  const subsetEndpoints = (hint: string[]) => eligibleEndpoints(hint, subsetMatch, endpoints);
  return (call: Call) => {
    stats.streams++;
    let closed = false;
    const fail = (code: status, details: string) => {
      if (closed) return;
      closed = true;
      exchange.end();
      call.emit("error", { code, details });
    };
    const exchange = new Exchange({
      newStream: (sink, source, metadata) => filter.newStream(sink, source, metadata),
      requestBodyMode: opts.requestBodyMode,
      responseBodyMode: opts.responseBodyMode,
      isInference: (method, path) => filter.isInference(method, path),
      anyEndpoint: opts.anyEndpoint,
      send: (r) => {
        if (!closed) call.write(r);
      },
      invalid: (details) => {
        stats.invalid++;
        log.warn({ details }, "epp: invalid ext_proc stream");
        fail(status.INVALID_ARGUMENT, details);
      },
      observe,
      subsetEndpoints,
      parseErrors: () => filter.parseErrors(),
      // One byte past the filter's limit: it needs to see a body exceed it to answer as it does.
      holdBodyBytes: opts.holdBodyBytes ?? opts.filter.maxBodyBytes + 1,
      rewrites: resources.rewrites,
      ...(filterHeaders === undefined ? {} : { filterHeaders }),
    });
    call.on("data", (msg: ProcessingRequest | MalformedMessage) => {
      if (closed) return;
      if (msg instanceof MalformedMessage) {
        stats.invalid++;
        return fail(status.INVALID_ARGUMENT, `malformed ProcessingRequest: ${msg.reason}`);
      }
      try {
        exchange.onMessage(msg, decodeTimes.get(msg) ?? 0);
      } catch (err) {
        stats.internalErrors++;
        log.error({ err }, "epp: stream failed");
        fail(status.INTERNAL, "the endpoint picker failed on this stream");
      }
    });
    call.on("end", () => {
      exchange.end();
      if (!closed) {
        closed = true;
        call.end();
      }
    });
    const gone = () => {
      exchange.end();
      closed = true;
    };
    call.on("cancelled", gone);
    call.on("error", gone);
  };
}

function serverCredentials(tls: EppOptions["tls"]): ServerCredentials {
  return tls === undefined
    ? ServerCredentials.createInsecure()
    : ServerCredentials.createSsl(
        null,
        [{ private_key: readFileSync(tls.keyFile), cert_chain: readFileSync(tls.certFile) }],
        false,
      );
}

/**
 * Binds ext_proc + health on opts.listen and, when asked, health alone on opts.healthListen. A
 * failure to bind releases everything started so far (the filter too) and throws.
 */
async function listen(
  opts: EppOptions,
  processStream: (call: Call) => void,
  health: HealthService,
  filter: EmbeddedFilter,
): Promise<{ server: Server; healthServer: Server | null; address: string; healthAddress: string | null }> {
  const creds = serverCredentials(opts.tls);
  const server = new Server({ "grpc.max_receive_message_length": 64 * 1024 * 1024 });
  server.addService(extProcService, { Process: processStream });
  server.addService(healthService, health.handlers);
  let healthServer: Server | null = null;
  try {
    const address = await bind(server, opts.listen, creds);
    let healthAddress: string | null = null;
    if (opts.healthListen !== undefined) {
      healthServer = new Server();
      healthServer.addService(healthService, health.handlers);
      healthAddress = await bind(healthServer, opts.healthListen, creds);
    }
    return { server, healthServer, address, healthAddress };
  } catch (err) {
    health.close();
    server.forceShutdown();
    healthServer?.forceShutdown();
    filter.close();
    throw err;
  }
}

/** Graceful shutdown, forced after 2 s. */
function shutDown(s: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      s.forceShutdown();
      resolve();
    }, 2000);
    s.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
