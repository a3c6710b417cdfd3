// The replay/live race over real ZMQ sockets on 127.0.0.1 (issue 29, item 4). The engine
// answers a replay request from memory at once, while the live copies of the same batches may
// still be on their way through the PUB socket: they arrive after the replay's answer has been
// applied and the held queue has drained. They are duplicates. Taken for an engine restart
// (their numbers are below the last one applied), the rank was cleared and rebuilt from a
// buffer that had meanwhile dropped its oldest batches: valid blocks were lost.

import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { encodeSeq } from "../../control-plane/src/events/frames.ts";
import { RankSubscriber } from "../../control-plane/src/events/rank-subscriber.ts";
import { RecordingSink, TestEngine, until } from "./harness.ts";
import { frames as ingestFrames, payload as ingestPayload, makeIngest, replayed } from "./ingest-kit.ts";
import { batch, range, storedArray } from "./msgspec.ts";

const quiet = pino({ level: "silent" });
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const T0 = 1_700_000_000;
/** Batch `seq` of one engine: one block, chained to the previous batch's, stamped a second apart. */
const payload = (seq: number, ts = T0 + seq, extra: Parameters<typeof batch>[0] = []) =>
  batch(
    [
      ...extra,
      storedArray({
        hashes: [100 + seq],
        parent: seq === 0 ? null : 99 + seq,
        tokens: range(0, 4),
        blockSize: 4,
      }),
    ],
    0,
    ts,
  );

async function setup(): Promise<{ engine: TestEngine; sub: RankSubscriber; sink: RecordingSink }> {
  const engine = await new TestEngine("kv").bind();
  cleanups.push(() => engine.close());
  const replayEndpoint = await engine.serveReplay({ withTopic: true });
  const sink = new RecordingSink();
  const sub = new RankSubscriber({
    slotKey: "w#0",
    rank: 0,
    endpoint: engine.endpoint,
    mode: "connect",
    replayEndpoint,
    topic: "kv",
    sink,
    logger: quiet,
  });
  cleanups.push(() => sub.stop());
  await sub.start();
  // The first handshake asks what the engine holds (nothing yet); let that round finish.
  await until(() => sub.stats.replays.ok === 1 && !sub.stats.replaying, 5_000, "the first catch-up");
  // ZMQ's slow joiner: publish batch 0 until the subscriber has read it.
  engine.buffer.push({ seq: 0, payload: payload(0) });
  await until(
    async () => {
      await engine.sendRaw(live(0));
      return sub.stats.lastSeq === 0;
    },
    5_000,
    "the subscription",
  );
  return { engine, sub, sink };
}

const live = (seq: number, p = payload(seq)) => [Buffer.from("kv"), encodeSeq(seq), p];

/** Stored block hashes in delivery order, "reset" for a reset. */
function blocks(sink: RecordingSink): (bigint | string)[] {
  return sink.log.flatMap((d): (bigint | string)[] =>
    d.kind === "reset" ? ["reset"] : d.event.type === "BlockStored" ? d.event.hashes : [],
  );
}

describe("late live copies of batches a replay delivered", () => {
  it.each([
    { trigger: "a gap (batch 5 lost on the PUB socket, 6 arrives)", stepBack: false },
    { trigger: "a clock stepped back (batch 5 stamped a minute before batch 4)", stepBack: true },
  ])("are duplicates, not a restart: $trigger", async ({ stepBack }) => {
    const { engine, sub, sink } = await setup();
    for (const s of range(1, 4)) await engine.publish(s, payload(s));
    await until(() => sub.stats.lastSeq === 4, 5_000, "batches 1-4");
    // The slow-joiner loop in setup may have delivered batch 0 more than once.
    const warmUpDuplicates = sub.stats.dropped.duplicate ?? 0;

    // The engine publishes 5..40. Batch 20 carries a malformed event next to its block.
    const five = stepBack ? payload(5, T0 - 60) : payload(5);
    engine.buffer.push({ seq: 5, payload: five });
    for (const s of range(6, 35))
      engine.buffer.push({
        seq: s,
        payload: payload(s, undefined, s === 20 ? [["BlockStored", "junk"]] : []),
      });
    const copies = engine.buffer.filter((b) => b.seq >= 5);
    // The live stream: batch 5 itself (the clock case) or 6 after a lost 5 (the gap case) makes
    // the stream doubtful; the replay it starts is answered with 0..40 before any later copy.
    const trigger = stepBack ? 5 : 6;
    await engine.sendRaw(
      live(trigger, (copies.find((b) => b.seq === trigger) as { payload: Buffer }).payload),
    );
    await until(
      () =>
        sub.stats.replays.ok === 2 &&
        sub.stats.lastSeq === 40 &&
        !sub.stats.replaying &&
        sub.stats.pending === 0,
      5_000,
      "the replay's answer applied and the held queue drained",
    );
    expect(sub.stats.dropped.event_shape).toBe(1);

    // Meanwhile the engine's buffer moved on (buffer_steps): a rebuild from it would lose 0..9.
    engine.buffer.splice(0, 10);
    // Now the live copies arrive, then the engine's next batch.
    for (const b of copies) if (b.seq > trigger) await engine.sendRaw(live(b.seq, b.payload));
    await engine.publish(41, payload(41));
    await until(() => sub.stats.lastSeq === 41 && !sub.stats.replaying, 5_000, "batch 41");

    expect(sub.stats.resets).toEqual({ gap: 0, restart: 0 });
    expect(blocks(sink)).toEqual(range(0, 42).map((s) => BigInt(100 + s)));
    // The trigger (held, then found in the replay) and every late copy; nothing else.
    expect(sub.stats.dropped.duplicate).toBe(warmUpDuplicates + 1 + (40 - trigger));
    // The malformed event of batch 20 was counted when the replay applied it, not again.
    expect(sub.stats.dropped.event_shape).toBe(1);
    expect(sub.stats.replays).toMatchObject({ ok: 2, failed: 0 });

    // Past the replay's last number the window is closed: a lower number is a restart again.
    const restarted = batch([storedArray({ hashes: [900], tokens: range(0, 4), blockSize: 4 })], 0, T0 + 100);
    engine.buffer.splice(0, engine.buffer.length, { seq: 0, payload: restarted });
    await engine.sendRaw(live(0, restarted));
    await until(() => sub.stats.resets.restart === 1 && sub.stats.lastSeq === 0, 5_000, "the restart");
    expect(blocks(sink).slice(42)).toEqual(["reset", 900n]);
  });
});

describe("the duplicate window after a replay (no sockets)", () => {
  it("holds until a live batch past the replay's last number, then closes", async () => {
    const { ingest, stats, sink } = makeIngest(async (from) => ({
      ok: true,
      batches: replayed(range(from, 4 - from)),
    }));
    ingest.connected(); // catch-up: 0..3
    await ingest.idle();
    for (const s of [1, 2, 3]) ingest.onFrames(ingestFrames(s)); // late live copies
    expect(stats.dropped).toEqual({ duplicate: 3 });
    ingest.onFrames(ingestFrames(4));
    ingest.onFrames(ingestFrames(2)); // past the window: an engine restart again
    expect((sink as RecordingSink).trace()).toEqual([
      ...range(0, 5).map((s) => `${s}:BlockStored`),
      "reset:restart",
    ]);
    expect(stats.resets).toEqual({ gap: 0, restart: 1 });
    await ingest.idle();
  });

  it("takes a replayed number with other content, read after the answer, for a new engine", async () => {
    const { ingest, stats, sink } = makeIngest(async (from) => ({
      ok: true,
      batches: replayed(range(from, 4 - from)),
    }));
    ingest.connected();
    await ingest.idle();
    ingest.onFrames(ingestFrames(3)); // the same batch: a late copy
    ingest.onFrames(ingestFrames(3, ingestPayload(999))); // other content under 3
    expect(stats.dropped).toEqual({ duplicate: 1 });
    expect((sink as RecordingSink).trace().slice(4)).toEqual(["reset:restart"]);
    expect(stats.resets.restart).toBe(1);
  });
});
