// Simulated vLLM workers (real Qwen3 tokenizer, real ZMQ KV events) behind one control plane
// that serves both data planes at once: its endpoint picker, and an inline gateway — the Node
// host running build/kvroute.wasm, synced from the same control plane like any Envoy. Both
// report to the same handler, so they share in-flight accounting.
import { pino } from "pino";
import { zmqKvEvents } from "../../control-plane/sim/kv-events-config.ts";
import { type RunningSim, type SimConfig, startSim } from "../../control-plane/sim/server.ts";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { createHost, type Host } from "../../host/index.ts";
import { onFreePortBase, QWEN3, simConfig } from "../sim/helpers.ts";
import { EnvoyExtProc } from "./envoy-ext-proc.ts";
import { TOKEN, until } from "./stack.ts";

export const MODEL = "qwen3";
const WASM = new URL("../../build/kvroute.wasm", import.meta.url).pathname;

export interface SimWorker {
  port: number;
  zmq: number;
  sim: RunningSim;
}

export interface SimStack {
  workers: SimWorker[];
  cp: ControlPlane;
  client: EnvoyExtProc;
  /** The inline data plane: one worker VM (it leads and refreshes on every sync answer). */
  gateway: Host;
  close(): Promise<void>;
}

async function startWorker(ranks: number, over: Partial<SimConfig> = {}): Promise<SimWorker> {
  // HTTP on base, KV events on base+1+r, replay on base+11+r.
  return onFreePortBase(async (base) => {
    const sim = await startSim(
      simConfig({
        model: MODEL,
        port: base,
        topology: { mode: "internal", size: ranks, sizeLocal: ranks, startRank: 0 },
        tokenizerDir: QWEN3,
        timeScale: 0.02,
        numGpuBlocks: 2048,
        eventEncoding: "map",
        kvEvents: zmqKvEvents({
          endpoint: `tcp://*:${base + 1}`,
          replayEndpoint: `tcp://*:${base + 11}`,
          topic: "kv",
          bufferSteps: 1000,
        }),
        ...over,
      }),
    );
    return { port: base, zmq: base + 1, sim };
  });
}

export interface SimStackOptions {
  workers?: number;
  ranks?: number;
  /** Publish only when the test calls cp.publish() (to hold both data planes on one version). */
  manualPublish?: boolean;
  epp?: Record<string, unknown>;
  /** The plugin `seed` of both data planes (inline gateway and picker): same seed, same tie-breaks. */
  seed?: number;
  /** Engine settings over the stack's (e.g. LoRA adapters). */
  sim?: Partial<SimConfig>;
  /** Extra settings of the pool (e.g. `adapters`). */
  pool?: Record<string, unknown>;
  /** Extra top-level configuration sections (e.g. `tracing`). */
  config?: Record<string, unknown>;
}

export async function startSimStack(o: SimStackOptions = {}): Promise<SimStack> {
  const ranks = o.ranks ?? 2;
  const workers: SimWorker[] = [];
  for (let i = 0; i < (o.workers ?? 2); i++) workers.push(await startWorker(ranks, o.sim));
  const cfg = parseConfig(
    {
      authToken: TOKEN,
      pools: [
        {
          name: "qwen",
          models: [MODEL],
          tokenizer: QWEN3,
          endpoints: workers.map((w) => ({
            address: `127.0.0.1:${w.port}`,
            ranks: Array.from({ length: ranks }, (_, r) => r),
            kvEvents: { endpoint: `tcp://*:${w.zmq}`, replayEndpoint: `tcp://*:${w.zmq + 10}`, topic: "kv" },
          })),
          ...o.pool,
        },
      ],
      // Speculative routes outlive the test: their expiry cannot fall between two data planes' reads.
      cache: { buckets: 1024, ways: 16, speculativeTtlMs: 600_000 },
      load: { scrapeIntervalMs: 100, unhealthyAfter: 2 },
      sync: { longPollMs: 500 },
      epp: { ...(o.seed === undefined ? {} : { seed: o.seed }), ...o.epp },
      ...o.config,
    },
    "epp-sim",
    {},
  );
  const cp = await startControlPlane(cfg, {
    listen: "127.0.0.1:0",
    eppListen: "127.0.0.1:0",
    logger: pino({ level: "silent" }),
    ...(o.manualPublish ? { publishIntervalMs: 3_600_000 } : {}),
  });
  if (cp.epp === null) throw new Error("no endpoint picker");
  const cpHost = new URL(cp.url).host;
  const gateway = createHost({
    wasm: WASM,
    threads: 1,
    mainThread: false,
    vmId: "kvroute",
    rootId: "kvroute",
    pluginConfig: JSON.stringify({
      controlPlane: { cluster: "kvroute_control_plane", authority: cpHost, token: TOKEN, timeoutMs: 5000 },
      tickMs: 20,
      reportMs: 100,
      gatewayId: "inline-gateway",
      ...(o.seed === undefined ? {} : { seed: o.seed }),
    }),
    clusters: { kvroute_control_plane: cpHost },
    allowOnHeadersStopIteration: true,
    bufferLimitBytes: cfg.routing.maxBodyBytes + (1 << 20),
  });
  const client = new EnvoyExtProc(cp.epp.address);
  return {
    workers,
    cp,
    client,
    gateway,
    async close() {
      client.close();
      gateway.close();
      await cp.stop();
      for (const w of workers) await w.sim.close();
    },
  };
}

/** Both data planes hold exactly the control plane's newest version. */
export async function bothSynced(s: SimStack): Promise<bigint> {
  s.cp.publish();
  const want = BigInt(s.cp.log.version);
  const version = (v: { value: Uint8Array } | null) =>
    v === null ? -1n : Buffer.from(v.value.buffer, v.value.byteOffset, v.value.byteLength).readBigUInt64LE(8);
  await until(
    () =>
      s.cp.epp?.filter.cacheVersion()?.version === want && version(s.gateway.sharedData("kvr.sync")) === want,
    `both data planes at version ${want}`,
  );
  return want;
}

/** KV blocks the control plane has indexed from the engines' events, over every slot. */
export function storedBlocks(cp: ControlPlane): number {
  let n = 0;
  for (const sl of cp.slots.present()) n += cp.index.slot(sl.key)?.stats.storedBlocks ?? 0;
  return n;
}
