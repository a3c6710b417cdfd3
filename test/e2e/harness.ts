// The whole product on loopback: simulated vLLM workers (real tokenizer, real ZMQ KV events),
// the control plane configured for them, and a gateway running build/kvroute.wasm in the Node
// Proxy-Wasm host. Each part can be stopped and restarted on the same ports, as in production.
import { randomUUID } from "node:crypto";
import { pino } from "pino";
import { zmqKvEvents } from "../../control-plane/sim/kv-events-config.ts";
import { type RunningSim, type SimConfig, startSim } from "../../control-plane/sim/server.ts";
import {
  type ControlPlane,
  type ControlPlaneOptions,
  startControlPlane,
} from "../../control-plane/src/app.ts";
import { envoyConfigFor, shippedClientAddressing } from "../../control-plane/src/cli/envoy-config.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { listenerRouting } from "../../host/envoy-listener.ts";
import { type Gateway, startGateway } from "../../host/gateway.ts";
import { readBoard } from "../filter/board.ts";
import { freePortRange, QWEN3, simConfig } from "../sim/helpers.ts";

export const MODEL = "qwen3";
export const TOKEN = "e2e-token-0123456789abcdef";
const WASM = new URL("../../build/kvroute.wasm", import.meta.url).pathname;

export interface Worker {
  port: number;
  zmq: number;
  sim: RunningSim | null;
}

export interface E2E {
  workers: Worker[];
  ranks: number;
  cp: ControlPlane | null;
  cpPort: number;
  gateway: Gateway;
  url: string;
  startWorker(i: number): Promise<void>;
  stopWorker(i: number): Promise<void>;
  startControlPlane(): Promise<ControlPlane>;
  stopControlPlane(): Promise<void>;
  /** Another gateway in front of the same workers (its own Envoy node id); closed by close(). */
  addGateway(nodeId: string): Promise<Gateway>;
  close(): Promise<void>;
}

export interface E2EOptions {
  workers?: number;
  /** Extra control-plane `routing` settings (e.g. a rank-header policy). */
  routing?: Record<string, unknown>;
  ranks?: number;
  failMode?: "open" | "closed";
  /** Start the gateway with the control plane unreachable (cold start). */
  noControlPlane?: boolean;
  /** Engine settings over the harness's (e.g. a CPU offload tier, a smaller GPU cache). */
  sim?: Partial<SimConfig>;
  /** Extra settings of the control plane's pool (e.g. LoRA adapters). */
  pool?: Record<string, unknown>;
  /** Extra control-plane `load` settings. */
  load?: Record<string, unknown>;
  /** Extra control-plane `cache` settings. */
  cache?: Record<string, unknown>;
  /**
   * Edits the gateway's Envoy config (envoy/envoy.yaml as the demo writes it) before the Node
   * gateway reads its routes, clusters and policy filters from it — e.g. the operator's RBAC.
   */
  envoy?: (cfg: Record<string, unknown>) => void;
  /** Control-plane options over the harness's (e.g. a logger to read, a config file to watch). */
  controlPlane?: Partial<ControlPlaneOptions>;
}

function workerConfig(w: Worker, ranks: number, over: Partial<SimConfig> = {}): SimConfig {
  return simConfig({
    model: MODEL,
    port: w.port,
    topology: { mode: "internal", size: ranks, sizeLocal: ranks, startRank: 0 },
    tokenizerDir: QWEN3,
    timeScale: 0.02,
    numGpuBlocks: 2048,
    eventEncoding: "map",
    kvEvents: zmqKvEvents({
      endpoint: `tcp://*:${w.zmq}`,
      replayEndpoint: `tcp://*:${w.zmq + 10}`,
      topic: "kv",
      bufferSteps: 1000,
    }),
    ...over,
  });
}

export async function startE2E(o: E2EOptions = {}): Promise<E2E> {
  const ranks = o.ranks ?? 2;
  const n = o.workers ?? 2;
  const ports = await freePortRange(n + 1);
  const workers: Worker[] = [];
  for (let i = 0; i < n; i++) workers.push({ port: ports + 1 + i, zmq: await freePortRange(20), sim: null });
  const cpPort = ports;
  const e = e2eHandle(o, workers, ranks, cpPort);
  for (const w of workers) await startFirstTime(w, ranks, o);
  if (!o.noControlPlane) await e.startControlPlane();
  e.gateway = await startE2EGateway(o, workers, cpPort, "e2e-gateway");
  e.url = e.gateway.url;
  return e;
}

function e2eConfig(o: E2EOptions, workers: Worker[], ranks: number) {
  return parseConfig(e2eRawConfig(o, workers, ranks), "e2e", {});
}

/** The control plane's configuration for these workers, as its YAML file would hold it. */
export function e2eRawConfig(o: E2EOptions, workers: Worker[], ranks: number): Record<string, unknown> {
  return {
    authToken: TOKEN,
    pools: [
      {
        name: "qwen",
        models: [MODEL],
        tokenizer: QWEN3,
        endpoints: workers.map((w) => ({
          address: `127.0.0.1:${w.port}`,
          ranks: Array.from({ length: ranks }, (_, r) => r),
          kvEvents: {
            endpoint: `tcp://*:${w.zmq}`,
            replayEndpoint: `tcp://*:${w.zmq + 10}`,
            topic: "kv",
          },
        })),
        ...o.pool,
      },
    ],
    routing: { failMode: o.failMode ?? "open", ...o.routing },
    cache: { buckets: 1024, ways: 16, ...o.cache },
    load: { scrapeIntervalMs: 100, unhealthyAfter: 2, ...o.load },
    sync: { longPollMs: 500 },
  };
}

/** The handle a test holds: workers and the control plane can be stopped and started again. */
function e2eHandle(o: E2EOptions, workers: Worker[], ranks: number, cpPort: number): E2E {
  const more: Gateway[] = [];
  const e: E2E = {
    workers,
    ranks,
    cp: null,
    cpPort,
    gateway: null as unknown as Gateway,
    url: "",
    async startWorker(i) {
      const w = workers[i] as Worker;
      // A restarted engine binds the ports its predecessor just closed; ZMQ releases them a
      // little after close() returns.
      for (let attempt = 0; ; attempt++) {
        try {
          w.sim = await startSim(workerConfig(w, ranks, o.sim));
          return;
        } catch (err) {
          if (attempt >= 40 || !String(err).includes("in use")) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    },
    async stopWorker(i) {
      const w = workers[i] as Worker;
      await w.sim?.close();
      w.sim = null;
    },
    async startControlPlane() {
      e.cp = await startControlPlane(e2eConfig(o, workers, ranks), {
        listen: `127.0.0.1:${cpPort}`,
        logger: pino({ level: "silent" }),
        ...o.controlPlane,
      });
      return e.cp;
    },
    async stopControlPlane() {
      await e.cp?.stop();
      e.cp = null;
    },
    async addGateway(nodeId) {
      const g = await startE2EGateway(o, workers, cpPort, nodeId);
      more.push(g);
      return g;
    },
    async close() {
      for (const g of more) await g.close();
      await e.gateway?.close();
      await e.stopControlPlane();
      for (let i = 0; i < workers.length; i++) await e.stopWorker(i);
    },
  };
  return e;
}

/**
 * A worker's first start. Ports found free can be taken by another process before the worker
 * binds them (another test suite on the machine): the first start moves to other ports;
 * restarts keep theirs.
 */
async function startFirstTime(w: Worker, ranks: number, o: E2EOptions): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      w.sim = await startSim(workerConfig(w, ranks, o.sim));
      return;
    } catch (err) {
      if (attempt >= 5 || !String(err).includes("in use")) throw err;
      w.port = await freePortRange(1);
      w.zmq = await freePortRange(20);
    }
  }
}

/** The Node host configured as envoy/envoy.yaml, in front of the workers. */
function startE2EGateway(o: E2EOptions, workers: Worker[], cpPort: number, nodeId: string): Promise<Gateway> {
  const envoyConfig = () => {
    const cfg = envoyConfigFor({
      listenPort: 0,
      adminPort: 0,
      controlPlane: `127.0.0.1:${cpPort}`,
      engines: workers.map((w) => `127.0.0.1:${w.port}`),
      token: TOKEN,
      wasm: WASM,
    });
    o.envoy?.(cfg);
    return cfg;
  };
  return startGateway({
    wasm: WASM,
    threads: 2,
    vmId: "kvroute",
    rootId: "kvroute",
    pluginConfig: JSON.stringify({
      controlPlane: {
        cluster: "kvroute_control_plane",
        authority: `127.0.0.1:${cpPort}`,
        token: TOKEN,
        timeoutMs: 3000,
      },
      tickMs: 20,
      reportMs: 100,
      failMode: o.failMode ?? "open",
    }),
    // envoy/envoy.yaml's one route to the engines' override_host cluster: routed requests go to
    // the endpoint the filter named, fail-open ones are balanced over every worker.
    ...listenerRouting(envoyConfig()),
    node: { id: nodeId },
    port: 0,
    allowOnHeadersStopIteration: true,
    // This gateway stands for envoy/envoy.yaml: it decides who the client is the same way.
    ...shippedClientAddressing(),
  });
}

export async function until(
  cond: () => boolean | Promise<boolean>,
  what: string,
  ms = 10_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The gateway (default: the first) holds the control plane's newest version. */
export async function synced(e: E2E, gateway: Gateway = e.gateway): Promise<void> {
  const cp = e.cp;
  if (cp === null) throw new Error("no control plane");
  cp.publish();
  const want = BigInt(cp.log.version);
  await until(() => {
    const v = gateway.host.sharedData("kvr.sync");
    return (
      v !== null &&
      Buffer.from(v.value).readBigUInt64LE(0) === cp.epoch &&
      Buffer.from(v.value).readBigUInt64LE(8) >= want
    );
  }, "gateway sync");
  // The leader's VM refreshes its view as it applies the sync; the other worker threads' VMs on
  // their next tick. Each VM rewrites its section of the board (kvr.gwb) every tick, after its
  // refresh: two new stamps from every VM after the sync landed and every VM routes with the new
  // images.
  const host = gateway.host;
  const stamps = () => new Map((readBoard(host)?.sections ?? []).map((x) => [x.thread, x.stamp]));
  const start = stamps();
  const changes = new Map<number, number>([...start.keys()].map((t) => [t, 0]));
  let last = start;
  await until(() => {
    const now = stamps();
    for (const [t, stamp] of now) if (last.get(t) !== stamp) changes.set(t, (changes.get(t) ?? 0) + 1);
    last = now;
    return [...changes.values()].every((n) => n >= 2);
  }, "every worker thread's VM refreshed");
}

export interface Routed {
  status: number;
  worker: number;
  rank: number;
  cached: number;
  promptTokens: number;
}

/** A chat through the gateway; which (worker, rank) served it and what it found cached. */
export async function chat(
  e: E2E,
  system: string,
  user: string,
  o: {
    model?: string;
    requestId?: string;
    maxTokens?: number;
    signal?: AbortSignal;
    headers?: Record<string, string>;
    /** The gateway to send it through (default: the first one). */
    via?: Gateway;
  } = {},
): Promise<Routed> {
  const gateway = o.via ?? e.gateway;
  // Its own request id: the access-log entry that names its upstream is found by it (the last
  // entry is another request's when several run at once).
  const requestId = o.requestId ?? randomUUID();
  const res = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-request-id": requestId,
      ...o.headers,
    },
    ...(o.signal ? { signal: o.signal } : {}),
    body: JSON.stringify({
      model: o.model ?? MODEL,
      messages: [
        { role: "system", content: system },
        { role: "user", content: user },
      ],
      max_tokens: o.maxTokens ?? 4,
    }),
  });
  const text = await res.text();
  let promptTokens = 0;
  try {
    promptTokens = (JSON.parse(text) as { usage?: { prompt_tokens?: number } }).usage?.prompt_tokens ?? 0;
  } catch {
    // not JSON: an error answer
  }
  const upstream = [...gateway.accessLog].reverse().find((a) => a.requestId === requestId)?.upstream ?? "";
  return {
    status: res.status,
    worker: e.workers.findIndex((w) => upstream.endsWith(`:${w.port}`)),
    rank: Number(res.headers.get("x-kvroute-sim-rank") ?? -1),
    cached: Number(res.headers.get("x-kvroute-sim-cached-tokens") ?? 0),
    promptTokens,
  };
}
