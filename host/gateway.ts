// Gateway mode: a loopback HTTP/1.1 listener in front of the emulated Envoy, shaped like
// envoy/envoy.yaml's listener: optional header removal ahead of the filter (its header_mutation
// guard), the Wasm filter (stream.ts), then the upstream the router picks (router.ts:
// x-gateway-destination-endpoint with ORIGINAL_DST semantics, else the default cluster, else 503).
// Each request goes to the next worker thread (round robin). The listener's buffer limit
// (bufferLimitBytes, Envoy's per_connection_buffer_limit_bytes, default 1 MiB) bounds what the
// filter chain buffers: 413 in buffer mode, a paused client socket in watermark mode. Bodies stream
// both ways chunk by chunk — an SSE response reaches the client event by event, each chunk passing
// proxy_on_response_body — and one access-log line is written per request (status, upstream,
// duration). End-to-end tests and the demo use it when no Envoy binary is around.
import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { HostOptions } from "./core.ts";
import {
  type ConnectionManagerAddressing,
  downstreamRemoteAddress,
  ENVOY_DEFAULT_ADDRESSING,
} from "./forwarded-for.ts";
import { HeaderMap } from "./header-map.ts";
import { createHost, type Host } from "./host.ts";
import type { PolicyFilter } from "./policy-filters.ts";
import { UpstreamRouter } from "./router.ts";
import type { RouteEntry } from "./routes.ts";
import { RouteTableRouting, type Routing, ShorthandRouting } from "./routing.ts";
import type { FilterChainSink, HttpStream } from "./stream.ts";
import type { WasmThread } from "./thread.ts";

export interface AccessLogEntry {
  method: string;
  path: string;
  status: number;
  details: string;
  upstream: string;
  durationMs: number;
  thread: string;
  requestId: string;
  /** Route-cache clears during the request (request-header writes by the filter). */
  routeCacheClears: number;
  /** x-gateway-destination-endpoint as the router saw it, after the filter ("-" when absent). */
  destination: string;
  /** The route the router picked ("-" for the shorthand without a route table). */
  route: string;
  /** x-gateway-destination-endpoint was present but not one literal ip:port (original_dst_host_invalid). */
  originalDstHostInvalid: boolean;
}

export interface GatewayOptions extends HostOptions, Partial<ConnectionManagerAddressing> {
  /** Listen port on 127.0.0.1 (0 = any free port, the default). */
  port?: number;
  /**
   * The listener's route table (envoy-listener.ts reads it from an Envoy config): each request's
   * route is picked after the Wasm filter wrote its headers, and its cluster, timeout and
   * per-route policy config apply. Without it the shorthand applies: the destination header
   * picks an ORIGINAL_DST host, else `defaultCluster`.
   */
  routes?: RouteEntry[];
  /**
   * Headers the connection manager removes before routing and before any filter (Envoy's
   * early_header_mutation_extensions; Envoy Gateway's ClientTrafficPolicy earlyRequestHeaders).
   */
  earlyRemoveHeaders?: string[];
  /** The HTTP filters after the Wasm filter (RBAC, local rate limit), in chain order; with `routes`. */
  policyFilters?: PolicyFilter[];
  /** Name of the cluster (from `clusters`) used when the destination header is absent (shorthand only). */
  defaultCluster?: string;
  /**
   * Request headers removed before the Wasm filter sees the request, like envoy/envoy.yaml's
   * header_mutation guard (`x-gateway-destination-endpoint`): with it a bypassed filter
   * (FAIL_OPEN) cannot let a client choose the upstream.
   */
  removeRequestHeaders?: string[];
  /** Receives one formatted line per finished request. */
  accessLog?: (line: string, entry: AccessLogEntry) => void;
}

export interface Gateway {
  url: string;
  port: number;
  host: Host;
  /** Every finished request so far, oldest first. */
  accessLog: AccessLogEntry[];
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "upgrade",
  "proxy-connection",
  "te",
]);

function routingOf(options: GatewayOptions, host: Host): Routing {
  if (options.routes !== undefined) {
    if (options.defaultCluster !== undefined)
      throw new Error("defaultCluster is the shorthand for a route table: give one or the other");
    return new RouteTableRouting({
      routes: options.routes,
      clusters: host.core.clusters,
      policyFilters: options.policyFilters ?? [],
    });
  }
  if (options.policyFilters !== undefined)
    throw new Error("policyFilters read per-route config: they need routes");
  const name = options.defaultCluster;
  const cluster = name ? host.core.clusters.get(name) : undefined;
  if (name && !cluster) throw new Error(`defaultCluster ${name} is not in clusters`);
  return new ShorthandRouting(name && cluster ? { name, cluster } : null);
}

/**
 * A downstream connection's timeouts as Envoy's HTTP connection manager has them by default:
 * `common_http_protocol_options.idle_timeout` 1 hour, no `request_headers_timeout` and no
 * `request_timeout` (0, disabled). Node's own (keep-alive 5 s, headers 60 s, request 300 s) closed
 * a client's pooled connection under it as it sent the next request (ECONNRESET in a loaded
 * test run), which Envoy would not have done.
 */
const ENVOY_DOWNSTREAM_TIMEOUTS: http.ServerOptions = {
  keepAliveTimeout: 3_600_000,
  headersTimeout: 0,
  requestTimeout: 0,
};

export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const host = createHost(options);
  const gateway: Listener = {
    options,
    host,
    routing: routingOf(options, host),
    accessLog: [],
    addressing: {
      useRemoteAddress: options.useRemoteAddress ?? ENVOY_DEFAULT_ADDRESSING.useRemoteAddress,
      xffNumTrustedHops: options.xffNumTrustedHops ?? ENVOY_DEFAULT_ADDRESSING.xffNumTrustedHops,
    },
  };
  const server = http.createServer(ENVOY_DOWNSTREAM_TIMEOUTS, (req, res) => serveRequest(gateway, req, res));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    host,
    accessLog: gateway.accessLog,
    close: async () => {
      host.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What every request of one listener shares. */
interface Listener {
  options: GatewayOptions;
  host: Host;
  routing: Routing;
  accessLog: AccessLogEntry[];
  addressing: ConnectionManagerAddressing;
}

/**
 * One request through the listener: the connection manager's header work, a stream on the next
 * worker thread whose filter chain ends in the router, then the client's body fed in as it comes.
 */
function serveRequest(gw: Listener, req: http.IncomingMessage, res: http.ServerResponse): void {
  const thread = gw.host.pickThread();
  const started = performance.now();
  const h = requestHeaderMap(req);
  // The HCM decides who the client is (use_remote_address / X-Forwarded-For): source.address.
  const local = { address: req.socket.localAddress ?? "127.0.0.1", port: req.socket.localPort ?? 0 };
  const client = downstreamRemoteAddress(
    h,
    { address: req.socket.remoteAddress ?? "127.0.0.1", port: req.socket.remotePort ?? 0 },
    local,
    gw.addressing,
  );
  applyConnectionManager(h, gw.options);
  const requestId = h.get("x-request-id") as string;
  const hasBody =
    req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;

  let stream: HttpStream | null = null;
  const router = new UpstreamRouter(() => stream as HttpStream, gw.routing);
  let finished = false;
  const done = () => {
    finished = true;
    logAccess(gw, accessLogEntry(req, stream as HttpStream, router, thread, started, requestId));
  };
  stream = gw.host.newStream(thread, filterChainSink(req, res, router, done), {
    sourceAddress: client.address,
    sourcePort: client.port,
    destinationAddress: local.address,
    destinationPort: local.port,
  });
  const s = stream;
  thread.post(() => s.decodeHeaders(h, !hasBody));
  if (hasBody) feedRequestBody(req, thread, s);
  else req.resume();
  res.on("close", () => {
    if (!finished) thread.post(() => s.reset("downstream_remote_disconnect"));
  });
}

/** The request's pseudo-headers and its headers as the client sent them, less hop-by-hop ones. */
function requestHeaderMap(req: http.IncomingMessage): HeaderMap {
  const h = new HeaderMap([
    [":authority", req.headers.host ?? ""],
    [":path", req.url ?? "/"],
    [":method", req.method ?? "GET"],
    [":scheme", "http"],
  ]);
  for (let k = 0; k < req.rawHeaders.length; k += 2) {
    const key = (req.rawHeaders[k] as string).toLowerCase();
    if (key === "host" || HOP_BY_HOP.has(key)) continue;
    h.add(key, req.rawHeaders[k + 1] as string);
  }
  return h;
}

/** HCM defaults, early header removal, then the header_mutation guard ahead of the Wasm filter. */
function applyConnectionManager(h: HeaderMap, options: GatewayOptions): void {
  // HCM defaults: generate x-request-id when absent, set x-forwarded-proto.
  if (h.get("x-request-id") === undefined) h.add("x-request-id", randomUUID());
  h.add("x-forwarded-proto", "http");
  for (const name of options.earlyRemoveHeaders ?? []) h.remove(name);
  // Then the filter chain: a header_mutation guard ahead of the Wasm filter (envoy.yaml's).
  for (const name of options.removeRequestHeaders ?? []) h.remove(name);
}

/** The filter chain's ends: the router upstream, the client's response downstream. */
function filterChainSink(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  router: UpstreamRouter,
  done: () => void,
): FilterChainSink {
  return {
    requestHeaders: (m, eos) => router.requestHeaders(m, eos),
    requestData: (d, eos) => router.requestData(d, eos),
    requestTrailers: (t) => router.requestTrailers(t),
    abortUpstream: () => router.abort(),
    responseHeaders: (m, eos) => {
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of m.entries) {
        if (k.startsWith(":") || HOP_BY_HOP.has(k)) continue;
        const prev = out[k];
        out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
      }
      res.writeHead(Number(m.get(":status") ?? 200), out);
      if (eos) res.end();
      else res.flushHeaders();
    },
    responseData: (d, eos) => {
      if (d.length > 0) res.write(d);
      if (eos) res.end();
    },
    responseTrailers: (t) => {
      if (!res.hasHeader("content-length")) res.addTrailers(Object.fromEntries(t.entries));
      res.end();
    },
    resetDownstream: () => {
      res.destroy();
    },
    // Envoy read-disables the client while watermark-mode buffering is over the limit.
    readDisable: (disabled) => {
      if (disabled) req.pause();
      else req.resume();
    },
    done,
  };
}

/** The client's body chunk by chunk, then its trailers (or an empty end of stream). */
function feedRequestBody(req: http.IncomingMessage, thread: WasmThread, s: HttpStream): void {
  req.on("data", (c: Buffer) => thread.post(() => s.decodeData(new Uint8Array(c), false)));
  req.on("end", () => {
    const tr = new HeaderMap();
    for (let k = 0; k < req.rawTrailers.length; k += 2)
      tr.add(req.rawTrailers[k] as string, req.rawTrailers[k + 1] as string);
    if (tr.size > 0) thread.post(() => s.decodeTrailers(tr));
    else thread.post(() => s.decodeData(new Uint8Array(0), true));
  });
}

function accessLogEntry(
  req: http.IncomingMessage,
  s: HttpStream,
  router: UpstreamRouter,
  thread: WasmThread,
  started: number,
  requestId: string,
): AccessLogEntry {
  return {
    method: req.method ?? "",
    path: req.url ?? "",
    status: s.info.responseCode ?? 0,
    details: s.info.responseCodeDetails ?? "via_upstream",
    upstream: router.upstream ?? "-",
    durationMs: Math.round((performance.now() - started) * 1000) / 1000,
    thread: thread.name,
    requestId,
    routeCacheClears: s.info.routeCacheClears,
    destination: router.destination ?? "-",
    route: s.info.routeName ?? "-",
    originalDstHostInvalid: s.info.originalDstHostInvalid === true,
  };
}

function logAccess(gw: Listener, entry: AccessLogEntry): void {
  gw.accessLog.push(entry);
  gw.options.accessLog?.(
    `[${new Date().toISOString()}] "${entry.method} ${entry.path} HTTP/1.1" ${entry.status} ${entry.details} upstream=${entry.upstream} route=${entry.route} duration_ms=${entry.durationMs} thread=${entry.thread} request_id=${entry.requestId}`,
    entry,
  );
}
