// A control plane fed by two simulated vLLM workers (internal DP, 2 ranks each) over real
// ZMQ KV events and real /metrics scrapes: the dashboard's grid is 2 workers × 2 ranks.
import { pino } from "pino";
import { zmqKvEvents } from "../../control-plane/sim/kv-events-config.ts";
import { type RunningSim, startSim } from "../../control-plane/sim/server.ts";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { onFreePortBase, QWEN3, simConfig } from "../sim/helpers.ts";

export const MODEL = "qwen3";

export interface Fleet {
  sims: RunningSim[];
  cp: ControlPlane;
  stop(): Promise<void>;
}

export async function startFleet(): Promise<Fleet> {
  const sims: RunningSim[] = [];
  const endpoints = [];
  try {
    for (let w = 0; w < 2; w++) {
      // Ranks 0 and 1 publish on zmq, zmq+1 and replay on zmq+2, zmq+3 (vLLM's port + rank).
      const eventsAt = (zmq: number) => ({
        endpoint: `tcp://*:${zmq}`,
        replayEndpoint: `tcp://*:${zmq + 2}`,
        topic: "kv",
      });
      let kvEvents = eventsAt(0);
      const sim = await onFreePortBase((zmq) => {
        kvEvents = eventsAt(zmq);
        return startSim(
          simConfig({
            model: MODEL,
            seed: 7 + w,
            // Real time (a decode step ≈ 6 ms): a long request stays running long enough for
            // the 100 ms scrapes to see it; short chats still finish in tens of milliseconds.
            timeScale: 1,
            topology: { mode: "internal", size: 2, sizeLocal: 2, startRank: 0 },
            kvEvents: zmqKvEvents({ ...kvEvents, bufferSteps: 1000 }),
            eventEncoding: "map",
          }),
        );
      });
      sims.push(sim);
      endpoints.push({ address: `127.0.0.1:${sim.ports[0]}`, ranks: [0, 1], kvEvents });
    }
    const cfg = parseConfig(
      {
        pools: [{ name: "qwen", models: [MODEL], tokenizer: QWEN3, endpoints }],
        cache: { buckets: 256, ways: 16 },
        load: { scrapeIntervalMs: 100, scrapeTimeoutMs: 200, unhealthyAfter: 3 },
        sync: { longPollMs: 200 },
      },
      "test",
      {},
    );
    const cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
    return {
      sims,
      cp,
      async stop() {
        await cp.stop();
        await Promise.all(sims.map((s) => s.close()));
      },
    };
  } catch (err) {
    await Promise.all(sims.map((s) => s.close()));
    throw err;
  }
}

/** A chat on one worker's rank (vLLM's header), so that rank stores blocks and publishes events. */
export async function chat(sim: RunningSim, rank: number, text: string, maxTokens = 8): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${sim.ports[0]}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-data-parallel-rank": String(rank) },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: text }],
      max_tokens: maxTokens,
    }),
  });
  if (res.status !== 200) throw new Error(`sim answered ${res.status}: ${await res.text()}`);
  await res.text();
}
