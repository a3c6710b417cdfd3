// Gateway mode end to end over real loopback sockets: the real filter, ORIGINAL_DST routing by
// x-gateway-destination-endpoint, default cluster, SSE streaming chunk by chunk, body limits and
// the access log.
import { spawn } from "node:child_process";
import http from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { type Gateway, startGateway } from "../../host/gateway.ts";
import { callbacks, filterFile, moduleFile, startUpstream, type Upstream, waitFor } from "./testing.ts";

let gw: Gateway | null = null;
const ups: Upstream[] = [];
afterEach(async () => {
  await gw?.close();
  gw = null;
  for (const u of ups.splice(0)) await u.close();
});

async function upstream(name: string): Promise<Upstream> {
  const u = await startUpstream((req, body, res) => {
    res.writeHead(200, { "content-type": "text/plain", "x-upstream": name });
    res.end(`${name}:${req.method}:${req.url}:${body}`);
  });
  ups.push(u);
  return u;
}

describe("gateway mode", () => {
  it("runs a request through the real kvroute filter to a loopback upstream", async () => {
    const b = await upstream("backend");
    const lines: string[] = [];
    gw = await startGateway({
      wasm: filterFile(),
      threads: 2,
      clusters: { backend: b.address },
      defaultCluster: "backend",
      accessLog: (line) => lines.push(line),
    });
    const r = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(r.status).toBe(200);
    expect(await r.text()).toBe(
      'backend:POST:/v1/chat/completions:{"model":"m","messages":[{"role":"user","content":"hi"}]}',
    );
    expect(b.requests[0]?.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(gw.accessLog).toHaveLength(1);
    expect(gw.accessLog[0]).toMatchObject({
      status: 200,
      upstream: b.address,
      method: "POST",
      thread: "worker_0",
    });
    expect(lines[0]).toMatch(
      /"POST \/v1\/chat\/completions HTTP\/1.1" 200 via_upstream upstream=127\.0\.0\.1:\d+ duration_ms=/,
    );
  });

  it("routes by x-gateway-destination-endpoint like ORIGINAL_DST: literal ip:port, first of a list", async () => {
    const a = await upstream("a");
    const b = await upstream("b");
    gw = await startGateway({
      // A pass-through module: the real filter strips client destinations (test/filter).
      wasm: moduleFile("lifecycle"),
      threads: 1,
      clusters: { a: a.address },
      defaultCluster: "a",
    });
    const first = await fetch(`${gw.url}/x`, {
      headers: { "x-gateway-destination-endpoint": `${b.address}, ${a.address}` },
    });
    expect(await first.text()).toBe("b:GET:/x:");
    const none = await fetch(`${gw.url}/y`);
    expect(await none.text()).toBe("a:GET:/y:");
    const bad = await fetch(`${gw.url}/z`, {
      headers: { "x-gateway-destination-endpoint": "upstream.local:80" },
    });
    expect(bad.status).toBe(503);
    expect(gw.accessLog.map((e) => `${e.status} ${e.details}`)).toEqual([
      "200 via_upstream",
      "200 via_upstream",
      "503 no_healthy_upstream",
    ]);
  });

  it("a destination written by the filter re-routes (route cache cleared on header write)", async () => {
    const a = await upstream("a");
    const b = await upstream("b");
    gw = await startGateway({
      wasm: moduleFile("lifecycle"),
      pluginConfig: `setDest=${b.address}`,
      threads: 1,
      clusters: { a: a.address },
      defaultCluster: "a",
    });
    const r = await fetch(`${gw.url}/routed`);
    expect(await r.text()).toBe("b:GET:/routed:");
    expect(a.requests).toHaveLength(0);
    expect(gw.accessLog[0]?.routeCacheClears).toBe(1);
  });

  it("without destination header and default cluster → 503; a dead upstream → 503 from the router", async () => {
    const dead = await startUpstream();
    const deadAddr = dead.address;
    await dead.close();
    gw = await startGateway({ wasm: moduleFile("lifecycle"), threads: 1 });
    expect((await fetch(`${gw.url}/`)).status).toBe(503);
    const r = await fetch(`${gw.url}/`, { headers: { "x-gateway-destination-endpoint": deadAddr } });
    expect(r.status).toBe(503);
    expect(await r.text()).toMatch(/^upstream connect error or disconnect\/reset before headers/);
  });

  it("streams SSE chunk by chunk: the client sees event 1 before the upstream writes event 2", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const sse = await startUpstream((_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: one\n\n");
      void gate.then(() => {
        res.write("data: two\n\n");
        res.end("data: [DONE]\n\n");
      });
    });
    ups.push(sse);
    gw = await startGateway({
      wasm: moduleFile("lifecycle"),
      threads: 1,
      clusters: { s: sse.address },
      defaultCluster: "s",
    });
    const res = await new Promise<http.IncomingMessage>((resolve) =>
      http.get(`${gw?.url}/v1/completions`, (r) => resolve(r)),
    );
    expect(res.headers["content-type"]).toBe("text/event-stream");
    const chunks: string[] = [];
    const firstSeen = new Promise<void>((resolve) => {
      res.on("data", (c: Buffer) => {
        chunks.push(c.toString());
        resolve();
      });
    });
    await firstSeen;
    expect(chunks.join("")).toBe("data: one\n\n");
    release();
    await new Promise<void>((r) => res.on("end", () => r()));
    expect(chunks.join("")).toBe("data: one\n\ndata: two\n\ndata: [DONE]\n\n");
    const bodies = callbacks(gw.host.logs()).filter((c) => c.startsWith("resp_body"));
    expect(bodies.length).toBeGreaterThanOrEqual(3);
    expect(bodies[0]).toMatch(/^resp_body 2 11 0 buf=0:data: one/);
    expect(bodies.at(-1)).toMatch(/ 1 buf=0:/);
  });

  it("honours the request-body buffer limit (413) for a filter that buffers", async () => {
    const b = await upstream("b");
    gw = await startGateway({
      wasm: moduleFile("lifecycle"),
      pluginConfig: "reqBody=1",
      bufferLimitBytes: 1000,
      threads: 1,
      clusters: { b: b.address },
      defaultCluster: "b",
    });
    const r = await fetch(`${gw.url}/big`, { method: "POST", body: "x".repeat(50_000) });
    expect(r.status).toBe(413);
    expect(await r.text()).toBe("Payload Too Large");
    expect(b.requests).toHaveLength(0);
  });

  it("a client that disconnects mid-stream still ends the stream with on_log → on_done → on_delete", async () => {
    let upstreamClosed = false;
    const sse = await startUpstream((req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: first\n\n");
      req.socket.on("close", () => {
        upstreamClosed = true;
      });
    });
    ups.push(sse);
    gw = await startGateway({
      wasm: moduleFile("lifecycle"),
      threads: 1,
      clusters: { s: sse.address },
      defaultCluster: "s",
    });
    await new Promise<void>((resolve) => {
      const req = http.get(`${gw?.url}/v1/completions`, (res) => {
        res.once("data", () => {
          req.destroy();
          resolve();
        });
      });
      req.on("error", () => {});
    });
    await waitFor(() => callbacks(gw?.host.logs() ?? []).some((c) => c.startsWith("delete")));
    const cbs = callbacks(gw.host.logs()).filter(
      (c) => !c.startsWith("vm_start") && !c.startsWith("configure"),
    );
    expect(cbs.map((c) => c.split(" ")[0])).toEqual([
      "create", // main-thread root
      "create", // worker root
      "create", // stream
      "req_headers",
      "resp_headers",
      "resp_body",
      "log",
      "done",
      "delete",
    ]);
    expect(gw.accessLog[0]?.details).toBe("downstream_remote_disconnect");
    await waitFor(() => upstreamClosed);
  });

  it("runs from the command line (tsx host/cli.ts) for the demo", async () => {
    const b = await upstream("cli");
    const root = new URL("../../", import.meta.url).pathname;
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "host/cli.ts",
        "--wasm",
        filterFile(),
        "--threads",
        "1",
        "--cluster",
        `b=${b.address}`,
        "--default-cluster",
        "b",
      ],
      { cwd: root, stdio: ["ignore", "pipe", "pipe"] },
    );
    try {
      let out = "";
      child.stdout.on("data", (c: Buffer) => {
        out += c.toString();
      });
      await waitFor(() => out.includes("listening "), 15_000);
      const url = /listening (\S+)/.exec(out)?.[1] as string;
      expect(await (await fetch(`${url}/hello`)).text()).toBe("cli:GET:/hello:");
      await waitFor(() => out.includes('"GET /hello HTTP/1.1" 200'));
    } finally {
      child.kill("SIGTERM");
    }
  });
});
