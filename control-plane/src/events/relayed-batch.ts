// A KV-event batch that a peer replica relayed (replicas/kv-relay.ts: the pool's owner applied
// it from its engine subscription), applied to a sink the way a subscription applies a batch
// (rank-ingest.ts consume): the sink's fast path when it reads the payload, the JavaScript
// decoder's events otherwise. Sequencing, replay and the rank check were the owner's.
import type { BatchMeta, EventSink } from "../vocabulary/kv-events.ts";
import { decodeBatch } from "./batch-decoder.ts";

/** Applies `payload` to `sink` for `slotKey`; false when it does not decode (nothing applied). */
export function applyRelayedBatch(
  sink: EventSink,
  slotKey: string,
  payload: Uint8Array,
  nowMs: number,
): boolean {
  if (sink.scanBatch !== undefined && sink.scanBatch(slotKey, payload) !== null) {
    sink.applyScanned?.(slotKey);
    return true;
  }
  const decoded = decodeBatch(payload);
  if (!decoded.ok) return false;
  // seq -1: the engine's number is the owner's business; the index reads none of the meta.
  const meta: BatchMeta = { seq: -1, ts: decoded.batch.ts, receivedAt: nowMs, replayed: false };
  for (const ev of decoded.batch.events) sink.event(slotKey, ev, meta);
  return true;
}
