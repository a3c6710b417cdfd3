// The control plane's whole ingest path against the simulator: a chat request runs on a
// chosen rank, the simulator publishes vLLM KV events over real ZMQ, the control plane
// decodes, detokenizes and hashes them, and /v1/sync then carries bucket images holding
// exactly the chunk hashes the filter computes for the same request.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { zmqKvEvents } from "../../control-plane/sim/kv-events-config.ts";
import type { RunningSim } from "../../control-plane/sim/server.ts";
import { startSim } from "../../control-plane/sim/server.ts";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { chunkHashes, renderChat } from "../../control-plane/src/core/kvroute-core.ts";
import type { SegmentTemplate } from "../../control-plane/src/core/segment-template.ts";
import { decodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { loadPoolTokens } from "../../control-plane/src/pools/pool-tokens.ts";
import { decodeSyncPage, SyncFlags } from "../../control-plane/src/sync/sync-codec.ts";
import { onFreePortBase, QWEN3, simConfig } from "../sim/helpers.ts";
import { until } from "../until.ts";

const MODEL = "qwen3";
const BUCKETS = 256;
let sim: RunningSim;
let cp: ControlPlane;
let template: SegmentTemplate;

beforeAll(async () => {
  // Ranks 0 and 1 publish on zmq, zmq+1 and replay on zmq+2, zmq+3 (vLLM's port + rank).
  let zmq = 0;
  sim = await onFreePortBase((base) => {
    zmq = base;
    return startSim(
      simConfig({
        model: MODEL,
        topology: { mode: "internal", size: 2, sizeLocal: 2, startRank: 0 },
        kvEvents: zmqKvEvents({
          endpoint: `tcp://*:${base}`,
          replayEndpoint: `tcp://*:${base + 2}`,
          topic: "kv",
          bufferSteps: 1000,
        }),
        eventEncoding: "map",
      }),
    );
  });
  const cfg = parseConfig(
    {
      pools: [
        {
          name: "qwen",
          models: [MODEL],
          tokenizer: QWEN3,
          endpoints: [
            {
              address: `127.0.0.1:${sim.ports[0]}`,
              ranks: [0, 1],
              kvEvents: { endpoint: `tcp://*:${zmq}`, replayEndpoint: `tcp://*:${zmq + 2}`, topic: "kv" },
            },
          ],
        },
      ],
      cache: { buckets: BUCKETS, ways: 16 },
      load: { scrapeIntervalMs: 100 },
      sync: { longPollMs: 200 },
    },
    "test",
    {},
  );
  const tokens = loadPoolTokens(cfg.pools[0] as (typeof cfg.pools)[number]);
  template = tokens.segmentTemplate as SegmentTemplate;
  cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
});

afterAll(async () => {
  await cp?.stop();
  await sim?.close();
});

async function bucketsBySlot(): Promise<Map<number, Set<bigint>>> {
  const out = new Map<number, Set<bigint>>();
  let version = 0;
  for (;;) {
    const res = await fetch(`${cp.url}/v1/sync?epoch=${cp.epoch}&version=${version}`);
    const page = decodeSyncPage(new Uint8Array(await res.arrayBuffer()));
    for (const e of page.entries) {
      if (!e.key.startsWith("kvr.b.")) continue;
      for (const entry of decodeBucket(e.value)) {
        for (const s of entry.slots) {
          const set = out.get(s) ?? new Set();
          set.add(entry.hash);
          out.set(s, set);
        }
      }
    }
    version = page.version;
    if ((page.flags & SyncFlags.more) === 0) return out;
  }
}

describe("control plane fed by the simulator's KV events", () => {
  it("publishes the chunk hashes of a chat that ran on rank 1, on rank 1's slot only", async () => {
    const messages = [
      { role: "system", content: "You are the routing oracle. Cite every rank you considered. ".repeat(12) },
      { role: "user", content: "Which rank holds this prefix? Answer with a number — 0 or 1. 🚦" },
    ];
    const res = await fetch(`http://127.0.0.1:${sim.ports[0]}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-data-parallel-rank": "1" },
      body: JSON.stringify({ model: MODEL, messages, max_tokens: 4 }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-kvroute-sim-rank")).toBe("1");
    await res.text();

    const rendered = renderChat(template, messages);
    expect(rendered.status).toBe("exact");
    const expected = [...chunkHashes({ model: MODEL, stream: rendered.stream, chunkSize: 128 })];
    expect(expected.length).toBeGreaterThan(4);
    const slot1 = cp.slots.present().find((s) => s.globalRank === 1)?.id as number;

    // The prompt's full blocks are stored: every complete chunk but possibly the last one or
    // two (the tail of the prompt sits in an incomplete block and is not announced).
    let got = new Map<number, Set<bigint>>();
    await until("rank 1's blocks in the published buckets", async () => {
      got = await bucketsBySlot();
      return (got.get(slot1)?.size ?? 0) >= expected.length - 2;
    });
    const onSlot1 = got.get(slot1) ?? new Set();
    const covered = expected.filter((h) => onSlot1.has(h));
    expect(covered.length).toBeGreaterThanOrEqual(expected.length - 2);
    // What is there is a prefix of the filter's chain, and nothing is on the other rank.
    expect(covered).toEqual(expected.slice(0, covered.length));
    const slot0 = cp.slots.present().find((s) => s.globalRank === 0)?.id as number;
    expect([...(got.get(slot0) ?? [])].filter((h) => expected.includes(h))).toEqual([]);
  });
});
