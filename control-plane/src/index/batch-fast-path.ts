// The ingest fast path's JavaScript face: a KV-event batch payload goes into the core, which
// walks the MessagePack itself (filter/core/kv-batch.ts) and, when every part of it is in the
// subset it knows (vLLM text-prompt batches in either encoding, with or without a LoRA adapter
// and a cache salt), stages the batch for
// SlotBlocks.applyScannedBatch. Anything else returns null and takes the JavaScript decoder
// (events/batch-decoder.ts), so the index never depends on which path read a batch.
import { core } from "../core/core-wasm.ts";
import type { ScannedBatch } from "../vocabulary/kv-events.ts";

/** Result slots of the core's scan (kv-batch.ts R_*). */
const R_TS = 0;
const R_RANK = 1;
const R_STORED_EVENTS = 2;
const R_REMOVED_EVENTS = 3;
const R_CLEARED_EVENTS = 4;
const R_STORED_BY_MEDIUM = 5;
const R_REMOVED_BLOCKS = 8;
export const R_ORPHANS = 9;
export const R_UNDETOKENIZABLE = 10;
/** Parentless stores under a LoRA adapter or a salt: apply needs the model's bytes for their root. */
const R_ROOT_KEYS = 11;
/** The media of R_STORED_BY_MEDIUM, in order: the engine names the JavaScript decoder reports. */
const MEDIA = ["GPU", "CPU", "STORAGE"] as const;

/** The results' index in f64 units: a fixed address (kv-batch.ts allocates them once), asked once
 * per core instead of once per batch (a call into Wasm per batch is measurable at this rate). */
let resultsCore: ReturnType<typeof core> | null = null;
let resultsAt = 0;

/** The view the results are read through (from resultsAt), their address asked of a new core. */
function results(): Float64Array {
  const c = core();
  if (resultsCore !== c) {
    resultsCore = c;
    resultsAt = c.ex.batchResultsPtr() >>> 3;
  }
  return c.f64view;
}

/**
 * The answer of every scan, rewritten by the next one. The core stages one scanned batch at a
 * time (the sink applies it before it scans another: EventSink.scanBatch), so one answer at a
 * time is all a reader can use. Building a new one per batch — the batch, its event counts and
 * its media — cost ~0.5 µs of the ~2 µs a scan takes in JavaScript and the core (bench/ingest.bench.ts's payloads,
 * measured in one process), at ~160,000 batches a second at 100 × 8 ranks.
 */
const scanned: ScannedBatch = {
  ts: 0,
  rank: null,
  events: { BlockStored: 0, BlockRemoved: 0, AllBlocksCleared: 0 },
  storedBlocks: 0,
  removedBlocks: 0,
  storedByMedium: {},
};
/** The common batch's media, every block on the GPU (one fixed shape, rewritten in place). */
const onGpu = { GPU: 0 };
const NO_MEDIA: Record<string, number> = Object.freeze({});

/**
 * Reads the payload in the core; null when the JavaScript decoder must take it. The answer is
 * valid until the next call (see `scanned`).
 */
export function scanBatchPayload(payload: Uint8Array): ScannedBatch | null {
  const c = core();
  const ptr = c.io(payload.length);
  c.u8.set(payload, ptr);
  if (c.ex.batchScanIo(ptr, payload.length) === 0) return null;
  const r = results();
  const at = resultsAt;
  const gpu = r[at + R_STORED_BY_MEDIUM] as number;
  const offGpu = (r[at + R_STORED_BY_MEDIUM + 1] as number) + (r[at + R_STORED_BY_MEDIUM + 2] as number);
  if (offGpu === 0) {
    onGpu.GPU = gpu;
    scanned.storedByMedium = gpu === 0 ? NO_MEDIA : onGpu;
  } else {
    const media: Record<string, number> = {};
    for (let m = 0; m < MEDIA.length; m++) {
      const n = r[at + R_STORED_BY_MEDIUM + m] as number;
      if (n !== 0) media[MEDIA[m] as string] = n;
    }
    scanned.storedByMedium = media;
  }
  const rank = r[at + R_RANK] as number;
  scanned.ts = r[at + R_TS] as number;
  scanned.rank = rank < 0 ? null : rank;
  scanned.events.BlockStored = r[at + R_STORED_EVENTS] as number;
  scanned.events.BlockRemoved = r[at + R_REMOVED_EVENTS] as number;
  scanned.events.AllBlocksCleared = r[at + R_CLEARED_EVENTS] as number;
  scanned.storedBlocks = gpu + offGpu;
  scanned.removedBlocks = r[at + R_REMOVED_BLOCKS] as number;
  return scanned;
}

/** Whether the last accepted scan staged LoRA or salted roots (apply then hashes the model). */
export function scannedRootKeys(): boolean {
  return (results()[resultsAt + R_ROOT_KEYS] as number) > 0;
}

/** Adds the orphan and undetokenizable block counts of the last applied batch to `stats`. */
export function addAppliedBatchDrops(stats: { orphanBlocks: number; undetokenizableBlocks: number }): void {
  const r = results();
  stats.orphanBlocks += r[resultsAt + R_ORPHANS] as number;
  stats.undetokenizableBlocks += r[resultsAt + R_UNDETOKENIZABLE] as number;
}
