// Test support for RankIngest without sockets: an ingest with a scripted replay function, and a
// replay whose answer the test releases by hand, to place live messages around it.

import { pino } from "pino";
import { encodeSeq } from "../../control-plane/src/events/frames.ts";
import { RankIngest } from "../../control-plane/src/events/rank-ingest.ts";
import type { ReplayResult } from "../../control-plane/src/events/replay-client.ts";
import { newRankStats, ThrottledLog } from "../../control-plane/src/events/stats.ts";
import type { EventSink } from "../../control-plane/src/vocabulary/kv-events.ts";
import { RecordingSink } from "./harness.ts";
import { batch, range, storedArray } from "./msgspec.ts";

export const T = Buffer.from("kv");
/** One block per batch, hash `h`, stamped `ts` (seconds). */
export const payload = (h: number, ts?: number) =>
  batch([storedArray({ hashes: [h], tokens: range(0, 4), blockSize: 4 })], 0, ts);
export const frames = (seq: number, p = payload(seq)) => [T, encodeSeq(seq), p];
export const replayed = (seqs: number[]) => seqs.map((seq) => ({ seq, topic: T, payload: payload(seq) }));

export function makeIngest(
  replay: ((from: number) => Promise<ReplayResult>) | null,
  opts: { sink?: EventSink; maxPending?: number } = {},
) {
  const sink = opts.sink ?? new RecordingSink();
  const stats = newRankStats("s", 0, "tcp://x:1", "connect", replay ? "tcp://x:2" : null);
  const ingest = new RankIngest({
    slotKey: "s",
    rank: 0,
    topic: "kv",
    sink,
    stats,
    log: new ThrottledLog(pino({ level: "silent" }), 1_000),
    replay,
    maxPending: opts.maxPending ?? 100_000,
  });
  return { ingest, stats, sink };
}

/** A replay whose answer the test releases by hand. */
export function deferredReplay() {
  let release: (r: ReplayResult) => void = () => {};
  const calls: number[] = [];
  const fn = (from: number) => {
    calls.push(from);
    return new Promise<ReplayResult>((r) => {
      release = r;
    });
  };
  return { fn, calls, release: (r: ReplayResult) => release(r) };
}
