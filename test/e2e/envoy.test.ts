// The same stack with a real Envoy in front (envoy/envoy.yaml, build/kvroute.wasm), when an
// Envoy >= 1.35 binary is available: ENVOY_BIN=/path/to/envoy npm run test:envoy. No registry
// ships Envoy, so on machines without it this suite says so and does not run. Besides routing, it
// checks against Envoy itself what the Node host and the artifacts assume:
//   - the listener buffer limit: a prompt longer than Envoy's default 1 MiB is routed with the
//     shipped limit, answered 413 without it, and with allow_on_headers_stop_iteration off
//     (watermark mode) it is held back, not refused — and routed by load after a tick;
//   - allow_on_headers_stop_iteration: the body reaches the filter (no_body_access stays 0);
//   - failure_policy: the shipped file validates; fail_open together with failure_policy is refused;
//   - ORIGINAL_DST: a list in x-gateway-destination-endpoint is 503 original_dst_host_invalid,
//     as the Node host answers it, with the local reply's headers in the same order.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { zmqKvEvents } from "../../control-plane/sim/kv-events-config.ts";
import { type RunningSim, startSim } from "../../control-plane/sim/server.ts";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { writeEnvoyConfig } from "../../control-plane/src/cli/envoy-config.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { type Gateway, startGateway } from "../../host/gateway.ts";
import { moduleFile } from "../host/testing.ts";
import { freePortRange, QWEN3, simConfig } from "../sim/helpers.ts";

const ENVOY = process.env.ENVOY_BIN;
const WHY_SKIPPED =
  "set ENVOY_BIN to an Envoy >= 1.35 binary to run it (no package registry ships Envoy, so none is installed here)";
if (ENVOY === undefined) console.warn(`test/e2e/envoy.test.ts: not run — ${WHY_SKIPPED}`);

// biome-ignore lint/suspicious/noExplicitAny: the tests edit parsed Envoy JSON whose shape envoy.yaml fixes
type Json = Record<string, any>;

interface Raw {
  status: number;
  headers: string[];
  body: string;
}

/** A request over a plain socket, keeping the response headers in wire order. */
function request(url: string, method: string, headers: Record<string, string | string[]>, body?: string) {
  return new Promise<Raw>((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        text += c;
      });
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.rawHeaders.filter((_, i) => i % 2 === 0).map((h) => h.toLowerCase()),
          body: text,
        }),
      );
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** The order of content-length and content-type in a local reply (date/server are the codec's). */
const bodyHeaderOrder = (r: Raw) => r.headers.filter((h) => h === "content-length" || h === "content-type");

async function until(cond: () => Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.skipIf(ENVOY === undefined)(`real Envoy (${WHY_SKIPPED})`, () => {
  const TOKEN = "envoy-e2e-token-0123456789";
  const WASM = new URL("../../build/kvroute.wasm", import.meta.url).pathname;
  let sim: RunningSim;
  let cp: ControlPlane;
  let simPort = 0;
  const envoys: ChildProcess[] = [];
  let gateway: Gateway | null = null;

  interface RunningEnvoy {
    url: string;
    stat(name: string): Promise<number>;
  }

  /** envoy/envoy.yaml for these ports (as the demo writes it), then edited by `mutate`. */
  function config(listenPort: number, mutate: (cfg: Json) => void = () => {}): string {
    const path = writeEnvoyConfig({
      listenPort,
      adminPort: listenPort + 1,
      controlPlane: cp.url.slice("http://".length),
      engines: [`127.0.0.1:${simPort}`],
      token: TOKEN,
      wasm: WASM,
    });
    const cfg = JSON.parse(readFileSync(path, "utf8")) as Json;
    mutate(cfg);
    writeFileSync(path, JSON.stringify(cfg, null, 2));
    return path;
  }
  const hcm = (cfg: Json): Json => cfg.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const wasmOf = (cfg: Json): Json =>
    hcm(cfg).http_filters.find((f: Json) => f.name === "envoy.filters.http.wasm").typed_config.config;

  async function runEnvoy(path: string, listenPort: number, synced = true): Promise<RunningEnvoy> {
    const proc = spawn(
      ENVOY as string,
      ["-c", path, "--log-level", "warn", "--concurrency", "2", "--disable-hot-restart"],
      { stdio: "inherit" },
    );
    envoys.push(proc);
    const admin = `http://127.0.0.1:${listenPort + 1}`;
    const stat = async (name: string) => {
      const text = await (await fetch(`${admin}/stats?filter=${encodeURIComponent(`^${name}$`)}`)).text();
      return Number(/: (\d+)/.exec(text)?.[1] ?? 0);
    };
    await until(async () => (await fetch(`${admin}/ready`)).status === 200, "Envoy ready");
    if (synced) await until(async () => (await stat("wasmcustom.kvroute.sync.version")) > 0, "Envoy sync");
    return { url: `http://127.0.0.1:${listenPort}`, stat };
  }

  beforeAll(async () => {
    simPort = await freePortRange(1);
    const zmq = await freePortRange(20);
    sim = await startSim(
      simConfig({
        model: "qwen3",
        port: simPort,
        tokenizerDir: QWEN3,
        topology: { mode: "internal", size: 2, sizeLocal: 2, startRank: 0 },
        kvEvents: zmqKvEvents({
          endpoint: `tcp://*:${zmq}`,
          replayEndpoint: `tcp://*:${zmq + 10}`,
          topic: "kv",
          bufferSteps: 1000,
        }),
      }),
    );
    cp = await startControlPlane(
      parseConfig(
        {
          authToken: TOKEN,
          pools: [
            {
              name: "qwen",
              models: ["qwen3"],
              tokenizer: QWEN3,
              endpoints: [
                {
                  address: `127.0.0.1:${simPort}`,
                  ranks: [0, 1],
                  kvEvents: {
                    endpoint: `tcp://*:${zmq}`,
                    replayEndpoint: `tcp://*:${zmq + 10}`,
                    topic: "kv",
                  },
                },
              ],
            },
          ],
          sync: { longPollMs: 500 },
        },
        "envoy-e2e",
        {},
      ),
      { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) },
    );
  }, 60_000);

  afterAll(async () => {
    for (const e of envoys) e.kill("SIGTERM");
    await gateway?.close();
    await cp?.stop();
    await sim?.close();
  });

  const chatBody = (system: string, user: string) =>
    JSON.stringify({
      model: "qwen3",
      messages: [
        { role: "system", content: system },
        { role: "user", content: user },
      ],
      max_tokens: 4,
    });
  /** Longer than Envoy's default listener limit (1 MiB), shorter than the filter's maxBodyBytes (4 MiB). */
  const longPrompt = () => chatBody("You are terse. ", "word ".repeat(300_000));

  describe("the shipped envoy/envoy.yaml", () => {
    let envoy: RunningEnvoy;
    beforeAll(async () => {
      const port = await freePortRange(2);
      envoy = await runEnvoy(config(port), port);
    }, 60_000);

    it("validates (failure_policy set, no fail_open)", async () => {
      const port = await freePortRange(2);
      const r = spawnSync(ENVOY as string, [
        "--mode",
        "validate",
        "-c",
        config(port),
        "--disable-hot-restart",
      ]);
      expect(r.status, r.stderr.toString()).toBe(0);
    });

    it("routes a shared prefix to the rank that cached it, with the body seen by the filter", async () => {
      const system = "You are a precise assistant for GPU fleet operators. ".repeat(30);
      const post = (user: string) =>
        fetch(`${envoy.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: chatBody(system, user),
        });
      const first = await post("first");
      await first.text();
      expect(first.status).toBe(200);
      // The engine's KV events reach the control plane, which publishes a newer version to Envoy.
      const seen = await envoy.stat("wasmcustom.kvroute.sync.version");
      await until(
        async () => (await envoy.stat("wasmcustom.kvroute.sync.version")) > seen,
        "a new cache version",
      );
      const second = await post("second");
      await second.text();
      expect(second.headers.get("x-kvroute-sim-rank")).toBe(first.headers.get("x-kvroute-sim-rank"));
      expect(Number(second.headers.get("x-kvroute-sim-cached-tokens"))).toBeGreaterThan(0);
      expect(await envoy.stat("wasmcustom.kvroute.requests.no_body_access")).toBe(0);
    });

    it("ignores a client's destination header", async () => {
      const r = await request(
        `${envoy.url}/v1/chat/completions`,
        "POST",
        { "content-type": "application/json", "x-gateway-destination-endpoint": "127.0.0.1:1" },
        chatBody("s", "u"),
      );
      expect(r.status).toBe(200);
    });

    it("routes a prompt longer than 1 MiB: the listener limit holds it, no 413", async () => {
      const before = await envoy.stat("cluster.kvroute_original_dst.upstream_rq_total");
      const r = await request(
        `${envoy.url}/v1/chat/completions`,
        "POST",
        { "content-type": "application/json" },
        longPrompt(),
      );
      // The engine answers (an over-long prompt is its 400 to give); Envoy refused nothing.
      expect(r.status).not.toBe(413);
      expect(await envoy.stat("http.kvroute.downstream_rq_too_large")).toBe(0);
      expect(await envoy.stat("cluster.kvroute_original_dst.upstream_rq_total")).toBe(before + 1);
    });
  });

  it("without the listener limit the same prompt gets Envoy's 413, with the Node host's header order", async () => {
    const port = await freePortRange(2);
    const envoy = await runEnvoy(
      config(port, (cfg) => {
        delete cfg.static_resources.listeners[0].per_connection_buffer_limit_bytes;
      }),
      port,
    );
    const r = await request(
      `${envoy.url}/v1/chat/completions`,
      "POST",
      { "content-type": "application/json" },
      longPrompt(),
    );
    expect([r.status, r.body]).toEqual([413, "Payload Too Large"]);
    expect(await envoy.stat("http.kvroute.downstream_rq_too_large")).toBe(1);
    expect(bodyHeaderOrder(r)).toEqual(["content-length", "content-type"]);
  });

  it("without allow_on_headers_stop_iteration the prompt is held back (watermark), never refused, and routed by load", async () => {
    const port = await freePortRange(2);
    const envoy = await runEnvoy(
      config(port, (cfg) => {
        delete cfg.static_resources.listeners[0].per_connection_buffer_limit_bytes;
        delete wasmOf(cfg).allow_on_headers_stop_iteration;
      }),
      port,
    );
    const r = await request(
      `${envoy.url}/v1/chat/completions`,
      "POST",
      { "content-type": "application/json" },
      longPrompt(),
    );
    expect(r.status).not.toBe(413);
    expect(await envoy.stat("http.kvroute.downstream_rq_too_large")).toBe(0);
    expect(await envoy.stat("wasmcustom.kvroute.requests.no_body_access")).toBeGreaterThan(0);
  });

  it("refuses a Wasm filter that sets both the deprecated fail_open and failure_policy", async () => {
    const port = await freePortRange(2);
    const both = config(port, (cfg) => {
      wasmOf(cfg).fail_open = true;
    });
    const r = spawnSync(ENVOY as string, ["--mode", "validate", "-c", both, "--disable-hot-restart"]);
    expect(r.status).not.toBe(0);
  });

  it("ORIGINAL_DST: a list in the header is original_dst_host_invalid → 503, as in the Node host", async () => {
    // The router alone (no guard, no filter), so the header reaches ORIGINAL_DST as sent.
    const port = await freePortRange(2);
    const envoy = await runEnvoy(
      config(port, (cfg) => {
        hcm(cfg).http_filters = hcm(cfg).http_filters.filter(
          (f: Json) => f.name === "envoy.filters.http.router",
        );
      }),
      port,
      false,
    );
    gateway = await startGateway({ wasm: moduleFile("lifecycle"), threads: 1 });
    const one = `127.0.0.1:${simPort}`;
    for (const url of [envoy.url, gateway.url]) {
      const ok = await request(`${url}/v1/models`, "GET", { "x-gateway-destination-endpoint": one });
      expect(ok.status, url).toBe(200);
      const list = await request(`${url}/v1/models`, "GET", {
        "x-gateway-destination-endpoint": `${one}, ${one}`,
      });
      expect([list.status, list.body], url).toEqual([503, "no healthy upstream"]);
      expect(bodyHeaderOrder(list), url).toEqual(["content-length", "content-type"]);
    }
    expect(await envoy.stat("cluster.kvroute_original_dst.original_dst_host_invalid")).toBe(1);
  });
});
