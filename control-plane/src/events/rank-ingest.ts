// The per-rank ingest state machine: raw frames in, normalised events and resets out to the
// sink, in sequence order. No sockets here (rank-subscriber.ts owns those and reports the
// connection's ups and downs); replay is an injected function, so this runs the same under
// tests and in production.
//
// Flow: a live message in order is applied at once. Anything that makes the stream doubtful —
// a gap, a lost connection, a batch timestamp going backwards — is settled against the
// engine's replay buffer before more is applied: live messages are queued meanwhile, the
// replay tells whether it is still the engine we were following (then it fills what we
// missed) or a new one (then the rank is cleared and rebuilt from the new engine's buffer),
// then the queue is drained with duplicates dropped. A hole nobody can fill (no replay
// endpoint, replay failed, or the missing batches left the engine's buffer) clears the rank.
// A new subscription asks the engine for everything it still holds, so an idle engine's
// cache is known without waiting for it to publish. The rules: docs/kv-events.md.
//
// A replay's answer and the queue after it are applied in slices (slices.ts): an engine's
// buffer holds up to 10 000 batches, and the event loop must keep serving meanwhile. Live
// messages arriving until the queue is empty are queued behind it, so the order holds.

import type { BatchMeta, EventSink, RankResetReason, ScannedBatch } from "../vocabulary/kv-events.ts";
import { plausibleBatchTs } from "./batch-clock.ts";
import { type BatchResult, decodeBatch } from "./batch-decoder.ts";
import { type LiveMessage, parseLiveMessage } from "./frames.ts";
import { PendingQueue } from "./pending-queue.ts";
import type { ReplayedBatch, ReplayFn, ReplayResult } from "./replay-client.ts";
import { SequenceTracker } from "./sequence.ts";
import { Slicer } from "./slices.ts";
import { bump, type DropReason, type RankStats, type ThrottledLog } from "./stats.ts";
import { StreamHistory } from "./stream-history.ts";

/** A payload as read: decoded into events, scanned whole by the sink's fast path, or refused
 * for a timestamp no engine can send (batch-clock.ts). */
type ReadBatch = BatchResult | ScannedRead | { ok: false; error: "batch_ts" };
/** A payload the sink's fast path read: valid, like the scan, until the next read. */
type ScannedRead = { ok: true; scanned: ScannedBatch };

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
  /** Arrival order: tells what was read before a replay request went out. */
  arrival: number;
}

export class RankIngest {
  private readonly tracker = new SequenceTracker();
  private readonly history = new StreamHistory();
  private readonly topic: Buffer;
  private readonly now: () => number;
  private readonly pending = new PendingQueue<Queued>();
  private arrivals = 0;
  /** From a replay request until its answer and the queue behind it are applied: live
   * messages are queued meanwhile (stats.replaying mirrors it). */
  private replaying = false;
  /**
   * What the last replay delivered, [from, through]: live copies of those batches are
   * duplicates, not an engine restart. The engine answers a replay from memory at once, while
   * live copies of the same batches may still be on their way through the PUB socket, and
   * arrive after the queue has drained; so the window stays open until a live batch past
   * `through` is applied. Live messages read after the answer (arrival ≥ answeredAt) must
   * match what was applied where we remember it: another content under a replayed number is a
   * newer engine.
   */
  private dedupe: { from: number; through: number; answeredAt: number } | null = null;
  /** Set between a replay's end and the queue being empty: a further hole resets, so an engine
   * that cannot fill it never loops us through replays. */
  private afterReplay = false;
  /** The stream must be checked against the engine's replay buffer before more is applied (the
   * connection dropped, or a batch's clock went back); live messages are held until then. */
  private suspect = false;
  /** A restart was found and the new engine's buffer is being fetched from 0: what was read
   * before that request is either in its answer or the dead engine's last words. */
  private rebuilding = false;
  /** Engine ts of the last applied batch (null at the start of a stream). */
  private lastTs: number | null = null;
  private stopped = false;
  private inFlight: Promise<void> | null = null;
  /** What read() answers for a scanned payload, rewritten by the next read: the sink's scan is
   * good until its next one anyway (EventSink.scanBatch), and a batch's answer is used before
   * the next batch is read. One object per rank instead of one per batch. */
  private scannedRead: ScannedRead | null = null;

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
    this.pending.clear();
    this.o.stats.pending = 0;
  }

  /**
   * A connection to the engine is up (a ZMQ handshake; in bind mode, any engine's). After a
   * loss this starts the verification; on a stream not yet started it fetches whatever the
   * engine still holds, so an idle engine is indexed without waiting for it to publish.
   */
  connected(): void {
    if (this.stopped || this.replaying) return;
    if (this.suspect || (this.tracker.expected === null && this.o.replay !== null)) this.resync(null);
  }

  /** The connection dropped: whoever answers next may be a restarted engine. Live messages are
   * held until the engine's replay buffer has told which. */
  connectionLost(): void {
    if (this.stopped) return;
    this.o.stats.disconnects++;
    // A replay running now may be answered by the engine that just went: check again after it.
    if (this.tracker.expected !== null || this.replaying) this.suspect = true;
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
    const q: Queued = { msg: parsed.value, receivedAt, arrival: this.arrivals++ };
    if (this.replaying || this.suspect) {
      this.enqueue(q);
      // A message is a connection too: settle the doubt now rather than wait for the event.
      if (!this.replaying) this.resync(null);
      return;
    }
    this.process(q);
  }

  private topicMatches(topic: Buffer): boolean {
    // compare() on a range: no view allocated per message; none at all for the empty prefix
    // (subscribed to everything), which every message matches.
    const n = this.topic.length;
    return n === 0 || (topic.length >= n && this.topic.compare(topic, 0, n) === 0);
  }

  private enqueue(q: Queued): void {
    if (this.pending.size >= this.o.maxPending) {
      // The hole this leaves shows up as a gap again later (replayed if the engine still has
      // it, else a reset), so dropping here never loses track silently.
      this.drop("pending_overflow", {}, "too many KV event batches queued during replay");
      return;
    }
    this.pending.push(q);
    this.o.stats.pending = this.pending.size;
  }

  /** Forgets the stream: the next batch applied starts a new one. */
  private clearStream(): void {
    this.tracker.restart();
    this.history.clear();
    this.lastTs = null;
    this.dedupe = null;
  }

  /** The engine restarted: drop this rank's index and start over with `q` as a first batch. */
  private restartWith(q: Queued): boolean {
    this.reset("restart", { seq: q.msg.seq, lastSeq: this.tracker.lastSeen });
    this.clearStream();
    return this.process(q);
  }

  /** Handles one live message; returns false if it started a replay (the message is queued). */
  private process(q: Queued): boolean {
    const { seq } = q.msg;
    const action = this.tracker.classify(seq, this.dedupe?.from ?? null);
    switch (action.kind) {
      case "apply": {
        const decoded = this.read(q.msg.payload);
        if (this.clockWentBack(decoded)) {
          this.log(
            "clock",
            { seq, ts: decoded.ok ? batchTs(decoded) : null, lastTs: this.lastTs },
            "KV event batch older than the last one; asking the engine's replay buffer",
          );
          this.resync(q);
          return false;
        }
        this.consume(seq, q.msg.payload, q.receivedAt, false, decoded);
        return true;
      }
      case "duplicate": {
        // The same number with other content is not a redelivery: the engine restarted after
        // publishing as many batches as before (e.g. one), so the number alone cannot tell.
        // Messages queued before a replay answered are not compared: the engine that answered
        // speaks for the stream, and those may be a dead engine's last words.
        const compare = this.dedupe === null || q.arrival >= this.dedupe.answeredAt;
        if (compare && this.history.matches(seq, q.msg.payload) === false) return this.restartWith(q);
        this.drop("duplicate", { seq }, "duplicate KV event batch");
        return true;
      }
      case "restart":
        return this.restartWith(q);
      case "gap": {
        if (!action.initial) {
          this.o.stats.gaps++;
          this.o.stats.missedBatches += seq - action.from;
        }
        if (this.o.replay !== null && !this.afterReplay) {
          this.resync(q);
          return false;
        }
        // Nobody can fill the hole: what the index holds for this rank may be wrong.
        if (!action.initial) this.reset("gap", { from: action.from, seq });
        this.consume(seq, q.msg.payload, q.receivedAt, false);
        return true;
      }
    }
  }

  /** A batch stamped earlier than the one before it: engines stamp with their wall clock, so
   * another process (or a clock stepped back) is speaking. Checked once per replay round. */
  private clockWentBack(decoded: ReadBatch): boolean {
    return (
      decoded.ok &&
      this.lastTs !== null &&
      batchTs(decoded) < this.lastTs &&
      this.o.replay !== null &&
      !this.afterReplay
    );
  }

  /**
   * Asks the engine's replay buffer, `trigger` (if any) first in the queue. With a stream under
   * way: a verification, from the oldest batch remembered (StreamHistory.verdict). Without one: a
   * catch-up from 0. Without a replay endpoint only a lost connection gets here: nothing can
   * tell a restarted engine from the old one, so the rank is cleared.
   */
  private resync(trigger: Queued | null): void {
    if (trigger !== null) {
      this.pending.unshift(trigger);
      this.o.stats.pending = this.pending.size;
    }
    const replay = this.o.replay;
    const wasSuspect = this.suspect;
    this.suspect = false; // this round answers it; a further loss sets it again
    if (replay === null) {
      if (wasSuspect && this.tracker.expected !== null) {
        this.reset("gap", { reason: "reconnected without a replay endpoint to check" });
        this.clearStream();
      }
      // Held only since the message that called us (each one settles the doubt at once): at
      // most a few, applied now.
      for (let q = this.pending.shift(); q !== undefined; q = this.pending.shift()) this.process(q);
      this.o.stats.pending = 0;
      return;
    }
    const verify = this.tracker.expected !== null;
    const from = verify ? (this.history.oldest as number) : 0;
    const requestedAfter = this.arrivals;
    this.replaying = true;
    this.o.stats.replaying = true;
    const run = async (): Promise<void> => {
      let result: ReplayResult;
      try {
        result = await replay(from);
      } catch {
        result = { ok: false, reason: "socket", batches: [] };
      }
      if (this.stopped) return;
      try {
        await this.finishReplay(verify, from, requestedAfter, result);
      } catch (err) {
        // As in onFrames: never let a bug become an unhandled rejection (a process exit).
        this.replaying = false;
        this.o.stats.replaying = false;
        this.drop("internal", { err: String(err) }, "KV event replay handling failed");
      }
    };
    // A replay's handling may start the next one (a restart found, a hole while draining):
    // only the newest clears the marker.
    const done: Promise<void> = run().finally(() => {
      if (this.inFlight === done) this.inFlight = null;
    });
    this.inFlight = done;
  }

  private async finishReplay(
    verify: boolean,
    from: number,
    requestedAfter: number,
    result: ReplayResult,
  ): Promise<void> {
    // What is read from here on was sent after the engine answered (see `dedupe`).
    const answeredAt = this.arrivals;
    const batches = result.batches;
    this.o.stats.replays.replayedBatches += batches.length;
    const failure = result.ok ? null : result.reason;
    if (!verify) {
      await this.finishCatchUp(from, requestedAfter, result.ok, batches, failure);
    } else if (!result.ok) {
      // Neither the engine's identity nor what we missed can be known.
      this.replayFailed(from, failure, batches.length);
      this.reset("gap", { from, failure });
      this.clearStream();
      await this.applyReplayed(batches);
    } else {
      const ours = batches.filter((b) => b.topic === null || this.topicMatches(b.topic));
      const verdict = this.history.verdict(ours, this.tracker.lastSeen as number);
      if (verdict === "restart") {
        this.reset("restart", { detectedBy: "replay", lastSeq: this.tracker.lastSeen });
        this.clearStream();
        if (from !== 0) {
          // Its first batches are below what we asked for: fetch the new engine from 0.
          this.rebuilding = true;
          this.resync(null);
          return;
        }
        this.o.stats.replays.ok++;
        this.dropStale(requestedAfter);
        await this.applyReplayed(batches);
      } else if (verdict === "unknown") {
        this.replayFailed(from, "buffer moved past our last batch", batches.length);
        this.reset("gap", { from, first: batches[0]?.seq ?? null });
        this.clearStream();
        await this.applyReplayed(batches);
      } else {
        const lastSeq = this.tracker.lastSeen as number;
        const next = batches.find((b) => b.seq > lastSeq);
        // The engine sends every buffered batch ≥ from: the first one after ours must be the
        // next number, or the ones between left its buffer (buffer_steps).
        if (next === undefined || next.seq === lastSeq + 1) this.o.stats.replays.ok++;
        else this.replayFailed(lastSeq + 1, "missing batches left the buffer", batches.length);
        await this.applyReplayed(batches);
      }
    }
    if (this.stopped) return;
    const through = this.tracker.lastSeen;
    this.dedupe = through === null ? null : { from, through, answeredAt };
    this.afterReplay = true;
    if (this.suspect) this.resync(null);
    else await this.drain();
  }

  /** Applies a catch-up from 0 (a new subscription, or the new engine after a restart). */
  private async finishCatchUp(
    from: number,
    requestedAfter: number,
    ok: boolean,
    batches: ReplayedBatch[],
    failure: string | null,
  ): Promise<void> {
    const first = batches[0];
    // Covered when it starts at the beginning; an engine that has published nothing answers
    // with the end marker alone.
    if (ok && (first === undefined || first.seq <= from)) this.o.stats.replays.ok++;
    else this.replayFailed(from, failure ?? "first batches left the buffer", batches.length);
    if (this.rebuilding) {
      this.rebuilding = false;
      this.dropStale(requestedAfter);
    }
    // Nothing is reset either way: the index holds nothing for this rank yet.
    await this.applyReplayed(batches);
  }

  private replayFailed(from: number, failure: string | null, got: number): void {
    this.o.stats.replays.failed++;
    this.log("replay", { from, failure, got }, "KV event replay could not cover what was missing");
  }

  /** Applies replayed batches in order after what the tracker has seen, in slices; a hole
   * resets once. Live messages meanwhile are queued (`replaying` is still set). */
  private async applyReplayed(batches: ReplayedBatch[]): Promise<void> {
    let holeReset = false;
    const receivedAt = this.now();
    const slicer = new Slicer();
    for (const b of batches) {
      if (slicer.due()) {
        await slicer.yield();
        if (this.stopped) return;
      }
      if (b.topic !== null && !this.topicMatches(b.topic)) {
        this.drop("topic", {}, "replayed KV event topic does not match the subscription");
        continue;
      }
      const expected = this.tracker.expected;
      if (expected !== null && b.seq < expected) continue; // applied before
      if (expected !== null && b.seq > expected && !holeReset) {
        this.reset("gap", { from: expected, seq: b.seq });
        holeReset = true;
      }
      this.consume(b.seq, b.payload, receivedAt, true);
    }
  }

  /** After a restart: messages read before the new engine's buffer was requested are in its
   * answer already, or were the dead engine's (still in the socket when it went). */
  private dropStale(requestedAfter: number): void {
    for (const q of this.pending.remove((q) => q.arrival < requestedAfter))
      this.drop("stale", { seq: q.msg.seq }, "KV event batch from before the restart");
    this.o.stats.pending = this.pending.size;
  }

  /**
   * Applies the messages held during a replay, in slices; what arrives meanwhile queues
   * behind them. Stops early when one of them starts a new replay (it put that message back
   * in front and drains again after) or the connection dropped meanwhile (checked first).
   */
  private async drain(): Promise<void> {
    const slicer = new Slicer();
    while (this.pending.size > 0) {
      if (slicer.due()) {
        this.o.stats.pending = this.pending.size;
        await slicer.yield();
        if (this.stopped) return;
        if (this.suspect) {
          this.resync(null);
          return;
        }
      }
      if (!this.process(this.pending.shift() as Queued)) {
        this.o.stats.pending = this.pending.size;
        return;
      }
    }
    this.o.stats.pending = 0;
    this.afterReplay = false;
    this.replaying = false;
    this.o.stats.replaying = false;
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
  private consume(
    seq: number,
    payload: Buffer,
    receivedAt: number,
    replayed: boolean,
    decoded: ReadBatch = this.read(payload),
  ): void {
    this.tracker.advance(seq);
    this.history.add(seq, payload);
    // The live stream has passed what the last replay delivered: its copies are all behind us.
    if (!replayed && this.dedupe !== null && seq > this.dedupe.through) this.dedupe = null;
    const s = this.o.stats;
    s.lastSeq = seq;
    if (!decoded.ok) {
      this.drop(decoded.error, { seq, bytes: payload.length }, "undecodable KV event batch");
      return;
    }
    const { ts, rank } = "scanned" in decoded ? decoded.scanned : decoded.batch;
    if (rank !== null && rank !== this.o.rank) {
      this.drop("rank_mismatch", { seq, batchRank: rank }, "KV event batch from another DP rank");
      return;
    }
    s.batches++;
    s.lastBatchTs = ts;
    this.lastTs = ts;
    if ("scanned" in decoded) {
      this.applyScanned(decoded.scanned, seq);
      return;
    }
    const batch = decoded.batch;
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

  /** The sink's fast path reads the payload when it can; the JavaScript decoder otherwise. A
   * batch stamped with a time no engine can send is refused whole (batch-clock.ts), before
   * its stamp can become the step-back check's reference. Against the wall clock, not
   * `o.now`: that one stamps receipts, and tests fix it. */
  private read(payload: Buffer): ReadBatch {
    const decoded = this.scanOrDecode(payload);
    if (decoded.ok && !plausibleBatchTs(batchTs(decoded), Date.now()))
      return { ok: false, error: "batch_ts" };
    return decoded;
  }

  private scanOrDecode(payload: Buffer): BatchResult | ScannedRead {
    const scan = this.o.sink.scanBatch;
    if (scan !== undefined) {
      try {
        const scanned = scan.call(this.o.sink, this.o.slotKey, payload);
        if (scanned !== null) {
          if (this.scannedRead === null) this.scannedRead = { ok: true, scanned };
          else this.scannedRead.scanned = scanned;
          return this.scannedRead;
        }
      } catch (err) {
        this.drop("sink_error", { err: String(err) }, "KV event sink failed to read a batch");
      }
    }
    return decodeBatch(payload);
  }

  /** The counters delivering the batch's events would have added, then the sink applies it whole. */
  private applyScanned(b: ScannedBatch, seq: number): void {
    const s = this.o.stats;
    s.events.BlockStored += b.events.BlockStored;
    s.events.BlockRemoved += b.events.BlockRemoved;
    s.events.AllBlocksCleared += b.events.AllBlocksCleared;
    s.storedBlocks += b.storedBlocks;
    s.removedBlocks += b.removedBlocks;
    for (const m in b.storedByMedium) bump(s.storedByMedium, m, b.storedByMedium[m]);
    try {
      this.o.sink.applyScanned?.(this.o.slotKey);
    } catch (err) {
      this.drop("sink_error", { seq, err: String(err) }, "KV event sink failed");
    }
  }

  private log(key: string, fields: Record<string, unknown>, msg: string): void {
    this.o.log.warn(`${this.o.slotKey}:${key}`, { slot: this.o.slotKey, ...fields }, msg);
  }

  private drop(reason: DropReason, fields: Record<string, unknown>, msg: string, n = 1): void {
    bump(this.o.stats.dropped, reason, n);
    this.o.log.warn(`${this.o.slotKey}:${reason}`, { slot: this.o.slotKey, reason, ...fields }, msg);
  }
}

function batchTs(decoded: ReadBatch & { ok: true }): number {
  return "scanned" in decoded ? decoded.scanned.ts : decoded.batch.ts;
}
