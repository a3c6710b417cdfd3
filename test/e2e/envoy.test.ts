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
//     as the Node host answers it, with the local reply's headers in the same order; override_host
//     (the shipped cluster) follows the header only to its own endpoints;
//   - routed and fail-open requests keep the route's policies: an RBAC and a local rate limit
//     after the Wasm filter with per-route config, and the route's timeout (the old two-route
//     shape let a denied client through);
//   - a plugin configuration update (the listener comes from an LDS file Envoy watches, and the
//     file is replaced): Envoy adds a root context to the running VMs (they keep their thread
//     slots), the new configuration leads and applies to new streams, and no request fails across
//     it (test/filter/reconfigure.test.ts in the Node host);
//   - FAIL_RELOAD: a trap fails its request with 503 and the next request gets a fresh VM — the
//     trap test module (as test/host/failure.test.ts). The shipped filter has no configuration
//     left that traps it: the 1 GiB body limit that did (Envoy's 1 GiB cap on a VM's memory) is
//     refused at on_configure, maxBodyBytes stops at 64 MiB, which routes within the cap
//     (test/filter/plugin-config.test.ts, in the Node host under the same cap); the filter's fresh
//     VM after a trap is tested in the Node host (test/filter/reload.test.ts);
//   - the report queue: while the control plane hangs, routing goes on, records past a full
//     outbox are dropped and counted (wasmcustom.kvroute.reports.dropped) instead of queueing
//     without bound, and what was kept arrives once it answers (test/filter/report-queue.test.ts).
// The configurations these write are checked against Envoy's API protos (and the plugin
// configurations against the shipped module) without a binary too, at the end of this file.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { zmqKvEvents } from "../../control-plane/sim/kv-events-config.ts";
import { type RunningSim, startSim } from "../../control-plane/sim/server.ts";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { writeEnvoyConfig } from "../../control-plane/src/cli/envoy-config.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { listenerRouting } from "../../host/envoy-listener.ts";
import { type Gateway, startGateway } from "../../host/gateway.ts";
import { createHost } from "../../host/index.ts";
import { validateEnvoy } from "../deploy/envoy-proto.ts";
import { moduleFile } from "../host/testing.ts";
import { freePortRange, QWEN3, simConfig } from "../sim/helpers.ts";
import { TRUSTED, twoRouteShape, withPolicies } from "./route-policy-config.ts";

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

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;
const LISTENER_TYPE = "type.googleapis.com/envoy.config.listener.v3.Listener";
const DISCOVERY_RESPONSE = "envoy.service.discovery.v3.DiscoveryResponse";

/** The kvroute Wasm filter's config (envoy.extensions.wasm.v3.PluginConfig) in a listener. */
const wasmFilterOf = (listener: Json): Json =>
  listener.filter_chains[0].filters[0].typed_config.http_filters.find(
    (f: Json) => f.name === "envoy.filters.http.wasm",
  ).typed_config.config;

/** Edits the plugin configuration: the JSON string Envoy hands the filter's on_configure. */
function editPlugin(listener: Json, edit: (plugin: Json) => void): void {
  const wasm = wasmFilterOf(listener);
  const plugin = JSON.parse(wasm.configuration.value) as Json;
  edit(plugin);
  wasm.configuration.value = JSON.stringify(plugin);
}

/**
 * The bootstrap with its listener served from an LDS file Envoy watches
 * (`dynamic_resources.lds_config.path_config_source`): the file holds a DiscoveryResponse, and
 * Envoy reloads it when another file is renamed onto its path (replaceFile).
 */
function fileLdsBootstrap(cfg: Json, ldsPath: string): { bootstrap: Json; listener: Json } {
  const bootstrap = structuredClone(cfg);
  const listener = bootstrap.static_resources.listeners[0] as Json;
  delete bootstrap.static_resources.listeners;
  bootstrap.dynamic_resources = {
    lds_config: { path_config_source: { path: ldsPath }, resource_api_version: "V3" },
  };
  return { bootstrap, listener };
}

const ldsResponse = (version: string, listener: Json): Json => ({
  version_info: version,
  resources: [{ "@type": LISTENER_TYPE, ...listener }],
});

/** Replaces a watched file the way Envoy notices: a complete file renamed onto the path. */
function replaceFile(path: string, content: Json): void {
  writeFileSync(`${path}.next`, JSON.stringify(content, null, 2));
  renameSync(`${path}.next`, path);
}

/** The second configuration of the update test: another gateway id, a 64 KiB body limit. */
function updatedPlugin(plugin: Json): void {
  plugin.gatewayId = "envoy-e2e-updated";
  plugin.maxBodyBytes = 64 * 1024;
}

/** The trap test module (test/host/modules/trap.ts) in the filter's place, under FAIL_RELOAD. */
function trapModuleInstead(cfg: Json, wasmFile: string): void {
  const wasm = wasmFilterOf(cfg.static_resources.listeners[0]);
  wasm.name = "trap";
  wasm.root_id = "trap";
  wasm.vm_config.vm_id = "trap";
  wasm.vm_config.code.local.filename = wasmFile;
  wasm.configuration.value = "{}";
  wasm.failure_policy = "FAIL_RELOAD";
}

/**
 * The filter's control-plane cluster through a relay on `port`, and calls that wait ten minutes:
 * a control plane that stops answering keeps the leader's report outstanding.
 */
function controlPlaneThrough(cfg: Json, port: number): void {
  const cluster = cfg.static_resources.clusters.find((c: Json) => c.name === "kvroute_control_plane");
  cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address = {
    address: "127.0.0.1",
    port_value: port,
  };
  editPlugin(cfg.static_resources.listeners[0], (p) => {
    p.controlPlane.timeoutMs = 600_000;
  });
}

/**
 * A TCP relay in front of the control plane that can hang: frozen, it accepts connections and
 * reads what the gateway sends (kept in `heard`) but forwards nothing either way — the control
 * plane as a gateway sees it when it stops answering. Thawing closes every connection it held
 * (the gateway's calls on them fail) and relays new ones again.
 */
class HangingRelay {
  frozen = false;
  heard = "";
  /** Report requests (POST /v1/report) relayed to the control plane. */
  reportsRelayed = 0;
  private readonly sockets = new Set<net.Socket>();
  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<HangingRelay> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const relay = new HangingRelay(server, (server.address() as net.AddressInfo).port);
    server.on("connection", (client) => relay.accept(client, target));
    return relay;
  }

  private accept(client: net.Socket, target: { host: string; port: number }): void {
    this.sockets.add(client);
    client.on("close", () => this.sockets.delete(client));
    client.on("error", () => {});
    const upstream = this.frozen ? null : net.connect(target.port, target.host);
    if (upstream !== null) {
      this.sockets.add(upstream);
      upstream.on("close", () => {
        this.sockets.delete(upstream);
        client.destroy();
      });
      upstream.on("error", () => client.destroy());
      upstream.on("data", (c: Buffer) => {
        if (!this.frozen) client.write(c);
      });
    }
    let tail = "";
    client.on("data", (c: Buffer) => {
      if (this.frozen || upstream === null) {
        this.heard += c.toString("latin1");
        return;
      }
      upstream.write(c);
      const text = tail + c.toString("latin1");
      this.reportsRelayed += text.split("POST /v1/report").length - 1;
      tail = text.slice(-16);
    });
    client.on("close", () => upstream?.destroy());
  }

  freeze(): void {
    this.frozen = true;
  }

  thaw(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    this.frozen = false;
  }

  close(): Promise<void> {
    this.thaw();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * One request on a connection of its own: after a listener update a new connection meets the
 * new filter chain, while a kept-alive one may still be served by the draining one.
 */
function once(url: string, method: string, headers: Record<string, string>, body?: string | Buffer) {
  return new Promise<Answer>((resolve, reject) => {
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        text += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** The filter's "configured root <id> (thread slot <n>, …)" lines in Envoy's log: one per on_configure. */
function rootsConfigured(log: string[]): Array<{ root: number; slot: number }> {
  return log.flatMap((line) => {
    const m = /kvroute: configured root (\d+) \(thread slot (\d+)/.exec(line);
    return m === null ? [] : [{ root: Number(m[1]), slot: Number(m[2]) }];
  });
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
      const before = await envoy.stat("cluster.kvroute_engines.upstream_rq_total");
      const r = await request(
        `${envoy.url}/v1/chat/completions`,
        "POST",
        { "content-type": "application/json" },
        longPrompt(),
      );
      // The engine answers (an over-long prompt is its 400 to give); Envoy refused nothing.
      expect(r.status).not.toBe(413);
      expect(await envoy.stat("http.kvroute.downstream_rq_too_large")).toBe(0);
      expect(await envoy.stat("cluster.kvroute_engines.upstream_rq_total")).toBe(before + 1);
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

  it("ORIGINAL_DST parses the header as the Node host does: a list is original_dst_host_invalid → 503, padding and + around the port are a port", async () => {
    // The router alone (no guard, no filter) on an ORIGINAL_DST route, so the header reaches the
    // cluster as sent; the Node gateway's shorthand routing is the same ORIGINAL_DST pick.
    const port = await freePortRange(2);
    const envoy = await runEnvoy(
      config(port, (cfg) => {
        twoRouteShape(cfg);
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
      for (const dest of [one, `127.0.0.1: ${simPort}`, `127.0.0.1:+${simPort} `]) {
        const ok = await request(`${url}/v1/models`, "GET", { "x-gateway-destination-endpoint": dest });
        expect(ok.status, `${url} ${dest}`).toBe(200);
      }
      const list = await request(`${url}/v1/models`, "GET", {
        "x-gateway-destination-endpoint": `${one}, ${one}`,
      });
      expect([list.status, list.body], url).toEqual([503, "no healthy upstream"]);
      expect(bodyHeaderOrder(list), url).toEqual(["content-length", "content-type"]);
    }
    expect(await envoy.stat("cluster.kvroute_original_dst.original_dst_host_invalid")).toBe(1);
  });

  it("override_host (the shipped cluster) follows the header only to its own endpoints, as the Node host does", async () => {
    // The router alone again, on envoy.yaml's one route: the cluster itself decides.
    const port = await freePortRange(2);
    const routerOnly = (cfg: Json) => {
      hcm(cfg).http_filters = hcm(cfg).http_filters.filter(
        (f: Json) => f.name === "envoy.filters.http.router",
      );
    };
    const envoy = await runEnvoy(config(port, routerOnly), port, false);
    const cfg = JSON.parse(readFileSync(config(port, routerOnly), "utf8")) as Json;
    const node = await startGateway({ wasm: moduleFile("lifecycle"), threads: 1, ...listenerRouting(cfg) });
    try {
      for (const url of [envoy.url, node.url])
        for (const dest of [
          `127.0.0.1:${simPort}`,
          "169.254.169.254:80",
          `127.0.0.1:1, 127.0.0.1:${simPort}`,
          "x",
        ]) {
          // Every one reaches the engine: named when it is the cluster's, balanced otherwise.
          const r = await request(`${url}/v1/models`, "GET", { "x-gateway-destination-endpoint": dest });
          expect(r.status, `${url} ${dest}`).toBe(200);
        }
    } finally {
      await node.close();
    }
  });

  describe("routed and fail-open requests keep the route's policies (as test/e2e/route-policies.test.ts in the Node host)", () => {
    const post = (url: string, headers: Record<string, string>, maxTokens = 4) =>
      request(
        `${url}/v1/chat/completions`,
        "POST",
        { "content-type": "application/json", ...headers },
        JSON.stringify({
          model: "qwen3",
          messages: [{ role: "user", content: "policy" }],
          max_tokens: maxTokens,
        }),
      );
    /** Fail-open: the plugin's control plane is a port where nothing listens, so no cache ever arrives. */
    const noControlPlane = (cfg: Json) => {
      const cluster = cfg.static_resources.clusters.find((c: Json) => c.name === "kvroute_control_plane");
      cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = 1;
    };

    for (const mode of ["routed", "fail-open"] as const) {
      it(`${mode}: RBAC after the Wasm filter denies what the route denies; the route's rate limit holds`, async () => {
        const port = await freePortRange(2);
        const envoy = await runEnvoy(
          config(port, (cfg) => {
            withPolicies({ rateLimit: 3 })(cfg);
            if (mode === "fail-open") noControlPlane(cfg);
          }),
          port,
          mode === "routed",
        );
        const denied: Record<string, string>[] = [
          {},
          { "x-client": "Trusted" },
          { "x-client": "trusted, trusted" },
        ];
        for (const headers of denied)
          expect((await post(envoy.url, headers)).status, JSON.stringify(headers)).toBe(403);
        const statuses: number[] = [];
        for (let i = 0; i < 5; i++) statuses.push((await post(envoy.url, TRUSTED)).status);
        expect(statuses).toEqual([200, 200, 200, 429, 429]);
        const failedOpen = await envoy.stat("wasmcustom.kvroute.requests.fail_open");
        if (mode === "routed") expect(failedOpen).toBe(0);
        else expect(failedOpen).toBe(8);
        expect(await envoy.stat("http.kvroute.rbac.denied")).toBe(3);
      });
    }

    it("routed: the route's timeout applies (504), where the old two-route shape had none", async () => {
      const port = await freePortRange(2);
      const envoy = await runEnvoy(config(port, withPolicies({ timeout: "0.02s" })), port);
      expect((await post(envoy.url, TRUSTED, 1)).status).toBe(200);
      const slow = await post(envoy.url, TRUSTED, 3000);
      expect([slow.status, slow.body]).toEqual([504, "upstream request timeout"]);
      expect(await envoy.stat("wasmcustom.kvroute.requests.fail_open")).toBe(0);
    });

    it("the old two-route shape let a client the route denies through once the filter routed it", async () => {
      const port = await freePortRange(2);
      const envoy = await runEnvoy(
        config(port, (cfg) => {
          withPolicies({})(cfg);
          twoRouteShape(cfg);
        }),
        port,
      );
      expect((await post(envoy.url, {})).status).toBe(200);
    });
  });

  interface LoggedEnvoy extends RunningEnvoy {
    /** Envoy's log so far, one line each (the Wasm logger at info: the modules' own lines are there). */
    log: string[];
    /** The sum of the admin stats whose names match `pattern` (RE2, as /stats?filter= takes it). */
    statSum(pattern: string): Promise<number>;
  }

  /**
   * Envoy with its log captured: the Wasm component at info, the rest at warning (echoed). Waits
   * until it is ready and, unless `synced` is false, until its filter synced; an Envoy that exits
   * first fails with its last log lines.
   */
  async function launchEnvoy(
    path: string,
    listenPort: number,
    o: { args?: string[]; synced?: boolean } = {},
  ): Promise<LoggedEnvoy> {
    const proc = spawn(
      ENVOY as string,
      [
        "-c",
        path,
        "--log-level",
        "warn",
        "--component-log-level",
        "wasm:info",
        "--disable-hot-restart",
        ...(o.args ?? ["--concurrency", "2"]),
      ],
      { stdio: ["ignore", "inherit", "pipe"] },
    );
    envoys.push(proc);
    const log: string[] = [];
    let partial = "";
    proc.stderr?.setEncoding("utf8");
    proc.stderr?.on("data", (chunk: string) => {
      const lines = (partial + chunk).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) {
        log.push(line);
        if (/\[(warning|error|critical)\]/.test(line)) process.stderr.write(`${line}\n`);
      }
    });
    const admin = `http://127.0.0.1:${listenPort + 1}`;
    const statSum = async (pattern: string) => {
      const text = await (await fetch(`${admin}/stats?filter=${encodeURIComponent(pattern)}`)).text();
      let n = 0;
      for (const m of text.matchAll(/: (\d+)$/gm)) n += Number(m[1]);
      return n;
    };
    const stat = (name: string) => statSum(`^${name.replace(/\./g, "\\.")}$`);
    await until(
      async () => proc.exitCode !== null || (await fetch(`${admin}/ready`)).status === 200,
      "Envoy ready",
    );
    if (proc.exitCode !== null)
      throw new Error(`Envoy exited (${proc.exitCode}):\n${log.slice(-20).join("\n")}`);
    if (o.synced !== false)
      await until(async () => (await stat("wasmcustom.kvroute.sync.version")) > 0, "Envoy sync");
    return { url: `http://127.0.0.1:${listenPort}`, stat, statSum, log };
  }

  /** The sum of a control-plane metric over its labels. */
  async function cpMetric(name: string): Promise<number> {
    const text = await (await fetch(`${cp.url}/metrics`)).text();
    let n = 0;
    for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)$`, "gm"))) n += Number(m[1]);
    return n;
  }
  /** Finished requests the gateways reported (as test/filter/manual-stack.ts counts them). */
  const finishedAtControlPlane = () => cpMetric("kvroute_routed_requests_total");
  const gatewaysPolling = async () =>
    (
      (await (await fetch(`${cp.url}/v1/status`)).json()) as {
        gateways: Array<{ id: string; polls: number }>;
      }
    ).gateways;

  const chatOnce = (url: string, system: string, user: string) =>
    once(
      `${url}/v1/chat/completions`,
      "POST",
      { "content-type": "application/json" },
      chatBody(system, user),
    );
  const filterRouted = (e: LoggedEnvoy) =>
    e.statSum("^wasmcustom\\.kvroute\\.requests\\.(prefix_hit|load_only|speculative_hit|pinned)$");

  describe("a plugin configuration update: a second root context in the running VMs", () => {
    it("the new configuration leads and applies to new streams, in the same VMs, and no request fails across it", async () => {
      const port = await freePortRange(2);
      const dir = mkdtempSync(join(tmpdir(), "kvroute-lds-"));
      const ldsPath = join(dir, "lds.json");
      const base = JSON.parse(readFileSync(config(port), "utf8")) as Json;
      const { bootstrap, listener } = fileLdsBootstrap(base, ldsPath);
      editPlugin(listener, (p) => {
        p.gatewayId = "envoy-e2e-first";
      });
      writeFileSync(ldsPath, JSON.stringify(ldsResponse("1", listener), null, 2));
      const bootstrapPath = join(dir, "envoy.json");
      writeFileSync(bootstrapPath, JSON.stringify(bootstrap, null, 2));
      const envoy = await launchEnvoy(bootstrapPath, port, {
        args: ["--concurrency", "2", "--drain-time-s", "1"],
      });
      await until(
        async () => (await gatewaysPolling()).some((g) => g.id === "envoy-e2e-first"),
        "the first configuration's leader polling",
      );
      const system = "You answer in one word. ".repeat(40);
      // A body past the new configuration's 64 KiB limit, well inside the first one's 4 MiB.
      const big = chatBody(system, "long question ".repeat(8000));
      expect(big.length).toBeGreaterThan(64 * 1024);
      const tooLarge = () => envoy.stat("wasmcustom.kvroute.body_too_large");
      const r0 = await once(
        `${envoy.url}/v1/chat/completions`,
        "POST",
        { "content-type": "application/json" },
        big,
      );
      expect(r0.status).toBe(200);
      expect(await tooLarge()).toBe(0);
      const rootsBefore = rootsConfigured(envoy.log);
      expect(rootsBefore.length).toBeGreaterThan(0);
      const updatesBefore = await envoy.stat("listener_manager.lds.update_success");
      const failOpenBefore = await envoy.stat("wasmcustom.kvroute.requests.fail_open");
      const routedBefore = await filterRouted(envoy);

      // Requests keep coming, each on a new connection, while the file is replaced.
      const statuses: number[] = [];
      let stop = false;
      const traffic = (async () => {
        for (let i = 0; !stop; i++) statuses.push((await chatOnce(envoy.url, system, `during ${i}`)).status);
      })();
      try {
        const updated = structuredClone(listener);
        editPlugin(updated, updatedPlugin);
        replaceFile(ldsPath, ldsResponse("2", updated));
        await until(
          async () => (await envoy.stat("listener_manager.lds.update_success")) > updatesBefore,
          "the LDS update applied",
        );
        await until(
          async () => (await gatewaysPolling()).some((g) => g.id === "envoy-e2e-updated"),
          "the new configuration's leader polling",
        );
        await until(async () => statuses.length >= 20, "requests across the update");
      } finally {
        stop = true;
      }
      await traffic;
      expect(
        statuses.every((s) => s === 200),
        `statuses ${statuses.join(",")}`,
      ).toBe(true);
      expect(await envoy.stat("wasmcustom.kvroute.requests.fail_open")).toBe(failOpenBefore);
      expect(await filterRouted(envoy)).toBeGreaterThanOrEqual(routedBefore + statuses.length);

      // The new configuration applies to new streams: the same body is over its limit now.
      const r1 = await once(
        `${envoy.url}/v1/chat/completions`,
        "POST",
        { "content-type": "application/json" },
        big,
      );
      expect(r1.status).toBe(200);
      expect(await tooLarge()).toBe(1);
      // A root context in the VMs that were there: the new configuration's on_configure ran in
      // VMs that already held a thread slot — both workers' at least (a VM keeps its slot across
      // root contexts; a new VM claims a new one). proxy-wasm-cpp-host also runs each new plugin
      // configuration once in a throwaway clone of the base VM (createWasm's configuration canary,
      // killed right after on_configure): at most one on_configure in a slot not seen before.
      const slotsBefore = new Set(rootsBefore.map((r) => r.slot));
      const rootsAfter = () => rootsConfigured(envoy.log).slice(rootsBefore.length);
      await until(
        async () => rootsAfter().filter((r) => slotsBefore.has(r.slot)).length >= 2,
        "the new root contexts in the running VMs (their on_configure in Envoy's log)",
      );
      expect(rootsAfter().filter((r) => !slotsBefore.has(r.slot)).length).toBeLessThanOrEqual(1);
    }, 120_000);
  });

  describe("FAIL_RELOAD: a trap fails its request, the next one gets a fresh VM", () => {
    it("the trap test module: 503 for the trapping request, then a fresh VM that ran _start, on_vm_start and on_configure again", async () => {
      const port = await freePortRange(2);
      const envoy = await launchEnvoy(
        config(port, (cfg) => trapModuleInstead(cfg, moduleFile("trap"))),
        port,
        { args: ["--concurrency", "1"], synced: false },
      );
      // The worker's VM is there and serving before the trap (so its start-up lines are logged).
      const ok = await once(`${envoy.url}/v1/models`, "GET", {});
      expect([ok.status, ok.headers["x-filter-ran"]]).toEqual([200, "1"]);
      const mark = envoy.log.length;
      const lifecycle = () =>
        envoy.log.slice(mark).flatMap((l) => /trap: (_start|on_vm_start|on_configure)/.exec(l)?.[1] ?? []);
      const trapped = await once(`${envoy.url}/v1/models`, "GET", { "x-trap": "1" });
      expect([trapped.status, trapped.body]).toEqual([503, ""]);
      // Within the reload backoff ([1, 1.5) s after the VM's last load) the failed VM answers 503;
      // after it, the next stream gets a fresh VM.
      const answers: Answer[] = [];
      await until(async () => {
        answers.push(await once(`${envoy.url}/v1/models`, "GET", {}));
        return answers.at(-1)?.status === 200;
      }, "a request served by a fresh VM");
      expect(answers.at(-1)?.headers["x-filter-ran"]).toBe("1");
      // The ones before it met the failed VM inside the backoff: 503, the filter never ran.
      for (const a of answers.slice(0, -1))
        expect([a.status, a.headers["x-filter-ran"]]).toEqual([503, undefined]);
      expect(await envoy.stat("wasm.trap.vm_reload_success")).toBe(1);
      // One fresh VM: fresh memory, _start again, then a root context of the current configuration.
      await until(async () => lifecycle().includes("on_configure"), "the fresh VM's start-up in Envoy's log");
      expect(lifecycle()).toEqual(["_start", "on_vm_start", "on_configure"]);
    }, 60_000);
  });

  describe("the report queue while the control plane hangs", () => {
    let relay: HangingRelay | null = null;
    afterAll(async () => relay?.close());

    it("routing goes on; records past a full outbox are dropped and counted, not queued; the kept ones arrive once it answers", async () => {
      const target = new URL(cp.url);
      relay = await HangingRelay.start({ host: target.hostname, port: Number(target.port) });
      const r = relay;
      const port = await freePortRange(2);
      // One worker: one outbox, so "full" is one VM's OUTBOX_BYTES.
      const envoy = await launchEnvoy(
        config(port, (cfg) => controlPlaneThrough(cfg, r.port)),
        port,
        { args: ["--concurrency", "1"] },
      );
      const dropped = () => envoy.stat("wasmcustom.kvroute.reports.dropped");
      expect(await dropped()).toBe(0);
      r.freeze();
      // The leader's next report hangs: from here on nobody drains the queue.
      await until(async () => r.heard.includes("POST /v1/report"), "a report held by the hung control plane");
      const finishedAtFreeze = await finishedAtControlPlane();
      // Each routed request leaves a speculative record of its prompt's chunks (~2 KiB for a long
      // prompt) and a finished one: a 512 KiB outbox overflows within a few hundred requests.
      const system = "The quick brown fox jumps over the lazy dog. ".repeat(900);
      let sent = 0;
      const batch = async (n: number) => {
        const answers = await Promise.all(
          Array.from({ length: n }, (_, i) => chatOnce(envoy.url, system, `q ${sent + i}`)),
        );
        sent += n;
        expect(answers.map((a) => a.status).filter((s) => s !== 200)).toEqual([]);
      };
      while ((await dropped()) === 0 && sent < 4000) await batch(16);
      const atOverflow = await dropped();
      expect(atOverflow).toBeGreaterThan(0);
      const beforeOverflow = sent;
      // Past a full outbox every further request's speculative record is dropped: the queue does
      // not grow with the load.
      const more = 200;
      for (let i = 0; i < more; i += 20) await batch(20);
      expect((await dropped()) - atOverflow).toBeGreaterThanOrEqual(more);
      expect(await finishedAtControlPlane()).toBe(finishedAtFreeze);

      // The control plane answers again: the hung calls fail, the leader drains, and what the
      // queue and the outbox kept arrives in the next reports — fewer finished records than
      // requests (some were dropped), at least the ones from before the overflow's first drops.
      // Reports go one at a time (the next only after the last one's answer): once the relay has
      // passed three, the control plane has applied the first two — the queue's batch, then the
      // outbox the worker flushed after that drain. (Other gateways of this suite report to the
      // same control plane, so its own report count says nothing about this one.)
      const relayed = r.reportsRelayed;
      r.thaw();
      await until(async () => r.reportsRelayed >= relayed + 3, "three reports after the thaw");
      const arrived = (await finishedAtControlPlane()) - finishedAtFreeze;
      expect(arrived).toBeGreaterThanOrEqual(Math.min(40, beforeOverflow));
      expect(arrived).toBeLessThan(sent);
      console.log(
        `report queue (Envoy): ${sent} requests while the control plane hung → ${await dropped()} records dropped, ` +
          `${arrived} finished records arrived after it answered again`,
      );
    }, 300_000);
  });
});

describe("the configurations the real-Envoy suite writes", () => {
  const template = () =>
    parse(readFileSync(new URL("../../envoy/envoy.yaml", import.meta.url), "utf8")) as Json;
  const BOOTSTRAP = "envoy.config.bootstrap.v3.Bootstrap";
  const WASM_FILE = new URL("../../build/kvroute.wasm", import.meta.url).pathname;
  /** null when the shipped module's on_configure accepts the plugin configuration; else its log. */
  function pluginProblem(listener: Json): string | null {
    const logs: string[] = [];
    try {
      createHost({
        wasm: WASM_FILE,
        mainThread: false,
        pluginConfig: wasmFilterOf(listener).configuration.value,
        logSink: (r) => logs.push(r.message),
      }).close();
      return null;
    } catch {
      return logs.join("\n") || "rejected";
    }
  }

  it("validate against Envoy's API protos: the listener from a watched LDS file, before and after the plugin update", () => {
    const { bootstrap, listener } = fileLdsBootstrap(template(), "/var/run/kvroute/lds.json");
    expect(validateEnvoy(BOOTSTRAP, bootstrap)).toEqual([]);
    expect(bootstrap.static_resources.listeners).toBeUndefined();
    expect(validateEnvoy(DISCOVERY_RESPONSE, ldsResponse("1", listener))).toEqual([]);
    const updated = structuredClone(listener);
    editPlugin(updated, updatedPlugin);
    expect(validateEnvoy(DISCOVERY_RESPONSE, ldsResponse("2", updated))).toEqual([]);
    expect(pluginProblem(updated)).toBeNull();
    expect(JSON.parse(wasmFilterOf(updated).configuration.value).maxBodyBytes).toBe(65536);
  });

  it("validate: the trap module under FAIL_RELOAD, the control plane through a relay; a 1 GiB body limit is refused", () => {
    // The shipped filter's old way into a trap: a body of maxBodyBytes = 1 GiB. Its on_configure
    // refuses that limit now; the largest it takes (64 MiB) routes within Envoy's 1 GiB VM cap.
    const listener = template().static_resources.listeners[0] as Json;
    editPlugin(listener, (p) => {
      p.maxBodyBytes = GIB;
    });
    expect(pluginProblem(listener)).toContain("maxBodyBytes: at most 67108864");
    editPlugin(listener, (p) => {
      p.maxBodyBytes = 64 * MIB;
    });
    expect(pluginProblem(listener)).toBeNull();
    const trap = template();
    trapModuleInstead(trap, "/work/build/test-modules/trap.wasm");
    expect(validateEnvoy(BOOTSTRAP, trap)).toEqual([]);
    const relayed = template();
    controlPlaneThrough(relayed, 4321);
    expect(validateEnvoy(BOOTSTRAP, relayed)).toEqual([]);
    expect(pluginProblem(relayed.static_resources.listeners[0])).toBeNull();
  });

  it("validate: the route policies (RBAC, local rate limit, timeout) and the old two-route shape", () => {
    const policies = template();
    withPolicies({ rateLimit: 3, timeout: "0.02s" })(policies);
    expect(validateEnvoy(BOOTSTRAP, policies)).toEqual([]);
    const old = template();
    withPolicies({})(old);
    twoRouteShape(old);
    expect(validateEnvoy(BOOTSTRAP, old)).toEqual([]);
  });
});
