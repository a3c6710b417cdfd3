// A KV-event payload (msgpack bytes) → batch envelope + normalised events.
//
// Envelope: msgspec `array_like` struct `[ts, events]` (older engines, and any engine whose
// rank field is still at its None default, since trailing defaults are omitted) or
// `[ts, events, data_parallel_rank]` (SGLang names the third field attn_dp_rank). One vLLM
// revision encoded the batch itself as a map; accepting it costs nothing.

import { Unpackr } from "msgpackr";
import type { KvEvent } from "../vocabulary/kv-events.ts";
import { decodeEvent, type EventError, type IgnoreReason } from "./event-decoder.ts";

// useRecords:false = plain MessagePack (no msgpackr extensions); int64AsType:"bigint" = every
// uint64/int64 on the wire decodes losslessly as a bigint (≥ 2^63 included); smaller ints come
// back as numbers, which is why hash.ts normalises both.
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: "bigint" });

export type BatchError = "msgpack" | "batch_shape" | "batch_rank";

export interface DecodedBatch {
  ts: number;
  /** The rank the engine stamped on the batch; null when absent. */
  rank: number | null;
  events: KvEvent[];
  ignored: Partial<Record<IgnoreReason, number>>;
  errors: Partial<Record<EventError, number>>;
}

export type BatchResult = { ok: true; batch: DecodedBatch } | { ok: false; error: BatchError };

function asNumber(v: unknown): number | null {
  if (typeof v === "number" && Number.isFinite(v)) return v;
  if (typeof v === "bigint") return Number(v);
  return null;
}

function asRank(v: unknown): number | null | undefined {
  if (v === undefined || v === null) return null;
  if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0) return v;
  if (typeof v === "bigint" && v >= 0n && v < 1n << 31n) return Number(v); // uint64-encoded
  return undefined; // present but not a rank
}

export function decodeBatch(payload: Uint8Array): BatchResult {
  let root: unknown;
  try {
    root = unpackr.unpack(payload);
  } catch {
    return { ok: false, error: "msgpack" };
  }
  let tsRaw: unknown;
  let eventsRaw: unknown;
  let rankRaw: unknown;
  if (Array.isArray(root)) {
    if (root.length < 2) return { ok: false, error: "batch_shape" };
    [tsRaw, eventsRaw, rankRaw] = root;
  } else if (typeof root === "object" && root !== null && !(root instanceof Uint8Array)) {
    const m = root as Record<string, unknown>;
    tsRaw = m.ts;
    eventsRaw = m.events;
    rankRaw = m.data_parallel_rank ?? m.attn_dp_rank ?? m.dp_rank;
  } else {
    return { ok: false, error: "batch_shape" };
  }
  const ts = asNumber(tsRaw);
  if (ts === null || !Array.isArray(eventsRaw)) return { ok: false, error: "batch_shape" };
  const rank = asRank(rankRaw);
  if (rank === undefined) return { ok: false, error: "batch_rank" };

  const batch: DecodedBatch = { ts, rank, events: [], ignored: {}, errors: {} };
  for (const raw of eventsRaw) {
    const r = decodeEvent(raw);
    if (r.ok) batch.events.push(r.event);
    else if ("ignored" in r) batch.ignored[r.ignored] = (batch.ignored[r.ignored] ?? 0) + 1;
    else batch.errors[r.error] = (batch.errors[r.error] ?? 0) + 1;
  }
  return { ok: true, batch };
}
