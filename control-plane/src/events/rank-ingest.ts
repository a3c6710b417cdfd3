// The per-rank ingest state machine: raw frames in, normalised events and resets out to the
// sink, in sequence order. No sockets here (rank-subscriber.ts owns those); replay is an
// injected function, so this runs the same under tests and in production.
//
// Flow: a live message in order is applied at once. A gap starts a replay (from the last
// applied batch, to catch a restarted engine); while it runs, live messages are queued, then
// the replayed batches are applied, then the queue is drained with duplicates dropped. A hole
// nobody can fill (no replay endpoint, replay failed, or it started past the missing batch)
// clears the rank.

import { decodeBatch } from "./batch-decoder.ts";
import { type LiveMessage, parseLiveMessage } from "./frames.ts";
import type { ReplayedBatch, ReplayFn } from "./replay-client.ts";
import { SequenceTracker } from "./sequence.ts";
import { bump, type DropReason, type RankStats, type ThrottledLog } from "./stats.ts";
import type { BatchMeta, EventSink, RankResetReason } from "./types.ts";

export interface RankIngestOptions {
  slotKey: string;
  /** The global DP rank this stream belongs to; batches stamped with another are dropped. */
  rank: number;
  /** Topic prefix (the SUB filter); replay replies and bound sockets are checked against it. */
  topic: string;
  sink: EventSink;
  stats: RankStats;
  log: ThrottledLog;
  replay: ReplayFn | null;
  /** Live messages kept while a replay runs; past this they are dropped (a later gap again). */
  maxPending: number;
  now?: () => number;
}

interface Queued {
  msg: LiveMessage;
  receivedAt: number;
}

export class RankIngest {
  private readonly tracker = new SequenceTracker();
  private readonly topic: Buffer;
  private readonly now: () => number;
  private pending: Queued[] = [];
  private pendingHead = 0;
  private replaying = false;
  /** Start of the last replay while its queue drains: lower sequences there are duplicates. */
  private dedupeFrom: number | null = null;
  /** Set between a replay's end and the queue being empty: a further hole resets, so an engine
   * that cannot fill it never loops us through replays. */
  private afterReplay = false;
  private stopped = false;
  private inFlight: Promise<void> | null = null;
  /** The last batch applied, to tell a restarted engine from a gap (see startReplay). */
  private last: { seq: number; payload: Buffer } | null = null;

  constructor(private readonly o: RankIngestOptions) {
    this.topic = Buffer.from(o.topic, "utf8");
    this.now = o.now ?? Date.now;
  }

  /** Resolves when no replay is running (for orderly shutdown and tests). */
  async idle(): Promise<void> {
    while (this.inFlight !== null) await this.inFlight;
  }

  stop(): void {
    this.stopped = true;
    this.pending = [];
    this.pendingHead = 0;
    this.o.stats.pending = 0;
  }

  /** One multipart message as read from the SUB socket. Never throws. */
  onFrames(frames: Buffer[]): void {
    if (this.stopped) return;
    try {
      this.receive(frames);
    } catch (err) {
      // Input cannot get here (every shape is checked); a bug must still not end the stream.
      this.drop("internal", { err: String(err) }, "KV event ingest failed on a message");
    }
  }

  private receive(frames: Buffer[]): void {
    const receivedAt = this.now();
    this.o.stats.lastMessageAt = receivedAt;
    const parsed = parseLiveMessage(frames);
    if (!parsed.ok) {
      this.drop(parsed.error, { frames: frames.length }, "malformed KV event frames");
      return;
    }
    if (!this.topicMatches(parsed.value.topic)) {
      this.drop("topic", {}, "KV event topic does not match the subscription");
      return;
    }
    const q: Queued = { msg: parsed.value, receivedAt };
    if (this.replaying) {
      this.enqueue(q);
      return;
    }
    this.process(q);
  }

  private topicMatches(topic: Buffer): boolean {
    return topic.length >= this.topic.length && topic.subarray(0, this.topic.length).equals(this.topic);
  }

  private enqueue(q: Queued): void {
    if (this.pending.length - this.pendingHead >= this.o.maxPending) {
      // The hole this leaves shows up as a gap again later (replayed if the engine still has
      // it, else a reset), so dropping here never loses track silently.
      this.drop("pending_overflow", {}, "too many KV event batches queued during replay");
      return;
    }
    this.pending.push(q);
    this.o.stats.pending = this.pending.length - this.pendingHead;
  }

  /** The engine restarted: drop this rank's index and start over with `q` as a first batch. */
  private restartWith(q: Queued): boolean {
    this.reset("restart", { seq: q.msg.seq, lastSeq: this.tracker.lastSeen });
    this.tracker.restart();
    this.last = null;
    this.dedupeFrom = null;
    return this.process(q);
  }

  /** Handles one live message; returns false if it started a replay (the message is queued). */
  private process(q: Queued): boolean {
    const { seq } = q.msg;
    const action = this.tracker.classify(seq, this.dedupeFrom);
    switch (action.kind) {
      case "apply":
        this.consume(seq, q.msg.payload, q.receivedAt, false);
        return true;
      case "duplicate":
        // The same number with other content is not a redelivery: the engine restarted after
        // publishing as many batches as before (e.g. one), so the number alone cannot tell.
        if (this.dedupeFrom === null && this.last?.seq === seq && !this.last.payload.equals(q.msg.payload)) {
          return this.restartWith(q);
        }
        this.drop("duplicate", { seq }, "duplicate KV event batch");
        return true;
      case "restart":
        return this.restartWith(q);
      case "gap": {
        if (!action.initial) {
          this.o.stats.gaps++;
          this.o.stats.missedBatches += seq - action.from;
        }
        if (this.o.replay !== null && !this.afterReplay) {
          const probe = !action.initial && this.last?.seq === action.from - 1 ? this.last : null;
          this.startReplay(action.from, action.initial, q, probe);
          return false;
        }
        // Nobody can fill the hole: what the index holds for this rank may be wrong.
        if (!action.initial) this.reset("gap", { from: action.from, seq });
        this.consume(seq, q.msg.payload, q.receivedAt, false);
        return true;
      }
    }
  }

  /**
   * Replays from `from`, or from the last applied batch when `probe` is given: an engine that
   * restarted while we were not listening and has since passed our last number looks like a
   * plain gap, but its batch at that number is not the one we applied. Comparing the two
   * (the payload carries the batch timestamp) tells them apart.
   */
  private startReplay(
    from: number,
    initial: boolean,
    trigger: Queued,
    probe: { seq: number; payload: Buffer } | null,
  ): void {
    const replay = this.o.replay as ReplayFn;
    this.replaying = true;
    this.o.stats.replaying = true;
    // The triggering message goes first in the queue; live ones arriving meanwhile follow it.
    this.pending.splice(this.pendingHead, 0, trigger);
    this.o.stats.pending = this.pending.length - this.pendingHead;
    const run = async (): Promise<void> => {
      let result: Awaited<ReturnType<ReplayFn>>;
      try {
        result = await replay(probe === null ? from : probe.seq);
      } catch {
        result = { ok: false, reason: "socket", batches: [] };
      }
      if (this.stopped) return;
      try {
        this.finishReplay(from, initial, result.ok, result.batches, result.ok ? null : result.reason, probe);
      } catch (err) {
        // As in onFrames: never let a bug become an unhandled rejection (a process exit).
        this.replaying = false;
        this.o.stats.replaying = false;
        this.drop("internal", { err: String(err) }, "KV event replay handling failed");
      }
    };
    this.inFlight = run().finally(() => {
      this.inFlight = null;
    });
  }

  private finishReplay(
    from: number,
    initial: boolean,
    ok: boolean,
    replayed: ReplayedBatch[],
    failure: string | null,
    probe: { seq: number; payload: Buffer } | null,
  ): void {
    let batches = replayed;
    const head = batches[0];
    if (probe !== null && head !== undefined && head.seq === probe.seq) {
      if (!head.payload.equals(probe.payload)) {
        // Not the batch we applied under that number: a new engine. Start over from its 0.
        this.o.stats.replays.replayedBatches += batches.length;
        this.reset("restart", { seq: probe.seq, detectedBy: "replay" });
        this.tracker.restart();
        this.replaying = false;
        this.o.stats.replaying = false;
        this.dedupeFrom = null;
        this.afterReplay = false;
        this.drain(); // the trigger now looks like a first message: catch-up replay from 0
        return;
      }
      batches = batches.slice(1);
    }
    const first = batches[0];
    // The engine sends every buffered batch ≥ from; if the first is later, the missing ones
    // have already left its buffer (buffer_steps).
    const covered = ok && first !== undefined && first.seq <= from;
    if (covered) this.o.stats.replays.ok++;
    else {
      this.o.stats.replays.failed++;
      this.o.log.warn(
        `${this.o.slotKey}:replay`,
        { slot: this.o.slotKey, from, first: first?.seq ?? null, failure, initial },
        "KV event replay could not cover the gap",
      );
    }
    this.o.stats.replays.replayedBatches += replayed.length;
    if (!covered) {
      // The missing batches are gone for good. After a first connect the index holds nothing
      // for this rank yet, so there is nothing to clear.
      if (!initial) this.reset("gap", { from, first: first?.seq ?? null });
      // Whatever is applied next starts a fresh stream; the hole before it is accounted for.
      this.tracker.restart();
    }
    let holeReset = false;
    const receivedAt = this.now();
    for (const b of batches) {
      if (b.topic !== null && !this.topicMatches(b.topic)) {
        this.drop("topic", {}, "replayed KV event topic does not match the subscription");
        continue;
      }
      const expected = this.tracker.expected;
      if (expected !== null && b.seq < expected) continue; // applied live before the gap
      if (expected !== null && b.seq > expected && !holeReset) {
        this.reset("gap", { from: expected, seq: b.seq });
        holeReset = true;
      }
      this.consume(b.seq, b.payload, receivedAt, true);
    }
    this.replaying = false;
    this.o.stats.replaying = false;
    this.dedupeFrom = from;
    this.afterReplay = true;
    this.drain();
  }

  private drain(): void {
    while (this.pendingHead < this.pending.length) {
      const q = this.pending[this.pendingHead] as Queued;
      this.pendingHead++;
      if (!this.process(q)) {
        // A new replay started and re-queued q at pendingHead; it resumes the drain later.
        this.compact();
        return;
      }
    }
    this.pending = [];
    this.pendingHead = 0;
    this.o.stats.pending = 0;
    this.dedupeFrom = null;
    this.afterReplay = false;
  }

  private compact(): void {
    if (this.pendingHead > 0) {
      this.pending = this.pending.slice(this.pendingHead);
      this.pendingHead = 0;
    }
    this.o.stats.pending = this.pending.length;
  }

  private reset(reason: RankResetReason, fields: Record<string, unknown>): void {
    this.o.stats.resets[reason]++;
    this.o.log.warn(
      `${this.o.slotKey}:reset:${reason}`,
      { slot: this.o.slotKey, reason, ...fields },
      "KV event stream broken; clearing this rank's index",
    );
    try {
      this.o.sink.rankReset(this.o.slotKey, reason);
    } catch (err) {
      this.drop("sink_error", { err: String(err) }, "KV event sink failed on reset");
    }
  }

  /** Consumes sequence `seq` (advancing the tracker even when its payload is unusable: the
   * batch did arrive, so it is not a gap) and hands its events to the sink. */
  private consume(seq: number, payload: Buffer, receivedAt: number, replayed: boolean): void {
    this.tracker.advance(seq);
    this.last = { seq, payload };
    const s = this.o.stats;
    s.lastSeq = seq;
    const decoded = decodeBatch(payload);
    if (!decoded.ok) {
      this.drop(decoded.error, { seq, bytes: payload.length }, "undecodable KV event batch");
      return;
    }
    const batch = decoded.batch;
    if (batch.rank !== null && batch.rank !== this.o.rank) {
      this.drop("rank_mismatch", { seq, batchRank: batch.rank }, "KV event batch from another DP rank");
      return;
    }
    s.batches++;
    s.lastBatchTs = batch.ts;
    for (const k in batch.ignored) bump(s.ignored, k, batch.ignored[k as keyof typeof batch.ignored]);
    for (const k in batch.errors) {
      const n = batch.errors[k as keyof typeof batch.errors] ?? 0;
      this.drop(k as DropReason, { seq }, "malformed KV event dropped", n);
    }
    const meta: BatchMeta = { seq, ts: batch.ts, receivedAt, replayed };
    for (const ev of batch.events) {
      s.events[ev.type]++;
      if (ev.type === "BlockStored") {
        s.storedBlocks += ev.hashes.length;
        bump(s.storedByMedium, ev.medium, ev.hashes.length);
      } else if (ev.type === "BlockRemoved") {
        s.removedBlocks += ev.hashes.length;
      }
      try {
        this.o.sink.event(this.o.slotKey, ev, meta);
      } catch (err) {
        this.drop("sink_error", { seq, err: String(err) }, "KV event sink failed");
      }
    }
  }

  private drop(reason: DropReason, fields: Record<string, unknown>, msg: string, n = 1): void {
    bump(this.o.stats.dropped, reason, n);
    this.o.log.warn(`${this.o.slotKey}:${reason}`, { slot: this.o.slotKey, reason, ...fields }, msg);
  }
}
