// The fleet of the sharded-replica e2e test on loopback: one simulated vLLM worker per pool
// (RANKS DP ranks, real ZMQ KV events with a replay endpoint), control-plane replicas with
// `nats.shardPools` on a real nats-server, and gateways running build/kvroute.wasm in the Node
// host, each preferring one replica (stack.ts startStackGateway). Only a pool's owner
// subscribes to its worker; the others apply what the owner relays.
import { pino } from "pino";
import type { RunningSim } from "../../control-plane/sim/server.ts";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import type { Gateway } from "../../host/gateway.ts";
import { freePortRange, QWEN3 } from "../sim/helpers.ts";
import { startStackGateway, startWorker, TOKEN } from "./stack.ts";

export const RANKS = 2;
export const ANNOUNCE_MS = 300;

export const poolName = (p: number) => `pool-${p}`;
export const modelOf = (p: number) => `qwen3-${p}`;

export interface ShardStack {
  sims: RunningSim[];
  /** Null once killed. */
  replicas: Array<ControlPlane | null>;
  replicaIds: string[];
  gateways: Gateway[];
  kill(r: number): Promise<void>;
  close(): Promise<void>;
}

interface ShardStackOptions {
  pools: number;
  replicas: number;
  gateways: number;
  nats: string;
}

/**
 * The stack on free ports. Test files run in parallel and each picks its ports at random: another
 * file may bind one between the check and the listen (EADDRINUSE). Then what started is closed and
 * the stack starts again on other ports.
 */
export async function startShardStack(o: ShardStackOptions): Promise<ShardStack> {
  for (let attempt = 1; ; attempt++) {
    const started: Array<{ close(): Promise<void> }> = [];
    try {
      return await startOnce(o, started);
    } catch (err) {
      for (const s of started.reverse()) await s.close().catch(() => {});
      if (attempt >= 5 || !String(err).includes("in use")) throw err;
    }
  }
}

async function startOnce(
  o: ShardStackOptions,
  started: Array<{ close(): Promise<void> }>,
): Promise<ShardStack> {
  const base = await freePortRange(o.pools + o.replicas);
  const cpPorts = Array.from({ length: o.replicas }, (_, i) => base + i);
  const workerPorts = Array.from({ length: o.pools }, (_, i) => base + o.replicas + i);
  const zmq = await Promise.all(workerPorts.map(() => freePortRange(2 * RANKS + 10)));
  const sims: RunningSim[] = [];
  // A longer replay buffer than stack.ts's: a new owner replays what its pools' engines sent
  // before it subscribed.
  for (let p = 0; p < o.pools; p++) {
    const sim = await startWorker(workerPorts[p] as number, zmq[p] as number, modelOf(p), 10_000);
    sims.push(sim);
    started.push(sim);
  }
  const replicaIds = Array.from({ length: o.replicas }, (_, r) => `replica-${r}`);
  const replicas: Array<ControlPlane | null> = [];
  for (let r = 0; r < o.replicas; r++) {
    const cp = await startControlPlane(config(o.nats, replicaIds[r] as string, workerPorts, zmq), {
      listen: `127.0.0.1:${cpPorts[r]}`,
      logger: pino({ level: "silent" }),
    });
    replicas.push(cp);
    started.push({ close: () => cp.stop() });
  }
  const gateways: Gateway[] = [];
  const opts = { workers: o.pools, replicas: o.replicas, gateways: o.gateways, threads: 2 };
  for (let g = 0; g < o.gateways; g++) {
    const gateway = await startStackGateway(opts, g, g % o.replicas, cpPorts, workerPorts);
    gateways.push(gateway);
    started.push(gateway);
  }
  const kill = async (r: number) => {
    await replicas[r]?.stop();
    replicas[r] = null;
  };
  return {
    sims,
    replicas,
    replicaIds,
    gateways,
    kill,
    async close() {
      for (const g of gateways) await g.close();
      for (let r = 0; r < replicas.length; r++) await kill(r);
      for (const s of sims) await s.close();
    },
  };
}

function config(nats: string, replicaId: string, workerPorts: number[], zmq: number[]) {
  return parseConfig(
    {
      authToken: TOKEN,
      pools: workerPorts.map((port, p) => ({
        name: poolName(p),
        models: [modelOf(p)],
        tokenizer: QWEN3,
        endpoints: [
          {
            address: `127.0.0.1:${port}`,
            ranks: Array.from({ length: RANKS }, (_, k) => k),
            kvEvents: {
              endpoint: `tcp://*:${zmq[p]}`,
              replayEndpoint: `tcp://*:${(zmq[p] as number) + 10}`,
              topic: "kv",
            },
          },
        ],
      })),
      routing: { defaultPool: poolName(0) },
      cache: { buckets: 4096, ways: 16 },
      load: { scrapeIntervalMs: 60_000 },
      sync: { longPollMs: 500 },
      nats: { servers: [nats], replicaId, announceIntervalMs: ANNOUNCE_MS, shardPools: true },
    },
    "shard-e2e",
    {},
  );
}

export interface Answer {
  status: number;
  cached: number;
  promptTokens: number;
}

/** A chat to pool `p`'s model through gateway `g`: its status and what the engine found cached. */
export async function chat(
  s: ShardStack,
  g: number,
  p: number,
  system: string,
  user: string,
): Promise<Answer> {
  const res = await fetch(`${(s.gateways[g] as Gateway).url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: modelOf(p),
      messages: [
        { role: "system", content: system },
        { role: "user", content: user },
      ],
      max_tokens: 4,
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
