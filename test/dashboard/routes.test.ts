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

/** Reads an event stream until `count` events with data arrived; parses per the SSE spec's field lines. */
async function readEvents(url: string, count: number): Promise<{ res: Response; events: SseEvent[] }> {
  const abort = new AbortController();
  const res = await fetch(url, { signal: abort.signal });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  const events: SseEvent[] = [];
  let buffer = "";
  while (events.filter((e) => e.data !== undefined).length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const e: SseEvent = {};
      for (const line of block.split("\n")) {
        const colon = line.indexOf(":");
        const field = line.slice(0, colon) as keyof SseEvent;
        if (field in e) throw new Error(`field ${field} twice in one event: ${block}`);
        e[field] = line.slice(colon + 1).replace(/^ /, "");
      }
      events.push(e);
      end = buffer.indexOf("\n\n");
    }
  }
  abort.abort();
  return { res, events };
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
      const a = readEvents(`${url}/s`, 4);
      const b = readEvents(`${url}/s`, 4);
      const [ra, rb] = await Promise.all([a, b]);
      // Both saw ticks from the same builds (after each one's own first document).
      const ticksA = ra.events.slice(2).map((e) => JSON.parse(e.data as string).n);
      const ticksB = rb.events.slice(2).map((e) => JSON.parse(e.data as string).n);
      expect(ticksA.filter((x) => ticksB.includes(x)).length).toBeGreaterThan(0);
      expect(stream.ticking).toBe(true);
      await until("both listeners gone", () => stream.clients === 0);
      expect(stream.ticking).toBe(false); // no timer left running
    } finally {
      await close(server);
    }
  });
});
