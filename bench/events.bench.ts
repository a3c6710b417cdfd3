// KV-event decode throughput: msgpack payload → normalised events (hashes as bigint, checked
// token ids), one core, no sockets. DESIGN §9's ingest target is ≥ 300k stored blocks/s for
// the whole path; this is the events layer's share (detokenize, hashing and the index are
// measured by their own benches).
// Run alone: `npx tsx bench/events.bench.ts`; bench/run.ts may import benchEvents().
import { pathToFileURL } from "node:url";
import { Packr } from "msgpackr";
import { pino } from "pino";
import { decodeBatch } from "../control-plane/src/events/batch-decoder.ts";
import { encodeSeq } from "../control-plane/src/events/frames.ts";
import { RankIngest } from "../control-plane/src/events/rank-ingest.ts";
import { newRankStats, ThrottledLog } from "../control-plane/src/events/stats.ts";
import type { EventSink } from "../control-plane/src/vocabulary/kv-events.ts";

export interface EventsBenchCase {
  encoding: "map" | "array";
  blocksPerEvent: number;
  eventsPerBatch: number;
  payloadBytes: number;
  /** decodeBatch only, per second of wall time. */
  storedBlocksPerSecond: number;
  /** decodeBatch only, per second of CPU time (one core, whatever else runs). */
  storedBlocksPerCpuSecond: number;
  /** Frames → sequence check → decode → stats → sink (a no-op), as a subscriber runs it. */
  ingestBlocksPerSecond: number;
  ingestBlocksPerCpuSecond: number;
}

const BLOCK = 16;

/** Deterministic PRNG so runs are comparable. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * What vLLM publishes for a busy rank: BlockStored events of a few full 16-token blocks with
 * u64 hashes (mostly ≥ 2^32, so msgpack uint64), Qwen-sized token ids, and a BlockRemoved now
 * and then. msgpackr with records off writes the same MessagePack types msgspec does here
 * (uint64 for these bigints, float64 ts, plain maps/arrays).
 */
function makePayloads(encoding: "map" | "array", blocksPerEvent: number, eventsPerBatch: number): Buffer[] {
  const packr = new Packr({ useRecords: false });
  const r = rng(42);
  const u64 = () => (BigInt(Math.floor(r() * 2 ** 32)) << 32n) | BigInt(Math.floor(r() * 2 ** 32));
  const out: Buffer[] = [];
  let parent: bigint | null = null;
  for (let b = 0; b < 64; b++) {
    const events: unknown[] = [];
    for (let e = 0; e < eventsPerBatch; e++) {
      const hashes = Array.from({ length: blocksPerEvent }, u64);
      const tokens = Array.from({ length: blocksPerEvent * BLOCK }, () => Math.floor(r() * 151_000));
      events.push(
        encoding === "map"
          ? {
              type: "BlockStored",
              block_hashes: hashes,
              parent_block_hash: parent,
              token_ids: tokens,
              block_size: BLOCK,
              lora_id: null,
              medium: "GPU",
              lora_name: null,
              extra_keys: null,
              group_idx: 0,
              kv_cache_spec_kind: "full_attention",
            }
          : ["BlockStored", hashes, parent, tokens, BLOCK, null, "GPU", null],
      );
      parent = hashes[hashes.length - 1] as bigint;
    }
    out.push(packr.pack([1_700_000_000.123 + b, events, 0]));
  }
  return out;
}

/**
 * Units per second of wall time and per second of this process's CPU time. The CPU figure is
 * what "one core" means on a shared machine, where wall time also counts other processes.
 */
function timeLoop(seconds: number, body: () => number): { wall: number; cpu: number } {
  let units = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  while (performance.now() < end) {
    for (let k = 0; k < 64; k++) units += body();
  }
  const wallS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const cpuS = (cpu.user + cpu.system) / 1e6;
  return { wall: units / wallS, cpu: units / cpuS };
}

export function benchEvents(seconds = 2): EventsBenchCase[] {
  const results: EventsBenchCase[] = [];
  for (const encoding of ["map", "array"] as const) {
    for (const [blocksPerEvent, eventsPerBatch] of [
      [4, 8],
      [32, 2],
    ] as const) {
      const payloads = makePayloads(encoding, blocksPerEvent, eventsPerBatch);
      // Correctness guard: a bench that decodes nothing measures nothing.
      const check = decodeBatch(payloads[0] as Buffer);
      if (!check.ok || check.batch.events.length !== eventsPerBatch)
        throw new Error("bench payload does not decode");

      let i = 0;
      timeLoop(0.3, () => (decodeBatch(payloads[i++ & 63] as Buffer).ok ? 1 : 0)); // warm-up
      const decodeRate = timeLoop(seconds, () => {
        const res = decodeBatch(payloads[i++ & 63] as Buffer);
        return res.ok ? res.batch.events.length * blocksPerEvent : 0;
      });

      const sink: EventSink = { event: () => {}, rankReset: () => {} };
      const stats = newRankStats("bench", 0, "-", "connect", null);
      const ingest = new RankIngest({
        slotKey: "bench",
        rank: 0,
        topic: "",
        sink,
        stats,
        log: new ThrottledLog(pino({ level: "silent" }), 10_000),
        replay: null,
        maxPending: 1,
      });
      const topic = Buffer.alloc(0);
      let seq = 0;
      const ingestRate = timeLoop(seconds, () => {
        const before = stats.storedBlocks;
        ingest.onFrames([topic, encodeSeq(seq++), payloads[seq & 63] as Buffer]);
        return stats.storedBlocks - before;
      });

      results.push({
        encoding,
        blocksPerEvent,
        eventsPerBatch,
        payloadBytes: Math.round(payloads.reduce((a, p) => a + p.length, 0) / payloads.length),
        storedBlocksPerSecond: Math.round(decodeRate.wall),
        storedBlocksPerCpuSecond: Math.round(decodeRate.cpu),
        ingestBlocksPerSecond: Math.round(ingestRate.wall),
        ingestBlocksPerCpuSecond: Math.round(ingestRate.cpu),
      });
    }
  }
  return results;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const r of benchEvents()) {
    console.log(
      `${r.encoding} events, ${r.eventsPerBatch}×${r.blocksPerEvent} blocks of ${BLOCK} tokens/batch ` +
        `(${r.payloadBytes} B): decode ${r.storedBlocksPerCpuSecond.toLocaleString("en")} stored blocks/CPU-s ` +
        `(${r.storedBlocksPerSecond.toLocaleString("en")}/s wall), ingest path ` +
        `${r.ingestBlocksPerCpuSecond.toLocaleString("en")} blocks/CPU-s (${r.ingestBlocksPerSecond.toLocaleString("en")}/s wall)`,
    );
  }
}
