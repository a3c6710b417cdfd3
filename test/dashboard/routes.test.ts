// The dashboard's HTTP side on its own: the page and its assets with the right content types
// and caching headers, unknown assets as 404, and the status stream as well-formed
// server-sent events that stop costing anything once the last listener leaves.
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dashboardRoutes } from "../../control-plane/src/api/dashboard/routes.ts";
import { StatusStream } from "../../control-plane/src/api/dashboard/status-stream.ts";
import { createHttpServer, type Routes } from "../../control-plane/src/api/http-server.ts";
import { until } from "../until.ts";

let builds = 0;
const status = () => ({ n: ++builds, epoch: 5n, text: "line one\nline two" });

async function listen(routes: Routes): Promise<{ server: Server; url: string }> {
  const server = createHttpServer(routes, pino({ level: "silent" }));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}

interface SseEvent {
  event?: string;
  id?: string;
  data?: string;
  retry?: string;
}

/** An open event stream, read one event at a time; fields parsed per the SSE spec's field lines. */
class EventReader {
  readonly #abort = new AbortController();
  readonly #decoder = new TextDecoder();
  #reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  #buffer = "";
  res: Response | undefined;

  async open(url: string): Promise<this> {
    this.res = await fetch(url, { signal: this.#abort.signal });
    this.#reader = (this.res.body as ReadableStream<Uint8Array>).getReader();
    return this;
  }

  /** The next event, or null when the stream ended. */
  async next(): Promise<SseEvent | null> {
    let end = this.#buffer.indexOf("\n\n");
    while (end < 0) {
      const { value, done } = await (this.#reader as ReadableStreamDefaultReader<Uint8Array>).read();
      if (done) return null;
      this.#buffer += this.#decoder.decode(value, { stream: true });
      end = this.#buffer.indexOf("\n\n");
    }
    const block = this.#buffer.slice(0, end);
    this.#buffer = this.#buffer.slice(end + 2);
    const e: SseEvent = {};
    for (const line of block.split("\n")) {
      const colon = line.indexOf(":");
      const field = line.slice(0, colon) as keyof SseEvent;
      if (field in e) throw new Error(`field ${field} twice in one event: ${block}`);
      e[field] = line.slice(colon + 1).replace(/^ /, "");
    }
    return e;
  }

  /** The next event carrying data (a status document). */
  async nextDocument(): Promise<SseEvent> {
    for (;;) {
      const e = await this.next();
      if (e === null) throw new Error("the stream ended");
      if (e.data !== undefined) return e;
    }
  }

  close(): void {
    this.#abort.abort();
  }
}

/** Reads an event stream until `count` events with data arrived. */
async function readEvents(url: string, count: number): Promise<{ res: Response; events: SseEvent[] }> {
  const reader = await new EventReader().open(url);
  const events: SseEvent[] = [];
  while (events.filter((e) => e.data !== undefined).length < count) {
    const e = await reader.next();
    if (e === null) break;
    events.push(e);
  }
  reader.close();
  return { res: reader.res as Response, events };
}

describe("dashboard routes", () => {
  let server: Server;
  let url: string;

  beforeAll(async () => {
    ({ server, url } = await listen(dashboardRoutes(status, { intervalMs: 20 })));
  });
  afterAll(() => close(server));

  it("serves the page at / and /dashboard, and every asset it references with its content type", async () => {
    for (const path of ["/", "/dashboard"]) {
      const res = await fetch(url + path);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
      expect(await res.text()).toContain('<script type="module" src="dashboard/main.js">');
    }
    const html = await (await fetch(`${url}/dashboard`)).text();
    const refs = [...html.matchAll(/(?:src|href)="(dashboard\/[^"]+)"/g)].map((m) => m[1] as string);
    expect(refs).toEqual(["dashboard/favicon.svg", "dashboard/dashboard.css", "dashboard/main.js"]);
    const types: Record<string, string> = {
      svg: "image/svg+xml",
      css: "text/css; charset=utf-8",
      js: "text/javascript; charset=utf-8",
    };
    for (const ref of refs) {
      const res = await fetch(`${url}/${ref}`);
      expect(res.status, ref).toBe(200);
      expect(res.headers.get("content-type")).toBe(types[ref.split(".").pop() as string]);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    }
    // Every module the entry point imports is served as JavaScript too.
    const main = await (await fetch(`${url}/dashboard/main.js`)).text();
    const imports = [...main.matchAll(/from "\.\/([^"]+)"/g)].map((m) => m[1] as string);
    expect(imports.length).toBeGreaterThan(3);
    for (const name of imports) {
      const res = await fetch(`${url}/dashboard/${name}`);
      expect(res.status, name).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    }
  });

  it("revalidates with the ETag instead of sending the file again", async () => {
    const first = await fetch(`${url}/dashboard/main.js`);
    const etag = first.headers.get("etag") as string;
    expect(etag).toMatch(/^"[\w-]{22}"$/);
    expect(first.headers.get("cache-control")).toBe("no-cache");
    const again = await fetch(`${url}/dashboard/main.js`, { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe("");
  });

  it("answers unknown assets with 404 and writes with 405, as JSON errors", async () => {
    for (const path of [
      "/dashboard/nope.js",
      "/dashboard/x/main.js",
      "/dashboard/../app.ts",
      "/dashboard/index.html",
    ]) {
      const res = await fetch(url + path);
      expect(res.status, path).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("not_found");
    }
    const post = await fetch(`${url}/dashboard`, { method: "POST" });
    expect(post.status).toBe(405);
  });

  it("sends /dashboard/ back to /dashboard, where the page's relative URLs resolve", async () => {
    const res = await fetch(`${url}/dashboard/`, { redirect: "manual" });
    expect(res.status).toBe(301);
    expect(new URL(res.headers.get("location") as string, `${url}/dashboard/`).pathname).toBe("/dashboard");
  });

  it("streams the status document as well-formed server-sent events", async () => {
    const { res, events } = await readEvents(`${url}/v1/events/status`, 3);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(res.headers.get("cache-control")).toContain("no-cache");
    expect(events[0]).toEqual({ retry: "2000" });
    const docs = events.slice(1, 4);
    for (const e of docs) expect(e.event).toBe("status");
    const ids = docs.map((e) => Number(e.id));
    expect(ids[1]).toBeGreaterThan(ids[0] as number);
    expect(ids[2]).toBeGreaterThan(ids[1] as number);
    // One data line holding the whole JSON, bigints as strings, newlines escaped.
    const parsed = docs.map(
      (e) => JSON.parse(e.data as string) as { n: number; epoch: string; text: string },
    );
    expect(parsed[0]?.epoch).toBe("5");
    expect(parsed[0]?.text).toBe("line one\nline two");
    expect((parsed[1]?.n as number) > (parsed[0]?.n as number)).toBe(true);
  });
});

describe("status stream", () => {
  it("builds one document per tick for all listeners and stops when the last one leaves", async () => {
    let n = 0;
    const stream = new StatusStream(() => ({ n: ++n }), 20);
    const { server, url } = await listen({ "GET /s": stream.handle });
    try {
      // Once both responses have begun, both listeners are registered (the handler adds one
      // before the first byte leaves).
      const a = await new EventReader().open(`${url}/s`);
      const b = await new EventReader().open(`${url}/s`);
      expect(stream.clients).toBe(2);
      expect(stream.ticking).toBe(true);
      // b's first tick came after both joined, so a got that same build too (a reads past its
      // own first document and any ticks it had alone).
      await b.nextDocument(); // b's own first document
      const tickB = await b.nextDocument();
      const nB = JSON.parse(tickB.data as string).n as number;
      let tickA = await a.nextDocument();
      while ((JSON.parse(tickA.data as string).n as number) < nB) tickA = await a.nextDocument();
      expect(tickA).toEqual(tickB); // the same document, id included: one build for both
      a.close();
      b.close();
      await until("both listeners gone", () => stream.clients === 0);
      expect(stream.ticking).toBe(false); // no timer left running
    } finally {
      await close(server);
    }
  });
});
