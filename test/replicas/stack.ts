// The fleet of the replica e2e test on loopback: simulated vLLM workers (4 DP ranks each, real
// ZMQ KV events that every replica subscribes to), one or more control-plane replicas (sharing
// reports over NATS when there are several), and gateways running build/kvroute.wasm in the Node
// host, each reaching the replicas through one cluster with its preferred replica at priority 0,
// the others at priority 1, and active health checks on /readyz (host/upstream-cluster.ts).

import { pino } from "pino";
import { zmqKvEvents } from "../../control-plane/sim/kv-events-config.ts";
import { type RunningSim, startSim } from "../../control-plane/sim/server.ts";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { type Gateway, startGateway } from "../../host/gateway.ts";
import { readBoard } from "../filter/board.ts";
import { freePortRange, QWEN3, simConfig } from "../sim/helpers.ts";

export const MODEL = "qwen3";
export const TOKEN = "replica-e2e-token-0123456789";
const WASM = new URL("../../build/kvroute.wasm", import.meta.url).pathname;
export const RANKS = 4;
export const REPORT_MS = 100;

export interface StackOptions {
  workers: number;
  replicas: number;
  gateways: number;
  threads: number;
  /** NATS server URL; required with more than one replica. */
  nats?: string;
}

export interface Stack {
  sims: RunningSim[];
  workerPorts: number[];
  /** Null once stopped. */
  replicas: Array<ControlPlane | null>;
  gateways: Gateway[];
  /** Which replica each gateway prefers (priority 0 in its cluster). */
  preferred: number[];
  stopReplica(i: number): Promise<void>;
  close(): Promise<void>;
}

export async function startStack(o: StackOptions): Promise<Stack> {
  const base = await freePortRange(o.workers + o.replicas);
  const workerPorts = Array.from({ length: o.workers }, (_, i) => base + o.replicas + i);
  const cpPorts = Array.from({ length: o.replicas }, (_, i) => base + i);
  const zmq = await Promise.all(workerPorts.map(() => freePortRange(2 * RANKS + 10)));
  const sims: RunningSim[] = [];
  for (let i = 0; i < o.workers; i++)
    sims.push(await startWorker(workerPorts[i] as number, zmq[i] as number));
  const replicas: Array<ControlPlane | null> = [];
  for (let r = 0; r < o.replicas; r++) {
    replicas.push(
      await startControlPlane(replicaConfig(o, r, workerPorts, zmq), {
        listen: `127.0.0.1:${cpPorts[r]}`,
        logger: pino({ level: "silent" }),
      }),
    );
  }
  const preferred = Array.from({ length: o.gateways }, (_, g) => g % o.replicas);
  const gateways: Gateway[] = [];
  for (let g = 0; g < o.gateways; g++)
    gateways.push(await startStackGateway(o, g, preferred[g] as number, cpPorts, workerPorts));
  const stopReplica = async (i: number) => {
    await replicas[i]?.stop();
    replicas[i] = null;
  };
  return {
    sims,
    workerPorts,
    replicas,
    gateways,
    preferred,
    stopReplica,
    async close() {
      for (const g of gateways) await g.close();
      for (let i = 0; i < replicas.length; i++) await stopReplica(i);
      for (const s of sims) await s.close();
    },
  };
}

/** A simulated vLLM worker of RANKS ranks on `port`, its KV events (and replay) on ZMQ from `zmq`. */
export function startWorker(
  port: number,
  zmq: number,
  model = MODEL,
  bufferSteps = 1000,
): Promise<RunningSim> {
  return startSim(
    simConfig({
      model,
      port,
      topology: { mode: "internal", size: RANKS, sizeLocal: RANKS, startRank: 0 },
      tokenizerDir: QWEN3,
      timeScale: 0.1,
      numGpuBlocks: 4096,
      eventEncoding: "map",
      kvEvents: zmqKvEvents({
        endpoint: `tcp://*:${zmq}`,
        replayEndpoint: `tcp://*:${zmq + 10}`,
        topic: "kv",
        bufferSteps,
      }),
    }),
  );
}

function replicaConfig(o: StackOptions, r: number, workerPorts: number[], zmq: number[]) {
  return parseConfig(
    {
      authToken: TOKEN,
      pools: [
        {
          name: "qwen",
          models: [MODEL],
          tokenizer: QWEN3,
          endpoints: workerPorts.map((port, i) => ({
            address: `127.0.0.1:${port}`,
            ranks: Array.from({ length: RANKS }, (_, k) => k),
            kvEvents: {
              endpoint: `tcp://*:${zmq[i]}`,
              replayEndpoint: `tcp://*:${(zmq[i] as number) + 10}`,
              topic: "kv",
            },
          })),
        },
      ],
      cache: { buckets: 4096, ways: 16 },
      // Rare scrapes: a request stays in the gateways' reported in-flight until it answers
      // (wire-format §4.5 "unseen"), so the in-flight check has something to compare.
      load: { scrapeIntervalMs: 60_000 },
      sync: { longPollMs: 500 },
      ...(o.replicas > 1
        ? { nats: { servers: [o.nats], replicaId: `replica-${r}`, announceIntervalMs: 500 } }
        : {}),
    },
    "replica-e2e",
    {},
  );
}

/** Gateway g: the replicas in one cluster, its preferred one at priority 0, health-checked on /readyz (also the sharded stack's, shard-stack.ts). */
export function startStackGateway(
  o: StackOptions,
  g: number,
  first: number,
  cpPorts: number[],
  workerPorts: number[],
): Promise<Gateway> {
  const endpoints = cpPorts.map((port, r) => ({
    address: `127.0.0.1:${port}`,
    priority: r === first ? 0 : 1,
  }));
  return startGateway({
    wasm: WASM,
    threads: o.threads,
    vmId: "kvroute",
    rootId: "kvroute",
    pluginConfig: JSON.stringify({
      controlPlane: {
        cluster: "kvroute_control_plane",
        authority: "kvroute-control-plane:9090",
        token: TOKEN,
        timeoutMs: 3000,
      },
      gatewayId: `gateway-${g}`,
      tickMs: 20,
      reportMs: REPORT_MS,
      failMode: "open",
    }),
    clusters: {
      kvroute_control_plane: {
        endpoints,
        healthCheck: {
          path: "/readyz",
          intervalMs: 100,
          timeoutMs: 500,
          unhealthyThreshold: 2,
          healthyThreshold: 1,
        },
      },
      fallback: `127.0.0.1:${workerPorts[0]}`,
    },
    defaultCluster: "fallback",
    node: { id: `gateway-${g}` },
    port: 0,
    allowOnHeadersStopIteration: true,
  });
}

export interface Answer {
  status: number;
  cached: number;
  promptTokens: number;
}

/** A chat through gateway `g`: its status and what the engine found cached. */
export async function chat(
  s: Stack,
  g: number,
  system: string,
  user: string,
  maxTokens = 4,
): Promise<Answer> {
  const res = await fetch(`${(s.gateways[g] as Gateway).url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: MODEL,
      messages: [
        { role: "system", content: system },
        { role: "user", content: user },
      ],
      max_tokens: maxTokens,
    }),
  });
  const text = await res.text();
  let promptTokens = 0;
  try {
    promptTokens = (JSON.parse(text) as { usage?: { prompt_tokens?: number } }).usage?.prompt_tokens ?? 0;
  } catch {
    // not JSON: an error answer
  }
  return {
    status: res.status,
    cached: Number(res.headers.get("x-kvroute-sim-cached-tokens") ?? 0),
    promptTokens,
  };
}

/** The gateway's own unseen in-flight requests per slot: the sum over its VMs' board sections (wire-format §4.5). */
export function gatewayInflight(gw: Gateway): Map<number, number> {
  const out = new Map<number, number>();
  for (const section of readBoard(gw.host)?.sections ?? [])
    for (const e of section.entries) out.set(e.slot, (out.get(e.slot) ?? 0) + e.unseen);
  return out;
}
