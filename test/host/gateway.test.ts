// Gateway mode end to end over real loopback sockets: the real filter, ORIGINAL_DST routing by
// x-gateway-destination-endpoint, the header guard, default cluster, SSE streaming chunk by chunk,
// the listener buffer limit (413 / backpressure) and the access log.
import { spawn } from "node:child_process";
import http from "node:http";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { startControlPlane } from "../../control-plane/src/app.ts";
import {
  bufferLimitProblem,
  ENVOY_DEFAULT_BUFFER_LIMIT_BYTES,
  shippedGatewayOptions,
} from "../../control-plane/src/cli/envoy-config.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
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
      /"POST \/v1\/chat\/completions HTTP\/1.1" 200 via_upstream upstream=127\.0\.0\.1:\d+ route=- duration_ms=/,
    );
  });

  it("routes by x-gateway-destination-endpoint like ORIGINAL_DST: one literal ip:port, else 503", async () => {
    const a = await upstream("a");
    const b = await upstream("b");
    gw = await startGateway({
      // A pass-through module: the real filter strips client destinations (test/filter).
      wasm: moduleFile("lifecycle"),
      threads: 1,
      clusters: { a: a.address },
      defaultCluster: "a",
    });
    const send = async (value?: string | string[]) => {
      const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
        const headers: http.OutgoingHttpHeaders = {};
        if (value !== undefined) headers["x-gateway-destination-endpoint"] = value;
        http.get(`${gw?.url}/x`, { headers }, resolve).on("error", reject);
      });
      let body = "";
      for await (const c of res) body += c;
      const entry = gw?.accessLog.at(-1);
      return `${res.statusCode} ${body} ${entry?.details} ${entry?.originalDstHostInvalid}`;
    };
    const port = b.address.split(":")[1];
    expect(await send(b.address)).toBe("200 b:GET:/x: via_upstream false");
    expect(await send()).toBe("200 a:GET:/x: via_upstream false");
    // IPv4-mapped IPv6 is a literal address too.
    expect(await send(`[::ffff:127.0.0.1]:${port}`)).toBe("200 b:GET:/x: via_upstream false");
    // Two headers: the first one counts (Envoy reads override_header[0]).
    expect(await send([b.address, a.address])).toBe("200 b:GET:/x: via_upstream false");
    const refused = "503 no healthy upstream no_healthy_upstream true";
    // A list (GAIE's fallback form) is not one address: Envoy's ORIGINAL_DST selects no host.
    expect(await send(`${b.address}, ${a.address}`)).toBe(refused);
    expect(await send(`${b.address},`)).toBe(refused);
    expect(await send("127.0.0.1")).toBe(refused);
    expect(await send(`[127.0.0.1]:${port}`)).toBe(refused);
    expect(await send(`::1:${port}`)).toBe(refused);
    expect(await send(`upstream.local:${port}`)).toBe(refused);
    expect(await send("127.0.0.1:65536")).toBe(refused);
    expect(b.requests).toHaveLength(3);
  });

  it("removes configured headers before the filter, like envoy.yaml's header_mutation guard", async () => {
    const a = await upstream("a");
    const b = await upstream("b");
    gw = await startGateway({
      wasm: moduleFile("lifecycle"),
      threads: 1,
      clusters: { a: a.address },
      defaultCluster: "a",
      removeRequestHeaders: ["x-gateway-destination-endpoint"],
    });
    for (const name of ["x-gateway-destination-endpoint", "X-Gateway-Destination-Endpoint"]) {
      const r = await fetch(`${gw.url}/guarded`, { headers: { [name]: b.address } });
      expect(await r.text()).toBe("a:GET:/guarded:");
    }
    // A near miss of the name is not removed (and, not being the ORIGINAL_DST header, not followed).
    const other = await fetch(`${gw.url}/other`, {
      headers: { "x-gateway-destination-endpoints": b.address },
    });
    expect(await other.text()).toBe("a:GET:/other:");
    expect(a.requests.at(-1)?.headers["x-gateway-destination-endpoints"]).toBe(b.address);
    expect(b.requests).toHaveLength(0);
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

  it("honours the listener buffer limit (413) for a filter that buffers", async () => {
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
    expect(r.headers.get("content-type")).toBe("text/plain");
    expect(b.requests).toHaveLength(0);
  });

  it("in watermark mode pauses the client past the limit instead of answering 413, then delivers the whole body", async () => {
    const b = await upstream("b");
    gw = await startGateway({
      // Headers return 1 without allow_on_headers_stop_iteration: StopAllIterationAndWatermark,
      // until the module's tick continues the stream.
      wasm: moduleFile("lifecycle"),
      pluginConfig: "reqHeaders=1;tick=50",
      bufferLimitBytes: 64 * 1024,
      threads: 1,
      clusters: { b: b.address },
      defaultCluster: "b",
    });
    const body = "y".repeat(1024 * 1024);
    const r = await fetch(`${gw.url}/stream`, { method: "POST", body });
    expect(r.status).toBe(200);
    expect(await r.text()).toBe(`b:POST:/stream:${body}`);
  });

  it("a long prompt: routed by the real filter with envoy.yaml's listener limit, 413 with Envoy's default", async () => {
    const engine = await startUpstream((req, body, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(req.url === "/metrics" ? "" : JSON.stringify({ bytes: body.length }));
    });
    ups.push(engine);
    const token = "long-prompt-token-0123456789";
    const cp = await startControlPlane(
      parseConfig(
        {
          authToken: token,
          pools: [{ name: "p", models: ["m"], endpoints: [{ address: engine.address, ranks: [0] }] }],
          routing: { failMode: "closed" },
          sync: { longPollMs: 200 },
        },
        "long-prompt",
        {},
      ),
      { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) },
    );
    try {
      const shipped = shippedGatewayOptions();
      expect(bufferLimitProblem(shipped.bufferLimitBytes, shipped.maxBodyBytes)).toBeNull();
      // Longer than Envoy's default limit (1 MiB), shorter than the filter's maxBodyBytes.
      const prompt = "p".repeat(2 * 1024 * 1024);
      expect(prompt.length).toBeGreaterThan(ENVOY_DEFAULT_BUFFER_LIMIT_BYTES);
      expect(prompt.length).toBeLessThan(shipped.maxBodyBytes);
      const body = JSON.stringify({ model: "m", prompt, max_tokens: 1 });
      const results: string[] = [];
      for (const bufferLimitBytes of [shipped.bufferLimitBytes, undefined]) {
        const { maxBodyBytes: _, ...options } = shipped;
        const g = await startGateway({
          wasm: filterFile(),
          threads: 1,
          vmId: "kvroute",
          rootId: "kvroute",
          pluginConfig: JSON.stringify({
            controlPlane: { cluster: "kvroute_control_plane", authority: cp.url.slice(7), token },
            tickMs: 20,
            failMode: "closed",
          }),
          clusters: { kvroute_control_plane: cp.url.slice(7) },
          ...options,
          bufferLimitBytes,
        });
        try {
          // The whole image is in: the gateway holds the control plane's newest version.
          cp.publish();
          const want = BigInt(cp.log.version);
          await waitFor(() => {
            const v = g.host.sharedData("kvr.sync");
            return v !== null && Buffer.from(v.value).readBigUInt64LE(8) >= want;
          }, 15_000);
          const r = await fetch(`${g.url}/v1/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body,
          });
          const entry = g.accessLog.at(-1);
          results.push(`${r.status} ${entry?.upstream} ${await r.text()}`);
        } finally {
          await g.close();
        }
      }
      expect(results).toEqual([`200 ${engine.address} {"bytes":${body.length}}`, "413 - Payload Too Large"]);
    } finally {
      await cp.stop();
    }
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

  it("runs from the command line (tsx host/cli.ts) with Envoy's listener and PluginConfig options", async () => {
    const b = await upstream("cli");
    const root = new URL("../../", import.meta.url).pathname;
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "host/cli.ts",
        "--wasm",
        moduleFile("lifecycle"),
        // Headers stop, the body buffers: kvroute's pattern.
        "--plugin-config",
        "reqHeaders=1;reqBody=1,0",
        "--threads",
        "1",
        "--cluster",
        `b=${b.address}`,
        "--default-cluster",
        "b",
        "--allow-on-headers-stop-iteration",
        "--buffer-limit-bytes",
        "1000",
        "--remove-request-header",
        "x-gateway-destination-endpoint",
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
      // The body reaches the filter while the headers wait (StopIteration kept), and the
      // 1000-byte listener limit answers 413 while it buffers.
      const big = await fetch(`${url}/v1/completions`, { method: "POST", body: "z".repeat(5000) });
      expect(big.status).toBe(413);
      await waitFor(() => out.includes('"POST /v1/completions HTTP/1.1" 413 request_payload_too_large'));
      // Under the limit the body goes on, and the guard removed the client's destination header.
      const small = await fetch(`${url}/small`, {
        method: "POST",
        headers: { "x-gateway-destination-endpoint": "127.0.0.1:1" },
        body: "ok",
      });
      expect(await small.text()).toBe("cli:POST:/small:ok");
    } finally {
      child.kill("SIGTERM");
    }
  });
});
