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

function results(): { r: Float64Array; at: number } {
  const c = core();
  if (resultsCore !== c) {
    resultsCore = c;
    resultsAt = c.ex.batchResultsPtr() >>> 3;
  }
  return { r: c.f64view, at: resultsAt };
}

/** Reads the payload in the core; null when the JavaScript decoder must take it. */
export function scanBatchPayload(payload: Uint8Array): ScannedBatch | null {
  const c = core();
  const ptr = c.io(payload.length);
  c.u8.set(payload, ptr);
  if (c.ex.batchScanIo(ptr, payload.length) === 0) return null;
  const { r, at } = results();
  const gpu = r[at + R_STORED_BY_MEDIUM] as number;
  const offGpu = (r[at + R_STORED_BY_MEDIUM + 1] as number) + (r[at + R_STORED_BY_MEDIUM + 2] as number);
  // The common batch, every block on the GPU, as a literal (one fixed shape, no keyed stores).
  const storedByMedium: Record<string, number> = offGpu === 0 ? (gpu === 0 ? {} : { GPU: gpu }) : {};
  if (offGpu !== 0)
    for (let m = 0; m < MEDIA.length; m++) {
      const n = r[at + R_STORED_BY_MEDIUM + m] as number;
      if (n !== 0) storedByMedium[MEDIA[m] as string] = n;
    }
  const storedBlocks = gpu + offGpu;
  const rank = r[at + R_RANK] as number;
  return {
    ts: r[at + R_TS] as number,
    rank: rank < 0 ? null : rank,
    events: {
      BlockStored: r[at + R_STORED_EVENTS] as number,
      BlockRemoved: r[at + R_REMOVED_EVENTS] as number,
      AllBlocksCleared: r[at + R_CLEARED_EVENTS] as number,
    },
    storedBlocks,
    removedBlocks: r[at + R_REMOVED_BLOCKS] as number,
    storedByMedium,
  };
}

/** Whether the last accepted scan staged LoRA or salted roots (apply then hashes the model). */
export function scannedRootKeys(): boolean {
  const { r, at } = results();
  return (r[at + R_ROOT_KEYS] as number) > 0;
}

/** Adds the orphan and undetokenizable block counts of the last applied batch to `stats`. */
export function addAppliedBatchDrops(stats: { orphanBlocks: number; undetokenizableBlocks: number }): void {
  const { r, at } = results();
  stats.orphanBlocks += r[at + R_ORPHANS] as number;
  stats.undetokenizableBlocks += r[at + R_UNDETOKENIZABLE] as number;
}
