// The control plane's single HTTP listener: a route table, JSON errors for everything else,
// and no handler failure ever takes the process down. What one client may hold — connections,
// time to send a request — is bounded (common/http-limits.ts), and what clients do wrong is counted
// and logged at most once per interval, never once per occurrence (interval-log.ts).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "pino";
import { HTTP_LIMIT_DEFAULTS, type HttpLimits, timeoutCheckIntervalMs } from "../common/http-limits.ts";
import { sendJsonError } from "../common/json-error.ts";
import { IntervalLog } from "./interval-log.ts";

export type RouteHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => void | Promise<void>;

/** Keys are "METHOD /path". */
export type Routes = Record<string, RouteHandler>;

export interface HttpServerOptions extends HttpLimits {
  /** Interval of the summarised log lines (10 s; tests shorten it). */
  logIntervalMs: number;
}

/** Counters for /metrics (prometheus-http.ts). */
export interface HttpServerStats {
  /** Connections closed as soon as accepted: maxConnections were open. */
  connectionsRefused: number;
  /** Requests whose client went away before sending the whole body. */
  requestsAborted: number;
  /** Connections closed because a request was not received within headersTimeoutMs / requestTimeoutMs (answered 408). */
  requestsTimedOut: number;
  /** Handlers that threw (a bug: answered 500). */
  handlerFailures: number;
}

export type HttpServer = Server & { readonly stats: HttpServerStats };

export function createHttpServer(
  routes: Routes,
  logger: Logger,
  options: Partial<HttpServerOptions> = {},
): HttpServer {
  const o: HttpServerOptions = { ...HTTP_LIMIT_DEFAULTS, logIntervalMs: 10_000, ...options };
  const stats: HttpServerStats = {
    connectionsRefused: 0,
    requestsAborted: 0,
    requestsTimedOut: 0,
    handlerFailures: 0,
  };
  const log = new IntervalLog(logger, o.logIntervalMs);
  const paths = new Set(Object.keys(routes).map((k) => k.slice(k.indexOf(" ") + 1)));
  const server = createServer(
    {
      headersTimeout: o.headersTimeoutMs,
      requestTimeout: o.requestTimeoutMs,
      connectionsCheckingInterval: timeoutCheckIntervalMs(o),
    },
    (req, res) => {
      const url = new URL(req.url ?? "/", "http://localhost");
      const handler = routes[`${req.method} ${url.pathname}`];
      if (handler === undefined) {
        if (paths.has(url.pathname))
          sendJsonError(res, 405, `${req.method} is not allowed on ${url.pathname}`, "method_not_allowed");
        else sendJsonError(res, 404, `no such endpoint: ${url.pathname}`, "not_found");
        return;
      }
      Promise.resolve()
        .then(() => handler(req, res, url))
        .catch((err: unknown) => {
          if (!req.complete && req.destroyed) {
            // The body stopped coming: the client went away (an aborted upload), or the
            // request timeout cut it (counted when its socket closes, below). Nothing to answer.
            if (!timedOut(req.socket)) {
              stats.requestsAborted++;
              log.note(
                "aborted",
                "warn",
                { path: url.pathname },
                "request aborted by the client before its body was read",
              );
            }
            return;
          }
          stats.handlerFailures++;
          log.note(`failed ${url.pathname}`, "error", { err, path: url.pathname }, "request handler failed");
          if (!res.headersSent) sendJsonError(res, 500, "internal error", "internal");
          else res.destroy();
        });
    },
  );
  server.maxConnections = o.maxConnections;
  server.on("drop", () => {
    stats.connectionsRefused++;
    log.note(
      "refused",
      "warn",
      { maxConnections: o.maxConnections },
      "connection refused: http.maxConnections are open",
    );
  });
  server.on("connection", (socket: Socket) => {
    socket.once("close", () => {
      if (!timedOut(socket)) return;
      stats.requestsTimedOut++;
      log.note(
        "timeout",
        "warn",
        { remote: socket.remoteAddress },
        "request not received in time: answered 408 and closed",
      );
    });
  });
  server.on("close", () => log.close());
  return Object.assign(server, { stats });
}

/** Node destroys a connection whose request missed headersTimeout or requestTimeout with this error. */
function timedOut(socket: Socket): boolean {
  return (socket.errored as { code?: string } | null)?.code === "ERR_HTTP_REQUEST_TIMEOUT";
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}
