// Batch timestamps no engine can send (issue 29, item 4): engines stamp batches with
// time.time(). A stamp of 1e300, 0 or −1 used to be applied and become the reference of the
// step-back check, so the next honest batch looked like a clock stepped back and sent the rank
// through a replay round. Such a batch is refused whole and counted; its number is consumed.

import { describe, expect, it } from "vitest";
import { MAX_BATCH_TS_AHEAD_MS } from "../../control-plane/src/events/batch-clock.ts";
import type { EventSink, ScannedBatch } from "../../control-plane/src/vocabulary/kv-events.ts";
import type { RecordingSink } from "./harness.ts";
import { frames, makeIngest, payload, replayed, T } from "./ingest-kit.ts";
import { batch, encode, F64, range, storedArray } from "./msgspec.ts";

const stored = (h: number) => storedArray({ hashes: [h], tokens: range(0, 4), blockSize: 4 });

const AHEAD_S = MAX_BATCH_TS_AHEAD_MS / 1000;
/** A day ahead of the control plane's clock, in seconds, ± a margin no test run takes. */
const dayAhead = (marginS: number) => Date.now() / 1000 + AHEAD_S + marginS;

describe("batch timestamps a real engine cannot send", () => {
  it.each([
    { name: "1e300", ts: 1e300 },
    { name: "0", ts: 0 },
    { name: "−1", ts: -1 },
    { name: "-0", ts: -0 },
    { name: "a day and a minute ahead of our clock", ts: dayAhead(60) },
    { name: "2^64 − 1 (an integer stamp)", ts: 2n ** 64n - 1n },
  ])("refuses a batch stamped $name, without a replay round or a reset", async ({ ts }) => {
    const stamp = typeof ts === "bigint" ? ts : new F64(ts);
    // The engine's buffer holds what it published, the odd batch included.
    const published = [payload(0), encode([stamp, [stored(1)], 0]), payload(2), payload(3)];
    const calls: number[] = [];
    const { ingest, stats, sink } = makeIngest(async (from) => {
      calls.push(from);
      const batches = published.map((p, seq) => ({ seq, topic: T, payload: p }));
      return { ok: true, batches: batches.filter((b) => b.seq >= from) };
    });
    for (const [seq, p] of published.entries()) ingest.onFrames(frames(seq, p));
    await ingest.idle();
    expect(calls).toEqual([]); // nothing made the stream doubtful
    expect((sink as RecordingSink).trace()).toEqual(["0:BlockStored", "2:BlockStored", "3:BlockStored"]);
    expect(stats.dropped).toEqual({ batch_ts: 1 });
    expect(stats.lastSeq).toBe(3); // its number was read: no gap
    expect(stats.gaps).toBe(0);
    expect(stats.resets).toEqual({ gap: 0, restart: 0 });
    expect(stats.lastBatchTs).toBe(payloadTs);
  });

  it("accepts a stamp just under a day ahead, and stamps far in the past (the step-back check's business)", async () => {
    const { ingest, stats, sink } = makeIngest(null);
    ingest.onFrames(frames(0, payload(0, dayAhead(-60))));
    ingest.onFrames(frames(1, payload(1, 1)));
    expect((sink as RecordingSink).trace()).toEqual(["0:BlockStored", "1:BlockStored"]);
    expect(stats.dropped).toEqual({});
  });

  it("still refuses non-finite stamps as a bad envelope", () => {
    const { ingest, stats } = makeIngest(null);
    ingest.onFrames(frames(0, payload(0, Number.NaN)));
    ingest.onFrames(frames(1, payload(1, Number.POSITIVE_INFINITY)));
    ingest.onFrames(frames(2, payload(2, Number.NEGATIVE_INFINITY)));
    expect(stats.dropped).toEqual({ batch_shape: 3 });
    expect(stats.lastSeq).toBe(2);
  });

  it("refuses a stamp read by the sink's fast path the same way, without applying the batch", () => {
    let applied = 0;
    const scanned = (ts: number): ScannedBatch => ({
      ts,
      rank: 0,
      events: { BlockStored: 1, BlockRemoved: 0, AllBlocksCleared: 0 },
      storedBlocks: 1,
      removedBlocks: 0,
      storedByMedium: { GPU: 1 },
    });
    const stamps = [1_700_000_000, 1e300, 1_700_000_001];
    let read = 0;
    const sink: EventSink = {
      event: () => {},
      rankReset: () => {},
      scanBatch: () => scanned(stamps[read++] as number),
      applyScanned: () => {
        applied++;
      },
    };
    const { ingest, stats } = makeIngest(null, { sink });
    for (const s of [0, 1, 2]) ingest.onFrames(frames(s));
    expect(applied).toBe(2);
    expect(stats.dropped).toEqual({ batch_ts: 1 });
    expect(stats.storedBlocks).toBe(2);
    expect(stats.lastBatchTs).toBe(1_700_000_001);
  });

  it("refuses it in a replay's answer too, counted once", async () => {
    const bad = batch([stored(1)], 0, 1e300);
    const { ingest, stats, sink } = makeIngest(async () => ({
      ok: true,
      batches: [...replayed([0]), { seq: 1, topic: T, payload: bad }, ...replayed([2])],
    }));
    ingest.connected(); // a new subscription: catch-up from 0
    await ingest.idle();
    ingest.onFrames(frames(1, bad)); // its live copy, late: a duplicate
    ingest.onFrames(frames(3));
    await ingest.idle();
    expect((sink as RecordingSink).trace()).toEqual(["0:BlockStored", "2:BlockStored", "3:BlockStored"]);
    expect(stats.dropped).toEqual({ batch_ts: 1, duplicate: 1 });
    expect(stats.resets).toEqual({ gap: 0, restart: 0 });
  });
});

/** The stamp `payload` writes by default (msgspec.ts). */
const payloadTs = 1_700_000_000.25;
