// KV event → visible in a gateway's shared data (DESIGN §9: p99 ≤ 50 ms): a simulated vLLM
// worker publishes real ZMQ KV events, the control plane indexes and publishes them, the
// gateway's leader long-polls them into shared data. Measured per request from the moment the
// engine's response is complete (its blocks are stored and their events sent) to the moment the
// prompt's deepest indexed chunk is in the gateway's bucket image, while background requests
// keep the path busy. Also reported: the same delay for the control plane alone (event →
// bucket image published), to split the budget.
//   tsx bench/sync.bench.ts [--quick]
import { pino } from "pino";
import { zmqKvEvents } from "../control-plane/sim/kv-events-config.ts";
import { startSim } from "../control-plane/sim/server.ts";
import { startControlPlane } from "../control-plane/src/app.ts";
import { parseConfig } from "../control-plane/src/config/load-config.ts";
import { chunkHashes, renderChat } from "../control-plane/src/core/kvroute-core.ts";
import type { SegmentTemplate } from "../control-plane/src/core/segment-template.ts";
import { decodeBucket } from "../control-plane/src/index/bucket-image.ts";
import { loadPoolTokens } from "../control-plane/src/pools/pool-tokens.ts";
import { startGateway } from "../host/gateway.ts";
import { freePortRange, QWEN3, simConfig } from "../test/sim/helpers.ts";
import { writeResult } from "./lib/results.ts";

const QUICK = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
const N = QUICK ? 60 : 300;
const TOKEN = "sync-bench-token-0123456789";
const BUCKETS = 4096;

const ports = await freePortRange(2);
const zmq = await freePortRange(20);
const sim = await startSim(
  simConfig({
    model: "qwen3",
    port: ports + 1,
    tokenizerDir: QWEN3,
    timeScale: 0.01,
    numGpuBlocks: 8192,
    topology: { mode: "internal", size: 2, sizeLocal: 2, startRank: 0 },
    kvEvents: zmqKvEvents({
      endpoint: `tcp://*:${zmq}`,
      replayEndpoint: `tcp://*:${zmq + 10}`,
      topic: "kv",
      bufferSteps: 1000,
    }),
  }),
);
const cfg = parseConfig(
  {
    authToken: TOKEN,
    pools: [
      {
        name: "q",
        models: ["qwen3"],
        tokenizer: QWEN3,
        endpoints: [
          {
            address: `127.0.0.1:${ports + 1}`,
            ranks: [0, 1],
            kvEvents: { endpoint: `tcp://*:${zmq}`, replayEndpoint: `tcp://*:${zmq + 10}`, topic: "kv" },
          },
        ],
      },
    ],
    cache: { buckets: BUCKETS, ways: 16 },
    sync: { longPollMs: 20_000 },
  },
  "bench",
  {},
);
const template = loadPoolTokens(cfg.pools[0] as (typeof cfg.pools)[number])
  .segmentTemplate as SegmentTemplate;
const cp = await startControlPlane(cfg, { listen: `127.0.0.1:${ports}`, logger: pino({ level: "silent" }) });
const gateway = await startGateway({
  wasm: new URL("../build/kvroute.wasm", import.meta.url).pathname,
  threads: 2,
  vmId: "kvroute",
  rootId: "kvroute",
  pluginConfig: JSON.stringify({
    controlPlane: { cluster: "cp", authority: `127.0.0.1:${ports}`, token: TOKEN },
    tickMs: 50,
    reportMs: 500,
  }),
  clusters: { cp: `127.0.0.1:${ports}` },
  port: 0,
  allowOnHeadersStopIteration: true,
});
while (gateway.host.sharedData("kvr.slots") === null) await new Promise((r) => setTimeout(r, 20));

const inBucket = (read: (key: string) => Uint8Array | undefined, h: bigint) => {
  const img = read(`kvr.b.${Number(h & BigInt(BUCKETS - 1))}`);
  return img !== undefined && decodeBucket(img).some((e) => e.hash === h);
};
const gatewayRead = (k: string) => {
  const v = gateway.host.sharedData(k);
  return v === null ? undefined : new Uint8Array(v.value);
};

async function send(system: string, rank: number) {
  const messages = [
    { role: "system", content: system },
    { role: "user", content: "hello" },
  ];
  const res = await fetch(`http://127.0.0.1:${ports + 1}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-data-parallel-rank": String(rank) },
    body: JSON.stringify({ model: "qwen3", messages, max_tokens: 1 }),
  });
  await res.text();
  return messages;
}

// Background load: other prompts streaming events through the same path.
let stop = false;
const background = (async () => {
  for (let i = 0; !stop; i++) await send(`background ${i} ${"filler text ".repeat(60)}`, i % 2);
})();

const toGateway: number[] = [];
const toControlPlane: number[] = [];
for (let i = 0; i < N; i++) {
  const system = `measured ${i}: ${"a system prompt long enough to fill several chunks ".repeat(8)}`;
  const messages = await send(system, i % 2);
  const t0 = performance.now();
  // The deepest chunk that lies inside complete 16-token blocks: the one the last stored block completes.
  const hashes = chunkHashes({
    model: "qwen3",
    stream: renderChat(template, messages).stream,
    chunkSize: 128,
  });
  const target = hashes[Math.max(0, hashes.length - 3)] as bigint;
  let seenCp = false;
  for (;;) {
    if (!seenCp && inBucket((k) => cp.log.get(k), target)) {
      toControlPlane.push(performance.now() - t0);
      seenCp = true;
    }
    if (inBucket(gatewayRead, target)) break;
    if (performance.now() - t0 > 5000) throw new Error(`chunk of request ${i} never reached the gateway`);
    await new Promise((r) => setImmediate(r));
  }
  toGateway.push(performance.now() - t0);
}
stop = true;
await background;

const pct = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] as number;
const out: string[] = [];
out.push(`KV event → visible, ${N} requests under background load (ms, from the engine's response)`, "");
out.push("| stage | p50 | p90 | p99 | max |");
out.push("|---|---:|---:|---:|---:|");
for (const [name, xs] of [
  ["control plane: bucket image published", toControlPlane],
  ["gateway: in shared data (DESIGN §9 target p99 ≤ 50 ms)", toGateway],
] as const) {
  out.push(
    `| ${name} | ${pct(xs, 0.5).toFixed(1)} | ${pct(xs, 0.9).toFixed(1)} | ${pct(xs, 0.99).toFixed(1)} | ${Math.max(...xs).toFixed(1)} |`,
  );
}
for (const l of out) console.log(l);
writeResult(
  "sync",
  `# KV event → a gateway's shared data\n\nGenerated by \`npx tsx bench/sync.bench.ts${QUICK ? " --quick" : ""}\`.\n\n${out.join("\n")}\n`,
);
await gateway.close();
await cp.stop();
await sim.close();
