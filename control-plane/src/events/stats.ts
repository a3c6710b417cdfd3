// Plain counters per rank for the status API and, later, Prometheus. JSON-safe on purpose
// (numbers and strings only), so the API can serve it as is.

import type { Logger } from "pino";
import type { KvEventType, RankResetReason } from "../vocabulary/kv-events.ts";
import type { EventError } from "./event-decoder.ts";

/** Every reason a message or an event is dropped. */
export type DropReason =
  // frames
  | "frame_count"
  | "seq_size"
  | "seq_range"
  | "topic"
  // payload / batch
  | "msgpack"
  | "batch_shape"
  | "batch_rank"
  /** A batch timestamp no engine can send (batch-clock.ts). */
  | "batch_ts"
  | "rank_mismatch"
  // single events
  | EventError
  // sequencing and plumbing
  | "duplicate"
  | "stale"
  | "pending_overflow"
  | "sink_error"
  | "internal";

export interface RankStats {
  slotKey: string;
  rank: number;
  endpoint: string;
  mode: "connect" | "bind";
  replayEndpoint: string | null;
  /** Last sequence number consumed; null before the first batch. */
  lastSeq: number | null;
  /** Epoch ms of the last message read from the socket. */
  lastMessageAt: number | null;
  /** Engine ts (seconds) of the last applied batch. */
  lastBatchTs: number | null;
  batches: number;
  events: Record<KvEventType, number>;
  storedBlocks: number;
  removedBlocks: number;
  /** Stored blocks per medium ("GPU", "CPU", …). */
  storedByMedium: Record<string, number>;
  /** Valid events skipped on purpose (non-zero group_idx, non-main attention kinds, unknown types). */
  ignored: Record<string, number>;
  dropped: Partial<Record<DropReason, number>>;
  /** Times the connection to the engine dropped (ZMQ disconnect events). */
  disconnects: number;
  gaps: number;
  /** Batches reported missing by gaps, before any replay. */
  missedBatches: number;
  replays: { ok: number; failed: number; replayedBatches: number };
  resets: Record<RankResetReason, number>;
  /** A replay in flight, or its answer and the messages held meanwhile still being applied. */
  replaying: boolean;
  pending: number;
}

export function newRankStats(
  slotKey: string,
  rank: number,
  endpoint: string,
  mode: "connect" | "bind",
  replayEndpoint: string | null,
): RankStats {
  return {
    slotKey,
    rank,
    endpoint,
    mode,
    replayEndpoint,
    lastSeq: null,
    lastMessageAt: null,
    lastBatchTs: null,
    batches: 0,
    events: { BlockStored: 0, BlockRemoved: 0, AllBlocksCleared: 0 },
    storedBlocks: 0,
    removedBlocks: 0,
    storedByMedium: {},
    ignored: {},
    dropped: {},
    disconnects: 0,
    gaps: 0,
    missedBatches: 0,
    replays: { ok: 0, failed: 0, replayedBatches: 0 },
    resets: { gap: 0, restart: 0 },
    replaying: false,
    pending: 0,
  };
}

export function bump<K extends string>(rec: Partial<Record<K, number>>, key: K, by = 1): void {
  rec[key] = (rec[key] ?? 0) + by;
}

/**
 * Logs a given key at most once per interval, with how many were suppressed meanwhile, so a
 * publisher spraying garbage cannot flood the logs.
 */
export class ThrottledLog {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  warn(key: string, fields: Record<string, unknown>, msg: string): void {
    const t = this.now();
    const entry = this.last.get(key);
    if (entry !== undefined && t - entry.at < this.intervalMs) {
      entry.suppressed++;
      return;
    }
    const suppressed = entry?.suppressed ?? 0;
    this.last.set(key, { at: t, suppressed: 0 });
    this.logger.warn(suppressed > 0 ? { ...fields, suppressed } : fields, msg);
  }
}
