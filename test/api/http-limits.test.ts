// What one HTTP client may hold of the control plane (issue 29, item 4), over real loopback
// connections: a connection past the cap is closed at once, a request whose headers or body
// do not arrive in time is answered 408 and closed — while /v1/sync's long poll, whose
// request is complete, holds its answer as long as it needs — and a burst of aborted uploads
// is one log line with a count, not a stack trace per abort.
import type { AddressInfo } from "node:net";
import { connect, type Socket } from "node:net";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import {
  createHttpServer,
  type HttpServer,
  type HttpServerOptions,
  type Routes,
  sendJson,
} from "../../control-plane/src/api/http-server.ts";
import { createReportHandler } from "../../control-plane/src/reports/report-handler.ts";
import { GatewayRegistry } from "../../control-plane/src/sync/gateways.ts";
import { createSyncHandler } from "../../control-plane/src/sync/sync-handler.ts";
import { SyncLog } from "../../control-plane/src/sync/sync-log.ts";
import { until } from "../until.ts";

const TOKEN = "http-limits-token-0123456789";
const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface LogLine {
  level: number;
  msg: string;
  kind?: string;
  count?: number;
  err?: { stack?: string };
}

/** The control plane's listener with its real sync and report handlers; log lines captured. */
async function start(options: Partial<HttpServerOptions>, routes: Routes = {}) {
  const lines: LogLine[] = [];
  const logger = pino({ level: "warn" }, { write: (s: string) => lines.push(JSON.parse(s)) });
  const log = new SyncLog();
  const server = createHttpServer(
    {
      "GET /v1/sync": createSyncHandler({
        log,
        epoch: 7n,
        gateways: new GatewayRegistry(),
        authToken: TOKEN,
        longPollMs: 1_500,
        pageBytes: 1 << 20,
      }),
      "POST /v1/report": createReportHandler({ authToken: TOKEN, maxBytes: 16 << 20, apply: () => {} }),
      "GET /healthz": (_req, res) => sendJson(res, 200, { ok: true }),
      ...routes,
    },
    logger,
    options,
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  const port = (server.address() as AddressInfo).port;
  return { server, port, lines, log };
}

/** A raw connection that records what it reads and when it closes. */
function open(port: number): Promise<{ socket: Socket; data: () => string; closed: () => boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let isClosed = false;
    socket.on("data", (d) => chunks.push(d));
    socket.on("error", () => {}); // a reset by the server is what some tests expect
    socket.on("close", () => {
      isClosed = true;
    });
    socket.once("connect", () =>
      resolve({ socket, data: () => Buffer.concat(chunks).toString("latin1"), closed: () => isClosed }),
    );
    socket.once("error", reject);
    cleanups.push(() => void socket.destroy());
  });
}

const GET_HEALTHZ = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
const connections = (server: HttpServer) =>
  new Promise<number>((resolve, reject) =>
    server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
  );

describe("http.maxConnections", () => {
  it("closes a connection past the cap at once and keeps serving the ones it holds", async () => {
    const { server, port, lines } = await start({ maxConnections: 2 });
    const a = await open(port);
    const b = await open(port); // exactly at the cap: accepted
    await until("both connections accepted", async () => (await connections(server)) === 2);
    const c = await open(port); // one past it
    c.socket.write(GET_HEALTHZ);
    await until("the third connection closed", () => c.closed());
    expect(c.data()).toBe(""); // never answered
    expect(server.stats.connectionsRefused).toBe(1);
    // The held ones are served.
    for (const held of [a, b]) held.socket.write(GET_HEALTHZ);
    await until("both held connections answered", () =>
      [a, b].every((h) => h.data().startsWith("HTTP/1.1 200")),
    );
    // A place freed is a place for the next one.
    a.socket.destroy();
    await until("the first connection gone", async () => (await connections(server)) === 1);
    const d = await open(port);
    d.socket.write(GET_HEALTHZ);
    await until("the next connection answered", () => d.data().startsWith("HTTP/1.1 200"));
    expect(server.stats.connectionsRefused).toBe(1);
    expect(lines.filter((l) => l.kind === "refused")).toHaveLength(1);
  });
});

describe("request timeouts", () => {
  const limits = { headersTimeoutMs: 200, requestTimeoutMs: 400 };

  it("cuts a chunked report body that trickles in, with 408, while a long poll outlives it", async () => {
    const { server, port, log } = await start(limits);
    // A gateway's long poll, current with the log: it waits (1.5 s) for news.
    const poll = await open(port);
    poll.socket.write(
      `GET /v1/sync?epoch=7&version=${log.version} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`,
    );
    // A report whose body comes a byte at a time, for ever.
    const slow = await open(port);
    slow.socket.write(
      `POST /v1/report HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
    const drip = setInterval(() => {
      if (!slow.closed()) slow.socket.write("1\r\nx\r\n");
    }, 20);
    cleanups.push(() => clearInterval(drip));
    await until("the slow upload cut", () => slow.closed());
    expect(slow.data()).toMatch(/^HTTP\/1\.1 408 /);
    expect(server.stats.requestsTimedOut).toBe(1);
    expect(poll.closed()).toBe(false); // held longer than the request timeout, not cut
    expect(poll.data()).toBe("");
    await until("the long poll's answer", () => /\r\n\r\n[\s\S]+/.test(poll.data()));
    expect(poll.data()).toMatch(/^HTTP\/1\.1 200 /);
    expect(server.stats.requestsTimedOut).toBe(1);
  });

  it("cuts a request whose headers never end", async () => {
    const { server, port } = await start(limits);
    const slow = await open(port);
    slow.socket.write("POST /v1/report HTTP/1.1\r\nHost: x\r\n");
    const drip = setInterval(() => {
      if (!slow.closed()) slow.socket.write("X-Pad: y\r\n");
    }, 20);
    cleanups.push(() => clearInterval(drip));
    await until("the slow headers cut", () => slow.closed());
    expect(slow.data()).toMatch(/^HTTP\/1\.1 408 /);
    expect(server.stats.requestsTimedOut).toBe(1);
  });

  it("lets a whole report through that takes less than the timeout", async () => {
    const { port } = await start(limits);
    const c = await open(port);
    c.socket.write(
      `POST /v1/report HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Length: 3\r\n\r\nabc`,
    );
    // Not a valid report: the handler read it whole and answered (400), not the timeout.
    await until("the answer", () => /^HTTP\/1\.1 \d{3} /.test(c.data()));
    expect(c.data()).toMatch(/^HTTP\/1\.1 400 /);
  });
});

describe("aborted uploads", () => {
  /** `n` uploads the handler has started reading, each abandoned after three bytes of 1000. */
  async function abortUploads(port: number, n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      const c = await open(port);
      // Headers first; "100 Continue" says the handler has the request and reads its body.
      c.socket.write(
        `POST /v1/report HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n`,
      );
      await until("the upload accepted", () => c.data().startsWith("HTTP/1.1 100 "));
      c.socket.end("abc");
      c.socket.destroy();
    }
  }
  const aborted = (lines: LogLine[]) => lines.filter((l) => l.kind === "aborted");

  it("a burst of them is one line, then one line with the count, never a stack per abort", async () => {
    const ABORTS = 40;
    // An interval longer than any run of this test: the burst falls in one.
    const { server, port, lines } = await start({ logIntervalMs: 600_000 });
    await abortUploads(port, ABORTS);
    await until("every abort seen", () => server.stats.requestsAborted === ABORTS);
    expect(aborted(lines)).toHaveLength(1);
    expect(aborted(lines)[0]?.count).toBeUndefined();
    expect(lines.some((l) => l.err !== undefined)).toBe(false);
    expect(server.stats.handlerFailures).toBe(0);
    // The interval's count is logged when it ends (here: the server closes).
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    expect(aborted(lines)).toHaveLength(2);
    expect(aborted(lines)[1]?.count).toBe(ABORTS - 1);
    expect(lines.filter((l) => l.msg === "request handler failed")).toEqual([]);
  });

  it("a flood that goes on is one line with its count per interval", async () => {
    const { server, port, lines } = await start({ logIntervalMs: 100 });
    await abortUploads(port, 5);
    await until("the first interval's count", () => aborted(lines).some((l) => l.count !== undefined));
    const before = aborted(lines).length;
    await abortUploads(port, 5);
    await until("every abort counted", () => aborted(lines).reduce((n, l) => n + (l.count ?? 1), 0) === 10);
    expect(server.stats.requestsAborted).toBe(10);
    // However the uploads fell into intervals: never more lines than aborts' intervals allow.
    expect(aborted(lines).length).toBeLessThanOrEqual(before + 5);
    expect(lines.some((l) => l.err !== undefined)).toBe(false);
  });

  it("still logs a handler that fails, with its stack, once per interval", async () => {
    const boom = () => {
      throw new Error("bug");
    };
    const { server, port, lines } = await start({ logIntervalMs: 60_000 }, { "GET /boom": boom });
    const url = `http://127.0.0.1:${port}/boom`;
    for (let i = 0; i < 5; i++) expect((await fetch(url)).status).toBe(500);
    expect(server.stats.handlerFailures).toBe(5);
    const failed = lines.filter((l) => l.msg === "request handler failed");
    expect(failed).toHaveLength(1);
    expect(failed[0]?.err?.stack).toContain("Error: bug");
  });
});
