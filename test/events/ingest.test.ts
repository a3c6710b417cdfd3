// RankIngest without sockets: the replay path's edge cases with a scripted replay function,
// and a fuzz run of random frames (the process must never die on input).

import fc from "fast-check";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { encodeSeq } from "../../control-plane/src/events/frames.ts";
import type { ReplayResult } from "../../control-plane/src/events/replay-client.ts";
import { ThrottledLog } from "../../control-plane/src/events/stats.ts";
import type { EventSink } from "../../control-plane/src/vocabulary/kv-events.ts";
import { RecordingSink, until } from "./harness.ts";
import { deferredReplay, makeIngest } from "./ingest-kit.ts";
import { batch, LATER_TS, range, storedArray } from "./msgspec.ts";

const T = Buffer.from("kv");
const payload = (h: number) => batch([storedArray({ hashes: [h], tokens: range(0, 4), blockSize: 4 })], 0);
const frames = (seq: number) => [T, encodeSeq(seq), payload(seq)];
const replayed = (seqs: number[]) => seqs.map((seq) => ({ seq, topic: T, payload: payload(seq) }));

/** makeIngest with this file's smaller default queue (100 batches). */
function make(
  replay: ((from: number) => Promise<ReplayResult>) | null,
  sink: EventSink = new RecordingSink(),
  maxPending = 100,
) {
  return makeIngest(replay, { sink, maxPending });
}

describe("RankIngest restarts", () => {
  it("tells a restart that repeats the last sequence number from a redelivery by its content", () => {
    const { ingest, stats } = make(null);
    ingest.onFrames([T, encodeSeq(0), payload(100)]);
    ingest.onFrames([T, encodeSeq(0), payload(100)]); // the same batch again: a duplicate
    expect(stats.dropped.duplicate).toBe(1);
    expect(stats.resets.restart).toBe(0);
    ingest.onFrames([T, encodeSeq(0), payload(200)]); // a new engine's first batch
    expect(stats.resets.restart).toBe(1);
    expect(stats.events.BlockStored).toBe(2);
  });
});

/** Another engine process: same numbers, other content (its clock is later). */
const other = (seq: number, ts = LATER_TS) =>
  batch([storedArray({ hashes: [5000 + seq], tokens: range(0, 4), blockSize: 4 })], 0, ts);
const otherFrames = (seq: number, ts?: number) => [T, encodeSeq(seq), other(seq, ts)];
const otherReplayed = (seqs: number[]) => seqs.map((seq) => ({ seq, topic: T, payload: other(seq) }));

describe("RankIngest after a lost connection", () => {
  it("does not take a new engine's next-numbered batch for the old stream (the flaky restart)", async () => {
    const d = deferredReplay();
    const { ingest, stats, sink } = make(d.fn);
    for (const s of [0, 1, 2]) ingest.onFrames(frames(s));
    ingest.connectionLost();
    // The new engine's 0..2 went by while we reconnected; its 3 is exactly the number we expect.
    ingest.onFrames(otherFrames(3));
    expect(stats.pending).toBe(1); // held, not applied
    expect(d.calls).toEqual([0]);
    d.release({ ok: true, batches: otherReplayed([0, 1, 2, 3]) });
    await ingest.idle();
    expect((sink as RecordingSink).trace()).toEqual([
      "0:BlockStored",
      "1:BlockStored",
      "2:BlockStored",
      "reset:restart",
      ...range(0, 4).map((s) => `${s}:BlockStored`),
    ]);
    // The live 3 was read before the new engine's buffer was asked for: it is in the answer.
    expect(stats.dropped.stale).toBe(1);
    expect(stats.disconnects).toBe(1);
  });

  it("notices an idle engine's restart when the connection is back: its buffer lacks our batches", async () => {
    const calls: number[] = [];
    const { ingest, stats, sink } = make(async (from) => {
      calls.push(from);
      return { ok: true, batches: [] }; // a new engine that has published nothing yet
    });
    for (const s of [0, 1, 2]) ingest.onFrames(frames(s));
    ingest.connectionLost();
    ingest.connected();
    await ingest.idle();
    expect(calls).toEqual([0]);
    expect((sink as RecordingSink).trace()).toEqual([
      "0:BlockStored",
      "1:BlockStored",
      "2:BlockStored",
      "reset:restart",
    ]);
    expect(stats.resets).toEqual({ gap: 0, restart: 1 });
  });

  it("keeps the stream of an engine that went on, filling what it published meanwhile", async () => {
    const d = deferredReplay();
    const { ingest, stats, sink } = make(d.fn);
    for (const s of [0, 1, 2]) ingest.onFrames(frames(s));
    ingest.connectionLost();
    ingest.onFrames(frames(5)); // 3 and 4 were published while we were away
    ingest.connected(); // a replay is already asked for: nothing more
    expect(d.calls).toEqual([0]);
    d.release({ ok: true, batches: replayed(range(0, 6)) });
    await ingest.idle();
    expect((sink as RecordingSink).trace()).toEqual(range(0, 6).map((s) => `${s}:BlockStored`));
    expect(stats.resets).toEqual({ gap: 0, restart: 0 });
    expect(stats.replays.ok).toBe(1);
    expect(stats.dropped.duplicate).toBe(1); // live 5, also replayed
  });

  it("compares the whole remembered window: new-engine batches read before the loss was noticed", async () => {
    const calls: number[] = [];
    const { ingest, sink } = make(async (from) => {
      calls.push(from);
      return { ok: true, batches: otherReplayed(range(from, 7 - from)) };
    });
    for (const s of range(0, 5)) ingest.onFrames(frames(s));
    // The disconnect event is read late: the new engine's 5 and 6 (its own numbering) pass as ours.
    ingest.onFrames(otherFrames(5));
    ingest.onFrames(otherFrames(6));
    ingest.connectionLost();
    ingest.connected();
    await ingest.idle();
    expect(calls).toEqual([0]);
    expect((sink as RecordingSink).trace().slice(7)).toEqual([
      "reset:restart",
      ...range(0, 7).map((s) => `${s}:BlockStored`),
    ]);
  });

  it("a restart found from a later window fetches the new engine from 0", async () => {
    const calls: number[] = [];
    const { ingest, sink } = make(async (from) => {
      calls.push(from);
      return { ok: true, batches: otherReplayed(range(from, 40 - from)) };
    });
    for (const s of range(0, 39)) ingest.onFrames(frames(s)); // more than the window remembers
    ingest.connectionLost();
    ingest.connected();
    await ingest.idle();
    expect(calls).toEqual([7, 0]); // the window's oldest, then the new engine from its start
    expect((sink as RecordingSink).trace().slice(39)).toEqual([
      "reset:restart",
      ...range(0, 40).map((s) => `${s}:BlockStored`),
    ]);
  });

  it("checks again after a replay that was running when the connection dropped", async () => {
    const d = deferredReplay();
    const { ingest, sink } = make(d.fn);
    ingest.connected(); // a new subscription: catch-up from 0
    ingest.connectionLost(); // ... answered, perhaps, by the engine that is going away
    d.release({ ok: true, batches: replayed([0, 1]) });
    await until(() => d.calls.length === 2);
    expect(d.calls).toEqual([0, 0]); // then a verification of what it gave
    d.release({ ok: true, batches: [] }); // the new engine holds nothing
    await ingest.idle();
    expect((sink as RecordingSink).trace()).toEqual(["0:BlockStored", "1:BlockStored", "reset:restart"]);
  });

  it("without a replay endpoint, a reconnect clears the rank: nothing can tell a restart", () => {
    const { ingest, stats, sink } = make(null);
    for (const s of [0, 1, 2]) ingest.onFrames(frames(s));
    ingest.connectionLost();
    ingest.onFrames(otherFrames(3));
    expect((sink as RecordingSink).trace()).toEqual([
      "0:BlockStored",
      "1:BlockStored",
      "2:BlockStored",
      "reset:gap",
      "3:BlockStored",
    ]);
    expect(stats.resets.gap).toBe(1);
    // A reconnect before anything was applied is no doubt at all.
    const fresh = make(null);
    fresh.ingest.connectionLost();
    fresh.ingest.onFrames(frames(0));
    expect(fresh.stats.resets).toEqual({ gap: 0, restart: 0 });
  });

  it("checks a batch whose clock went back against the replay buffer, once", async () => {
    // Another engine, whose clock is behind the old one's, continues our numbers.
    const a = make(async () => ({
      ok: true,
      batches: otherReplayed([0, 1, 2]).map((b) => ({ ...b, payload: other(b.seq, 1e9) })),
    }));
    for (const s of [0, 1]) a.ingest.onFrames(frames(s));
    a.ingest.onFrames(otherFrames(2, 1e9));
    await a.ingest.idle();
    expect((a.sink as RecordingSink).trace()).toEqual([
      "0:BlockStored",
      "1:BlockStored",
      "reset:restart",
      "0:BlockStored",
      "1:BlockStored",
      "2:BlockStored",
    ]);
    // The same engine, its clock stepped back: the replay confirms it, the batch is applied once.
    const stepped = batch([storedArray({ hashes: [2], tokens: range(0, 4), blockSize: 4 })], 0, 1e9);
    const calls: number[] = [];
    const b = make(async (from) => {
      calls.push(from);
      return { ok: true, batches: [...replayed([0, 1]), { seq: 2, topic: T, payload: stepped }] };
    });
    for (const s of [0, 1]) b.ingest.onFrames(frames(s));
    b.ingest.onFrames([T, encodeSeq(2), stepped]);
    await b.ingest.idle();
    expect(calls).toEqual([0]);
    expect((b.sink as RecordingSink).trace()).toEqual(["0:BlockStored", "1:BlockStored", "2:BlockStored"]);
    expect(b.stats.resets).toEqual({ gap: 0, restart: 0 });
  });
});

describe("RankIngest on a new subscription", () => {
  it("asks what the engine holds as soon as a connection is up, without waiting for traffic", async () => {
    const calls: number[] = [];
    const { ingest, stats, sink } = make(async (from) => {
      calls.push(from);
      return { ok: true, batches: replayed(range(0, 4)) };
    });
    ingest.connected();
    await ingest.idle();
    expect(calls).toEqual([0]);
    expect((sink as RecordingSink).trace()).toEqual(range(0, 4).map((s) => `${s}:BlockStored`));
    expect(stats.resets).toEqual({ gap: 0, restart: 0 });
    ingest.connected(); // a stream under way: a handshake alone is no reason to ask again
    await ingest.idle();
    expect(calls).toEqual([0]);
  });
});

describe("RankIngest replay path", () => {
  it("queues live batches during a replay and drops the ones replay already delivered", async () => {
    const d = deferredReplay();
    const { ingest, stats, sink } = make(d.fn);
    ingest.onFrames(frames(0));
    ingest.onFrames(frames(3)); // gap: 1, 2 missing
    ingest.onFrames(frames(4));
    ingest.onFrames(frames(5));
    // Asked from the last applied batch (0), to check it is still the same engine.
    expect(d.calls).toEqual([0]);
    expect(stats.pending).toBe(3);
    d.release({ ok: true, batches: replayed([0, 1, 2, 3, 4]) });
    await ingest.idle();
    expect((sink as RecordingSink).trace()).toEqual(range(0, 6).map((s) => `${s}:BlockStored`));
    expect(stats.dropped.duplicate).toBe(2); // live 3 and 4
    expect(stats.pending).toBe(0);
  });

  it("resets once when the replayed batches have a hole of their own", async () => {
    const d = deferredReplay();
    const { ingest, stats, sink } = make(d.fn);
    ingest.onFrames(frames(0));
    ingest.onFrames(frames(4));
    d.release({ ok: true, batches: replayed([0, 1, 3, 4]) });
    await ingest.idle();
    expect((sink as RecordingSink).trace()).toEqual([
      "0:BlockStored",
      "1:BlockStored",
      "reset:gap",
      "3:BlockStored",
      "4:BlockStored",
    ]);
    expect(stats.resets.gap).toBe(1);
  });

  it("does not loop through replays when the engine cannot fill a hole", async () => {
    const calls: number[] = [];
    const { ingest, stats, sink } = make(async (from) => {
      calls.push(from);
      return { ok: true, batches: replayed([from, from + 1]) }; // stops short of the trigger
    });
    ingest.onFrames(frames(0));
    ingest.onFrames(frames(5));
    await ingest.idle();
    expect(calls).toEqual([0]);
    expect((sink as RecordingSink).trace()).toEqual([
      "0:BlockStored",
      "1:BlockStored",
      "reset:gap",
      "5:BlockStored",
    ]);
    expect(stats.resets.gap).toBe(1);
  });

  it("detects an engine that restarted unseen and passed our last number (replay probe)", async () => {
    const newEngine = (seq: number) =>
      batch([storedArray({ hashes: [1000 + seq], tokens: range(0, 4), blockSize: 4 })], 0, LATER_TS);
    const calls: number[] = [];
    const { ingest, stats, sink } = make(async (from) => {
      calls.push(from);
      return {
        ok: true,
        batches: range(from, 6 - from).map((seq) => ({ seq, topic: T, payload: newEngine(seq) })),
      };
    });
    for (const s of [0, 1, 2]) ingest.onFrames(frames(s));
    ingest.onFrames([T, encodeSeq(5), newEngine(5)]); // looks like a gap 3..4
    await ingest.idle();
    expect(calls).toEqual([0]); // from the oldest batch remembered: the new engine's 0 differs
    expect((sink as RecordingSink).trace()).toEqual([
      "0:BlockStored",
      "1:BlockStored",
      "2:BlockStored",
      "reset:restart",
      ...range(0, 6).map((s) => `${s}:BlockStored`),
    ]);
    expect(stats.resets).toEqual({ gap: 0, restart: 1 });
  });

  it("treats a failed catch-up on first connect as no reset (nothing indexed yet)", async () => {
    const { ingest, stats, sink } = make(async () => ({ ok: false, reason: "timeout", batches: [] }));
    ingest.onFrames(frames(7));
    await ingest.idle();
    expect((sink as RecordingSink).trace()).toEqual(["7:BlockStored"]);
    expect(stats.resets).toEqual({ gap: 0, restart: 0 });
    expect(stats.replays.failed).toBe(1);
  });

  it("bounds the queue during a replay; what it drops is asked for again later", async () => {
    const d = deferredReplay();
    const { ingest, stats, sink } = make(d.fn, new RecordingSink(), 2);
    ingest.onFrames(frames(0));
    ingest.onFrames(frames(2)); // gap → replay; queued
    ingest.onFrames(frames(3)); // queued
    ingest.onFrames(frames(4)); // over the limit: dropped
    ingest.onFrames(frames(5)); // dropped
    d.release({ ok: true, batches: replayed([0, 1, 2]) });
    await ingest.idle();
    ingest.onFrames(frames(6)); // 4 and 5 are missing: a new replay
    expect(d.calls).toEqual([0, 0]);
    d.release({ ok: true, batches: replayed([3, 4, 5, 6]) });
    await ingest.idle();
    expect((sink as RecordingSink).trace()).toEqual(range(0, 7).map((s) => `${s}:BlockStored`));
    expect(stats.dropped.pending_overflow).toBe(2);
    expect(stats.resets.gap).toBe(0);
  });

  it("survives a sink that throws, counting it", () => {
    const sink: EventSink = {
      event: () => {
        throw new Error("index down");
      },
      rankReset: () => {
        throw new Error("index down");
      },
    };
    const { ingest, stats } = make(null, sink);
    ingest.onFrames(frames(0));
    ingest.onFrames(frames(2));
    expect(stats.dropped.sink_error).toBe(3);
    expect(stats.lastSeq).toBe(2);
  });

  it("a sink whose batch fast path fails gets the batch event by event, counted once", () => {
    const recording = new RecordingSink();
    let applied = 0;
    let scans = 0;
    const sink: EventSink = {
      event: (slot, event, meta) => recording.event(slot, event, meta),
      rankReset: (slot, reason) => recording.rankReset(slot, reason),
      scanBatch: () => {
        if (scans++ % 2 === 0) throw new Error("core trapped");
        return null; // refused: the decoder takes it
      },
      applyScanned: () => {
        applied++;
      },
    };
    const { ingest, stats } = make(null, sink);
    for (let seq = 0; seq < 4; seq++) ingest.onFrames(frames(seq));
    expect(recording.trace()).toEqual(range(0, 4).map((s) => `${s}:BlockStored`));
    expect(applied).toBe(0);
    expect(stats.dropped.sink_error).toBe(2);
    expect(stats.storedBlocks).toBe(4);
  });

  it("drops batches whose topic does not match the subscription prefix", () => {
    const { ingest, stats } = make(null);
    ingest.onFrames([Buffer.from("other"), encodeSeq(0), payload(0)]);
    ingest.onFrames([Buffer.from("k"), encodeSeq(0), payload(0)]);
    ingest.onFrames([Buffer.from("kV"), encodeSeq(0), payload(0)]);
    expect(stats.dropped.topic).toBe(3);
    expect(stats.lastSeq).toBeNull();
    // A topic the subscription is a prefix of is the engine's (ZMQ SUB filters by prefix).
    ingest.onFrames([Buffer.from("kv@rank0"), encodeSeq(0), payload(0)]);
    expect(stats.lastSeq).toBe(0);
  });
});

describe("fuzz", () => {
  const frame = fc.oneof(
    fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)),
    fc.nat({ max: 12 }).map((n) => encodeSeq(n)),
    fc.constant(T),
    fc.nat({ max: 5 }).map((n) => payload(n)),
    fc.constant(Buffer.alloc(8, 0xff)),
  );

  it("never throws on random multipart messages, with or without replay", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(frame, { maxLength: 5 }), { maxLength: 40 }),
        fc.boolean(),
        async (msgs, withReplay) => {
          const { ingest, stats } = make(
            withReplay ? async (from) => ({ ok: true, batches: replayed(range(from, 3)) }) : null,
          );
          for (const m of msgs) {
            ingest.onFrames(m);
            if (withReplay) await ingest.idle();
          }
          await ingest.idle();
          expect(stats.replaying).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("properties", () => {
  // What the PUB/SUB path can do to a stream: lose messages (never reorder). Live subsets of
  // 0..n-1 that always contain the last one, delivered in order, a duplicate now and then.
  const stream = fc
    .integer({ min: 1, max: 60 })
    .chain((n) =>
      fc.tuple(
        fc.constant(n),
        fc.array(fc.boolean(), { minLength: n, maxLength: n }),
        fc.array(fc.boolean(), { minLength: n, maxLength: n }),
      ),
    );

  it("with a replay buffer holding everything, the sink sees 0..n-1 exactly once, in order, no reset", async () => {
    await fc.assert(
      fc.asyncProperty(stream, async ([n, keep, dup]) => {
        const { ingest, stats, sink } = make(async (from) => ({
          ok: true,
          batches: replayed(range(from, n - from)),
        }));
        for (let s = 0; s < n; s++) {
          if (!keep[s] && s !== n - 1) continue;
          ingest.onFrames(frames(s));
          if (dup[s]) ingest.onFrames(frames(s));
        }
        await ingest.idle();
        expect((sink as RecordingSink).trace()).toEqual(range(0, n).map((s) => `${s}:BlockStored`));
        expect(stats.resets).toEqual({ gap: 0, restart: 0 });
      }),
      { numRuns: 200 },
    );
  });

  it("with a short replay buffer, applied sequences only grow between resets and end at n-1", async () => {
    await fc.assert(
      fc.asyncProperty(stream, fc.integer({ min: 1, max: 10 }), async ([n, keep], size) => {
        const { ingest, sink } = make(async (from) => {
          const first = Math.max(from, n - size);
          return { ok: true, batches: replayed(range(first, n - first)) };
        });
        for (let s = 0; s < n; s++) {
          if (!keep[s] && s !== n - 1) continue;
          ingest.onFrames(frames(s));
          await ingest.idle(); // the engine's buffer is already final here, so order is free
        }
        let last = -1;
        for (const d of (sink as RecordingSink).log) {
          if (d.kind === "reset") last = -1;
          else {
            expect(d.meta.seq).toBeGreaterThan(last);
            last = d.meta.seq;
          }
        }
        expect(last).toBe(n - 1);
      }),
      { numRuns: 200 },
    );
  });
});

describe("ThrottledLog", () => {
  it("logs a key at most once per interval and reports how many it held back", () => {
    const lines: unknown[] = [];
    const logger = pino({ level: "warn" }, { write: (s: string) => lines.push(JSON.parse(s)) });
    let now = 0;
    const log = new ThrottledLog(logger, 1_000, () => now);
    for (let i = 0; i < 5; i++) log.warn("a", { i }, "bad");
    log.warn("b", {}, "other");
    now = 1_500;
    log.warn("a", { i: 9 }, "bad");
    expect(lines).toMatchObject([{ i: 0 }, { msg: "other" }, { i: 9, suppressed: 4 }]);
  });
});
