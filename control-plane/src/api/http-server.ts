// The control plane's single HTTP listener: a route table, JSON errors for everything else,
// and no handler failure ever takes the process down.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Logger } from "pino";
import { sendJsonError } from "./json-error.ts";

export type RouteHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => void | Promise<void>;

/** Keys are "METHOD /path". */
export type Routes = Record<string, RouteHandler>;

export function createHttpServer(routes: Routes, logger: Logger): Server {
  const paths = new Set(Object.keys(routes).map((k) => k.slice(k.indexOf(" ") + 1)));
  return createServer((req, res) => {
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
        logger.error({ err, path: url.pathname }, "request handler failed");
        if (!res.headersSent) sendJsonError(res, 500, "internal error", "internal");
        else res.destroy();
      });
  });
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}
