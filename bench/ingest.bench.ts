// Control-plane KV-event ingest, the whole path on one core: frames → sequence check → the
// core walks the msgpack batch (the fast path, filter/core/kv-batch.ts; the JavaScript decoder
// for what it refuses) → detokenize (real Qwen3 vocabulary) → chained chunk hashing and the
// block map / chunk index (the core Wasm) → bucket images. Issue 31 targets: ≥ 3 M stored blocks
// per CPU-second end to end, ≤ 150 bytes per indexed block (issue 18's were 1 M and 200). Each stage is also timed on its own
// (decode, detokenize, chunk hashing, index insert, batch scan, fast path, image encode) and every
// rate is reported next to the JavaScript decode-only rate of the same payloads in the same run.
//   npx tsx --expose-gc bench/ingest.bench.ts [--quick]
import { availableParallelism, loadavg } from "node:os";
import { feedChunksEach, initialState } from "../control-plane/src/core/kvroute-core.ts";
import { decodeBatch } from "../control-plane/src/events/batch-decoder.ts";
import { encodeSeq } from "../control-plane/src/events/frames.ts";
import type { PrefixIndex } from "../control-plane/src/index/prefix-index.ts";
import type { BlockStored } from "../control-plane/src/vocabulary/kv-events.ts";
import {
  BLOCK,
  benchIndex,
  benchPoolTokens,
  benchRankIngest,
  CHUNK,
  ChainMaker,
  MODEL,
  SEQUENCE_BLOCKS,
  type Shape,
} from "./lib/ingest-fixtures.ts";
import { median, writeResult } from "./lib/results.ts";

const quick = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
/** The machine's load when the run started: on a shared machine the per-CPU-second rates still
 * move with it (caches and memory bandwidth are shared), so the report says what it was. */
const loadAtStart = loadavg()[0] ?? 0;
const BLOCKS_PER_EVENT = 4;
const EVENTS_PER_BATCH = 4;
const SEQUENCES = quick ? 400 : 2000;

const tokens = benchPoolTokens();
const chains = new ChainMaker();

const SMALL_BATCHES: Shape = { blocksPerEvent: BLOCKS_PER_EVENT, eventsPerBatch: EVENTS_PER_BATCH };
/** What a vLLM engine publishes for a prompt prefilled in one scheduler step: BlockPool
 * cache_full_blocks emits one BlockStored with every block the request filled, and the step's
 * take_events() goes out as one batch (docs/kv-events.md). */
const PROMPT_BATCHES: Shape = { blocksPerEvent: SEQUENCE_BLOCKS, eventsPerBatch: 1 };

function sequenceBatches(
  seqNo: number,
  hashBase: bigint,
  lora: string | null = null,
  salt: string | null = null,
  shape: Shape = SMALL_BATCHES,
): Buffer[] {
  return chains.batches(seqNo, hashBase, shape, lora, salt);
}

const payloads: Buffer[] = [];
for (let s = 0; s < SEQUENCES; s++) payloads.push(...sequenceBatches(s, 2n ** 63n + BigInt(s) * 1000n));
// The same chains under a LoRA adapter, each request salted (one of 8 tenants): the core reads
// both and hashes each chain's root itself.
const loraPayloads: Buffer[] = [];
for (let s = 0; s < SEQUENCES; s++)
  loraPayloads.push(...sequenceBatches(s, 2n ** 63n + BigInt(s) * 1000n, "adapter-a", `tenant-${s % 8}`));
const promptPayloads: Buffer[] = [];
for (let s = 0; s < SEQUENCES; s++)
  promptPayloads.push(...sequenceBatches(s, 2n ** 63n + BigInt(s) * 1000n, null, null, PROMPT_BATCHES));
const totalBlocks = SEQUENCES * SEQUENCE_BLOCKS;

/** Seconds of CPU this process used since `start` (robust to other load on the machine, unlike wall time). */
const cpuSeconds = (start: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1e6;
};
const detokenize = tokens.detokenize;
const meta = { seq: 0, ts: 0, receivedAt: 0, replayed: false };

function decodeOnlyRate(): number {
  const t0 = process.cpuUsage();
  let blocks = 0;
  for (const p of payloads) {
    const r = decodeBatch(p);
    if (r.ok) for (const e of r.batch.events) if (e.type === "BlockStored") blocks += e.hashes.length;
  }
  return blocks / cpuSeconds(t0);
}

// Decoded once, for the stages that start after decode.
const events: BlockStored[] = [];
for (const p of payloads) {
  const r = decodeBatch(p);
  if (r.ok) for (const e of r.batch.events) if (e.type === "BlockStored") events.push(e);
}

function detokenizeRate(): number {
  const t0 = process.cpuUsage();
  let blocks = 0;
  for (const e of events) {
    let previous = -1;
    for (let i = 0; i < e.hashes.length; i++) {
      const ids = e.tokenIds.slice(i * e.blockSize, (i + 1) * e.blockSize);
      if (detokenize(ids, previous) === null) throw new Error("undetokenizable");
      previous = ids[ids.length - 1] as number;
      blocks++;
    }
  }
  return blocks / cpuSeconds(t0);
}

// Every block's bytes, detokenized once, for the hashing stage.
const blockBytes: Uint8Array[][] = events.map((e) => {
  let previous = -1;
  return e.hashes.map((_, i) => {
    const ids = e.tokenIds.slice(i * e.blockSize, (i + 1) * e.blockSize);
    const bytes = (detokenize(ids, previous) as Uint8Array).slice();
    previous = ids[ids.length - 1] as number;
    return bytes;
  });
});

/** Chained chunk hashing of every block's bytes in the core, one call per block (the JavaScript-side hasher the index used before). */
function hashingRate(): number {
  const t0 = process.cpuUsage();
  let blocks = 0;
  let chunks = 0;
  const count = () => {
    chunks++;
  };
  let state = initialState(MODEL);
  for (const [k, e] of events.entries()) {
    if (e.parent === null) state = initialState(MODEL);
    for (const bytes of blockBytes[k] as Uint8Array[]) {
      state = feedChunksEach(state, bytes, CHUNK, count);
      blocks++;
    }
  }
  if (chunks === 0) throw new Error("no chunks");
  return blocks / cpuSeconds(t0);
}

const newIndex = (batchFastPath = true): PrefixIndex => benchIndex(tokens, batchFastPath);

function checkIndexed(index: PrefixIndex): number {
  const stored = index.slot("bench")?.stats.storedBlocks ?? 0;
  if (stored !== totalBlocks) throw new Error(`indexed ${stored} of ${totalBlocks} blocks`);
  return stored;
}

/** Decoded events → the index: detokenize, hash and insert (one core call per event). */
function insertRate(): { rate: number; imageRate: number } {
  const index = newIndex();
  const t0 = process.cpuUsage();
  for (const e of events) index.event("bench", e, meta);
  const rate = checkIndexed(index) / cpuSeconds(t0);
  const t1 = process.cpuUsage();
  const images = index.takeDirtyImages();
  const imageRate = totalBlocks / cpuSeconds(t1);
  if (images.length === 0) throw new Error("no bucket images");
  index.dispose();
  return { rate, imageRate };
}

/** Payloads → the core's batch walk alone (validated and staged, not applied). */
function scanRate(): number {
  const index = newIndex();
  const t0 = process.cpuUsage();
  let blocks = 0;
  for (const p of payloads) {
    const b = index.scanBatch("bench", p);
    if (b === null) throw new Error("the fast path refused a bench batch");
    blocks += b.storedBlocks;
  }
  const rate = blocks / cpuSeconds(t0);
  index.dispose();
  return rate;
}

/** Payloads → the index through the fast path, without RankIngest: walk, then apply in one call per batch. */
function fastPathRate(): number {
  const index = newIndex();
  const t0 = process.cpuUsage();
  for (const p of payloads) {
    if (index.scanBatch("bench", p) === null) throw new Error("the fast path refused a bench batch");
    index.applyScanned("bench");
  }
  const rate = checkIndexed(index) / cpuSeconds(t0);
  index.dispose();
  return rate;
}

// The frames as the socket hands them over (zeromq allocates them): built before the clock starts.
const topic = Buffer.alloc(0);
const frames = payloads.map((p, seq) => [topic, encodeSeq(seq), p]);
const loraFrames = loraPayloads.map((p, seq) => [topic, encodeSeq(seq), p]);
const promptFrames = promptPayloads.map((p, seq) => [topic, encodeSeq(seq), p]);
{
  const probe = newIndex();
  if (probe.scanBatch("bench", loraPayloads[0] as Buffer) === null)
    throw new Error("the fast path refused a LoRA bench batch");
  probe.dispose();
}

function fullPath(
  batchFastPath = true,
  input = frames,
): { rate: number; index: PrefixIndex; publishMs: number } {
  const index = newIndex(batchFastPath);
  const ingest = benchRankIngest(index);
  const t0 = process.cpuUsage();
  for (const f of input) ingest.onFrames(f);
  const seconds = cpuSeconds(t0);
  const stored = checkIndexed(index);
  const p0 = performance.now();
  const images = index.takeDirtyImages();
  const publishMs = performance.now() - p0;
  if (images.length === 0) throw new Error("no bucket images");
  return { rate: stored / seconds, index, publishMs };
}

const repeats = quick ? 3 : 5;
decodeOnlyRate(); // warm-up
detokenizeRate();
hashingRate();
insertRate();
scanRate();
fastPathRate();
fullPath().index.dispose();
fullPath(false).index.dispose();
fullPath(true, loraFrames).index.dispose();
fullPath(true, promptFrames).index.dispose();
const rates = {
  decode: [] as number[],
  detok: [] as number[],
  hash: [] as number[],
  insert: [] as number[],
  scan: [] as number[],
  fast: [] as number[],
};
const imageRates: number[] = [];
const fullRates: number[] = [];
const fullJsRates: number[] = [];
const loraRates: number[] = [];
const loraJsRates: number[] = [];
const promptRates: number[] = [];
let publishMs = 0;
for (let r = 0; r < repeats; r++) {
  rates.decode.push(decodeOnlyRate());
  rates.detok.push(detokenizeRate());
  rates.hash.push(hashingRate());
  const ins = insertRate();
  rates.insert.push(ins.rate);
  imageRates.push(ins.imageRate);
  rates.scan.push(scanRate());
  rates.fast.push(fastPathRate());
  const f = fullPath();
  fullRates.push(f.rate);
  publishMs = f.publishMs;
  f.index.dispose();
  const j = fullPath(false);
  fullJsRates.push(j.rate);
  j.index.dispose();
  for (const [out, fast] of [
    [loraRates, true],
    [loraJsRates, false],
  ] as const) {
    const l = fullPath(fast, loraFrames);
    out.push(l.rate);
    l.index.dispose();
  }
  const pr = fullPath(true, promptFrames);
  promptRates.push(pr.rate);
  pr.index.dispose();
}

// Memory: what one index holding every block takes — JavaScript heap growth (gc forced where
// available) plus the core's tables (records at the allocator's 16-byte granularity, lookup
// tables, bucket lists), which live in linear memory outside the JS heap.
const gc = (globalThis as { gc?: () => void }).gc;
gc?.();
const before = process.memoryUsage().heapUsed;
const kept = fullPath();
gc?.();
const heapPerBlock = (process.memoryUsage().heapUsed - before) / totalBlocks;
const coreBytes = (kept.index.slot("bench")?.bytes ?? 0) + kept.index.chunks.bytes;
const corePerBlock = coreBytes / totalBlocks;
const perBlock = Math.max(0, heapPerBlock) + corePerBlock;

const fmt = (n: number) => Math.round(n).toLocaleString("en");
/** A per-block CPU time as a share of the end-to-end one. */
const share = (secondsPerBlock: number) => `${Math.round(100 * secondsPerBlock * median(fullRates))} %`;
const base = median(rates.decode);
/** CPU µs a batch of `blocks` blocks and a block take at a median rate. */
const perBatchUs = (xs: number[], blocks: number) =>
  `${((1e6 * blocks) / median(xs)).toFixed(1)} µs a batch of ${blocks} blocks (${(1e6 / median(xs)).toFixed(2)} µs a block)`;
const row = (stage: string, timed: string, xs: number[]) =>
  `| ${stage} | ${timed} | ${fmt(Math.min(...xs))} / ${fmt(median(xs))} / ${fmt(Math.max(...xs))} | ${(median(xs) / base).toFixed(2)} |`;
const table = [
  "| stage | what is timed | blocks per CPU-second (min / median / max) | × decode only |",
  "|---|---|---|---|",
  row("decode (baseline)", "msgpack payload → normalised events (msgpackr + event-decoder.ts)", rates.decode),
  row(
    "detokenize",
    "token ids → bytes, block by block, in JavaScript (the path of a slot without a token table; the index below detokenizes in the core)",
    rates.detok,
  ),
  row("chunk hashing", "bytes → chained XXH64 chunks in the core, one call per block", rates.hash),
  row(
    "index insert",
    "decoded events → PrefixIndex: detokenize, hash, block map and chunk index in one core call per event",
    rates.insert,
  ),
  row(
    "batch scan (fast path)",
    "msgpack payload → validated plan in the core (filter/core/kv-batch.ts walk; nothing applied)",
    rates.scan,
  ),
  row(
    "batch fast path",
    "msgpack payload → PrefixIndex: the core walks the batch, then detokenizes, hashes and indexes it in one call per batch",
    rates.fast,
  ),
  row("image encode", "every dirty bucket image after the insert (blocks indexed / CPU-second)", imageRates),
  row(
    "end to end, JavaScript decoder",
    "frames → sequence check → msgpackr decode → index one core call per event (RankIngest, batchFastPath: false)",
    fullJsRates,
  ),
  row("end to end", "frames → sequence check → batch fast path → index (RankIngest, the default)", fullRates),
  row(
    "end to end, LoRA + salt, JavaScript decoder",
    "the same chains under a LoRA adapter (lora_name and extra_keys on every event, a cache_salt in each chain's first block), batchFastPath: false",
    loraJsRates,
  ),
  row(
    "end to end, LoRA + salt",
    "the same LoRA + salt frames with the fast path on (the default): the core reads the adapter and the salt and hashes each chain's root",
    loraRates,
  ),
  row(
    "end to end, a prompt a batch",
    `the same chains as a vLLM engine publishes a prompt prefilled in one step: its ${SEQUENCE_BLOCKS} blocks in one BlockStored, one event a batch (RankIngest, the default)`,
    promptRates,
  ),
];
const lines: string[] = [
  `${fmt(totalBlocks)} stored blocks (${SEQUENCES} chains × ${SEQUENCE_BLOCKS} blocks of ${BLOCK} tokens, ${BLOCKS_PER_EVENT} blocks/event, ${EVENTS_PER_BATCH} events/batch, map encoding, ${CHUNK}-byte chunks)`,
  "rates are per CPU-second of this process (GC included), so other load on the machine does not skew them; the stages overlap (index insert includes detokenize and hashing), so they do not add up",
  `machine: ${availableParallelism()} CPUs, load average ${loadAtStart.toFixed(1)} when the run started${loadAtStart > availableParallelism() ? " (shared with other work: CPU time is still counted per process, but caches and memory bandwidth are shared, so rates vary between runs by ±20 % or so)" : ""}`,
  `end to end: median ${fmt(median(fullRates))} blocks/CPU-s = ${(median(fullRates) / base).toFixed(2)} × decode only, ${(median(fullRates) / median(fullJsRates)).toFixed(2)} × the JavaScript-decoder path; target 3,000,000 (issue 31) → ${(median(fullRates) / 3e6).toFixed(2)}× target`,
  `per batch and per block (from the medians): ${BLOCKS_PER_EVENT} × ${EVENTS_PER_BATCH} batches ${perBatchUs(fullRates, BLOCKS_PER_EVENT * EVENTS_PER_BATCH)}, a prompt a batch ${perBatchUs(promptRates, SEQUENCE_BLOCKS)}: what a batch and an event cost besides their blocks (frames, sequence check, the calls into the core, their set-up) weighs on small batches; a prompt a batch → ${(median(promptRates) / 3e6).toFixed(2)}× target`,
  `LoRA + salt frames: ${(median(loraRates) / median(loraJsRates)).toFixed(2)} × the JavaScript decoder (which they took before), ${(median(loraRates) / median(fullRates)).toFixed(2)} × plain frames`,
  `where the end-to-end time goes (from the medians): the core's batch walk ${share(1 / median(rates.scan))}, applying the batch in the core (detokenize, chunk hashing, block map, chunk index) ${share(1 / median(rates.fast) - 1 / median(rates.scan))}, RankIngest and the rest (frames, sequence, stats, GC) ${share(1 / median(fullRates) - 1 / median(rates.fast))}`,
  `index: ${fmt(kept.index.chunks.size)} chunk hashes; memory ≈ ${fmt(perBlock)} bytes per indexed block (core tables ${fmt(corePerBlock)}: block table ${fmt((kept.index.slot("bench")?.bytes ?? 0) / totalBlocks)} + chunk index ${fmt(kept.index.chunks.bytes / totalBlocks)}; JS heap ${fmt(heapPerBlock)}${gc === undefined ? ", no --expose-gc: approximate" : ""}); target ≤ 150 (issue 31)`,
  `encoding all dirty bucket images after the run: ${publishMs.toFixed(0)} ms`,
];

for (const l of [...table, ...lines]) console.log(l);
writeResult(
  "ingest",
  `# Control-plane KV-event ingest\n\nGenerated by \`npx tsx --expose-gc bench/ingest.bench.ts${quick ? " --quick" : ""}\`.\n\n${table.join("\n")}\n\n${lines.map((l) => `- ${l}`).join("\n")}\n`,
);
