// Helpers for the host's own tests: module paths, loopback upstream servers, and a recording
// filter-chain sink to drive a stream step by step the way Envoy's connection manager does.
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { HeaderMap } from "../../host/header-map.ts";
import type { FilterChainSink } from "../../host/stream.ts";

export const moduleFile = (name: string): string =>
  new URL(`../../build/test-modules/${name}.wasm`, import.meta.url).pathname;

export const filterFile = (): string => new URL("../../build/kvroute.wasm", import.meta.url).pathname;

export interface Upstream {
  port: number;
  address: string;
  requests: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: string }>;
  close(): Promise<void>;
}

/** A real HTTP server on 127.0.0.1 that records requests and answers with `handler`. */
export async function startUpstream(
  handler: (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void = (_q, body, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(`echo:${body}`);
  },
): Promise<Upstream> {
  const requests: Upstream["requests"] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString();
      requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      handler(req, body, res);
    });
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    address: `127.0.0.1:${port}`,
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export type SinkEvent =
  | { kind: "reqHeaders"; headers: Array<[string, string]>; eos: boolean }
  | { kind: "reqData"; data: string; eos: boolean }
  | { kind: "reqTrailers"; trailers: Array<[string, string]> }
  | { kind: "abortUpstream" }
  | { kind: "respHeaders"; headers: Array<[string, string]>; eos: boolean }
  | { kind: "respData"; data: string; eos: boolean }
  | { kind: "respTrailers"; trailers: Array<[string, string]> }
  | { kind: "reset"; reason: string }
  | { kind: "done" };

export class RecordingSink implements FilterChainSink {
  readonly events: SinkEvent[] = [];
  requestHeaders(h: HeaderMap, eos: boolean) {
    this.events.push({ kind: "reqHeaders", headers: h.pairs(), eos });
  }
  requestData(d: Uint8Array, eos: boolean) {
    this.events.push({ kind: "reqData", data: Buffer.from(d).toString(), eos });
  }
  requestTrailers(t: HeaderMap) {
    this.events.push({ kind: "reqTrailers", trailers: t.pairs() });
  }
  abortUpstream() {
    this.events.push({ kind: "abortUpstream" });
  }
  responseHeaders(h: HeaderMap, eos: boolean) {
    this.events.push({ kind: "respHeaders", headers: h.pairs(), eos });
  }
  responseData(d: Uint8Array, eos: boolean) {
    this.events.push({ kind: "respData", data: Buffer.from(d).toString(), eos });
  }
  responseTrailers(t: HeaderMap) {
    this.events.push({ kind: "respTrailers", trailers: t.pairs() });
  }
  resetDownstream(reason: string) {
    this.events.push({ kind: "reset", reason });
  }
  done() {
    this.events.push({ kind: "done" });
  }
  of<K extends SinkEvent["kind"]>(kind: K): Array<Extract<SinkEvent, { kind: K }>> {
    return this.events.filter((e) => e.kind === kind) as Array<Extract<SinkEvent, { kind: K }>>;
  }
}

/** Lets queued thread tasks, timers and sockets run. */
export const settle = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function waitFor(cond: () => boolean, timeoutMs = 3000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error("waitFor timed out");
    await settle(5);
  }
}

/** Callback lines ("cb:…") a test module logged, in order. */
export function callbacks(logs: string[]): string[] {
  return logs.filter((m) => m.startsWith("cb:")).map((m) => m.slice(3));
}
