// Real ZMQ sockets on 127.0.0.1: a test engine publishes in vLLM's exact framing and serves
// replay from a ROUTER; RankSubscriber must deliver the normalised events in order.

import fc from "fast-check";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { Publisher } from "zeromq";
import { BindPool } from "../../control-plane/src/events/bind-pool.ts";
import { encodeSeq } from "../../control-plane/src/events/frames.ts";
import {
  RankSubscriber,
  type RankSubscriberOptions,
} from "../../control-plane/src/events/rank-subscriber.ts";
import { EventsSupervisor } from "../../control-plane/src/events/supervisor.ts";
import type { BlockRemoved, BlockStored } from "../../control-plane/src/vocabulary/kv-events.ts";
import { RecordingSink, TestEngine, until } from "./harness.ts";
import {
  batch,
  clearedArray,
  encode,
  F64,
  LATER_TS,
  range,
  removedArray,
  storedArray,
  storedMap,
} from "./msgspec.ts";

const quiet = pino({ level: "silent" });
const BIG = 0xffff_ffff_ffff_fff0n;
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(opts: {
  replay?: "new" | "old" | "silent";
  rank?: number;
  subscriber?: Partial<RankSubscriberOptions>;
}): Promise<{ engine: TestEngine; sub: RankSubscriber; sink: RecordingSink }> {
  const engine = await new TestEngine("kv@10.0.0.1@model").bind();
  cleanups.push(() => engine.close());
  const replayEndpoint =
    opts.replay === undefined
      ? null
      : await engine.serveReplay({ withTopic: opts.replay === "new", silent: opts.replay === "silent" });
  const sink = new RecordingSink();
  const sub = new RankSubscriber({
    slotKey: "w1#0",
    rank: opts.rank ?? 0,
    endpoint: engine.endpoint,
    mode: "connect",
    replayEndpoint,
    topic: "kv@",
    sink,
    logger: quiet,
    replayTimeoutMs: 1_000,
    ...opts.subscriber,
  });
  cleanups.push(() => sub.stop());
  await sub.start();
  // With a replay endpoint, the first handshake asks the engine what it holds (nothing yet):
  // let that round finish, so what the test publishes next is live traffic.
  if (replayEndpoint !== null) await until(() => settled(sub, 1), 5_000, "the first replay round");
  return { engine, sub, sink };
}

/** `rounds` replay requests answered or given up, none running. */
function settled(sub: RankSubscriber, rounds: number): boolean {
  return sub.stats.replays.ok + sub.stats.replays.failed >= rounds && !sub.stats.replaying;
}

/** ZMQ's slow joiner: keep publishing `seq` until the subscriber has read it once. */
async function warmUp(engine: TestEngine, sub: RankSubscriber, seq: number, payload: Buffer): Promise<void> {
  engine.buffer.push({ seq, payload });
  const deadline = Date.now() + 5_000;
  while (sub.stats.lastMessageAt === null) {
    if (Date.now() > deadline) throw new Error("subscriber never joined");
    await engine.sendRaw([Buffer.from(engine.topic), encodeSeq(seq), payload]);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const stored = (h: bigint | number, parent: bigint | number | null = null) =>
  storedArray({ hashes: [h], parent, tokens: range(0, 16), blockSize: 16 });

describe("RankSubscriber over real ZMQ", () => {
  it("delivers vLLM array and map batches (2 and 3 elements) and drops other ranks' batches", async () => {
    const { engine, sub, sink } = await setup({});
    await warmUp(engine, sub, 0, batch([stored(BIG), removedArray([5])], 0));
    const map = storedMap({
      hashes: [BIG - 1n, 3],
      parent: BIG,
      tokens: range(1000, 32),
      blockSize: 16,
      loraName: "adapter",
      medium: "CPU",
      extra: {
        group_idx: 0,
        kv_cache_spec_kind: "full_attention",
        extra_keys: [null, null],
        event_version: 1,
      },
    });
    await engine.publish(1, batch([map], 0));
    await engine.publish(2, batch([clearedArray])); // 2-element (older) batch
    await engine.publish(3, batch([stored(1)], 7)); // another rank's batch on this socket
    await engine.publish(4, batch([removedArray([BIG])], null));
    await until(() => sub.stats.lastSeq === 4, 5_000, "seq 4");

    expect(sink.trace()).toEqual([
      "0:BlockStored",
      "0:BlockRemoved",
      "1:BlockStored",
      "2:AllBlocksCleared",
      "4:BlockRemoved",
    ]);
    const first = sink.log[0] as { event: BlockStored };
    expect(first.event.hashes).toEqual([BIG]);
    const second = sink.log[2] as { event: BlockStored; meta: { ts: number; replayed: boolean } };
    expect(second.event).toMatchObject({
      hashes: [BIG - 1n, 3n],
      parent: BIG,
      loraName: "adapter",
      medium: "CPU",
      tokenIds: range(1000, 32),
    });
    expect(second.meta).toMatchObject({ ts: 1_700_000_000.25, replayed: false });
    expect((sink.log[4] as { event: BlockRemoved }).event.hashes).toEqual([BIG]);
    expect(sub.stats.dropped.rank_mismatch).toBe(1);
    expect(sub.stats.events).toEqual({ BlockStored: 2, BlockRemoved: 2, AllBlocksCleared: 1 });
    expect(sub.stats.storedByMedium).toEqual({ GPU: 1, CPU: 2 });
  });

  it("decodes SGLang's variant (attn_dp_rank, signed hashes, short events)", async () => {
    const { engine, sub, sink } = await setup({ rank: 1 });
    const neg = -0x7000_0000_0000_0001n;
    const payload = encode([
      new F64(5),
      [
        ["BlockStored", [neg], null, range(0, 4), 4, null],
        ["BlockRemoved", [neg]],
      ],
      1,
    ]);
    await warmUp(engine, sub, 0, payload);
    await until(() => sink.log.length === 2);
    expect(
      sink.log.map((d) =>
        d.kind === "event" && d.event.type !== "AllBlocksCleared" ? d.event.hashes : null,
      ),
    ).toEqual([[BigInt.asUintN(64, neg)], [BigInt.asUintN(64, neg)]]);
  });

  it.each(["new", "old"] as const)(
    "fills a gap by replay (%s reply form) and dedupes live batches",
    async (form) => {
      const { engine, sub, sink } = await setup({ replay: form });
      await warmUp(engine, sub, 0, batch([stored(10)], 0));
      await engine.publish(1, batch([stored(11, 10)], 0));
      await engine.publish(2, batch([stored(12, 11)], 0), { live: false }); // lost on the way
      await engine.publish(3, batch([stored(13, 12)], 0), { live: false });
      await engine.publish(4, batch([stored(14, 13)], 0));
      await until(() => sub.stats.replays.ok === 2 && sub.stats.lastSeq === 4, 5_000, "replay");
      await engine.publish(5, batch([stored(15, 14)], 0));
      await until(() => sub.stats.lastSeq === 5);

      expect(sink.trace()).toEqual([
        "0:BlockStored",
        "1:BlockStored",
        "2:BlockStored",
        "3:BlockStored",
        "4:BlockStored",
        "5:BlockStored",
      ]);
      const replayed = sink.log.map((d) => (d.kind === "event" ? d.meta.replayed : null));
      expect(replayed).toEqual([false, false, true, true, true, false]);
      expect(sub.stats.gaps).toBe(1);
      expect(sub.stats.missedBatches).toBe(2);
      expect(sub.stats.resets).toEqual({ gap: 0, restart: 0 });
      expect(sub.stats.dropped.duplicate ?? 0).toBeGreaterThanOrEqual(1); // live seq 4, queued during replay
    },
  );

  it("resets the rank when replay starts past the missing batch (evicted from buffer_steps)", async () => {
    const { engine, sub, sink } = await setup({ replay: "new" });
    await warmUp(engine, sub, 0, batch([stored(10)], 0));
    engine.buffer.length = 0; // the engine's buffer has moved on
    await engine.publish(3, batch([stored(13)], 0), { live: false });
    await engine.publish(4, batch([stored(14, 13)], 0));
    await until(() => sub.stats.lastSeq === 4 && !sub.stats.replaying);
    expect(sink.trace()).toEqual(["0:BlockStored", "reset:gap", "3:BlockStored", "4:BlockStored"]);
    expect(sub.stats.replays).toMatchObject({ ok: 1, failed: 1 }); // the first round, then this
  });

  it("resets on a gap without replay endpoint, and when replay times out", async () => {
    const a = await setup({});
    await warmUp(a.engine, a.sub, 0, batch([stored(1)], 0));
    await a.engine.publish(2, batch([stored(3)], 0));
    await until(() => a.sub.stats.lastSeq === 2);
    expect(a.sink.trace()).toEqual(["0:BlockStored", "reset:gap", "2:BlockStored"]);

    const b = await setup({ replay: "silent", subscriber: { replayTimeoutMs: 300 } });
    await warmUp(b.engine, b.sub, 0, batch([stored(1)], 0));
    await b.engine.publish(2, batch([stored(3)], 0));
    await until(() => b.sub.stats.lastSeq === 2 && !b.sub.stats.replaying, 5_000, "timeout");
    expect(b.sink.trace()).toEqual(["0:BlockStored", "reset:gap", "2:BlockStored"]);
    expect(b.sub.stats.replays.failed).toBe(2); // the first round, then the gap's
  });

  it("treats a sequence back to 0 as an engine restart", async () => {
    const { engine, sub, sink } = await setup({});
    await warmUp(engine, sub, 0, batch([stored(1)], 0));
    await engine.publish(1, batch([stored(2, 1)], 0));
    await engine.publish(2, batch([stored(3, 2)], 0));
    await engine.publish(0, batch([stored(9)], 0)); // new engine process
    await engine.publish(1, batch([stored(10, 9)], 0));
    await until(() => sink.log.length === 6);
    expect(sink.trace()).toEqual([
      "0:BlockStored",
      "1:BlockStored",
      "2:BlockStored",
      "reset:restart",
      "0:BlockStored",
      "1:BlockStored",
    ]);
    expect(sub.stats.resets.restart).toBe(1);
  });

  it("spots a restart hidden behind a gap by comparing the replayed batch at its last number", async () => {
    const { engine, sub, sink } = await setup({ replay: "new" });
    await warmUp(engine, sub, 0, batch([stored(1)], 0));
    await engine.publish(1, batch([stored(2, 1)], 0));
    await until(() => sub.stats.lastSeq === 1);
    engine.buffer.length = 0; // the engine restarted; we heard none of its first batches
    for (let s = 0; s < 4; s++)
      await engine.publish(s, batch([stored(50 + s)], 0, LATER_TS), { live: false });
    await engine.publish(4, batch([stored(54)], 0, LATER_TS));
    await until(() => sub.stats.lastSeq === 4 && !sub.stats.replaying);
    expect(sink.trace()).toEqual([
      "0:BlockStored",
      "1:BlockStored",
      "reset:restart",
      ...range(0, 5).map((s) => `${s}:BlockStored`),
    ]);
  });

  it("catches up from 0 by replay when it joins a running engine, without a reset", async () => {
    const { engine, sub, sink } = await setup({ replay: "new" });
    for (let s = 0; s < 5; s++) await engine.publish(s, batch([stored(s)], 0), { live: false });
    await warmUp(engine, sub, 5, batch([stored(5)], 0));
    await until(() => sub.stats.replays.ok === 2 && sub.stats.lastSeq === 5 && !sub.stats.replaying);
    expect(sink.trace()).toEqual(range(0, 6).map((s) => `${s}:BlockStored`));
    expect(sub.stats.resets).toEqual({ gap: 0, restart: 0 });
    expect(sub.stats.gaps).toBe(0);
  });

  it("asks an idle engine what it holds when it subscribes: no traffic needed", async () => {
    const engine = await new TestEngine("kv@10.0.0.1@model").bind();
    cleanups.push(() => engine.close());
    const replayEndpoint = await engine.serveReplay({ withTopic: true });
    // Published before anyone listened; the engine is idle from now on.
    for (let s = 0; s < 4; s++) await engine.publish(s, batch([stored(s)], 0), { live: false });
    const sink = new RecordingSink();
    const sub = new RankSubscriber({
      slotKey: "w1#0",
      rank: 0,
      endpoint: engine.endpoint,
      mode: "connect",
      replayEndpoint,
      topic: "kv@",
      sink,
      logger: quiet,
    });
    cleanups.push(() => sub.stop());
    await sub.start();
    await until(() => sink.log.length === 4, 5_000, "the engine's buffer");
    expect(sink.trace()).toEqual(range(0, 4).map((s) => `${s}:BlockStored`));
    expect(sub.stats.resets).toEqual({ gap: 0, restart: 0 });
  });

  /** Closes `engine` and starts another on the same addresses, its replay buffer holding
   * `buffer` from the start. */
  async function restart(
    engine: TestEngine,
    buffer: { seq: number; payload: Buffer }[],
    withTopic = true,
  ): Promise<TestEngine> {
    const pubAt = engine.endpoint;
    const replayAt = engine.replayAt;
    await engine.close();
    const next = new TestEngine(engine.topic);
    next.buffer.push(...buffer);
    cleanups.push(() => next.close());
    // ZMQ releases a closed socket's port from its I/O thread, shortly after close(). Each port
    // is taken once: retrying a bind that already succeeded would fail for ever (the socket
    // holds the address), which is how this wait once timed out when only the replay port lagged.
    let published = false;
    await until(
      async () => {
        try {
          if (!published) {
            await next.bind(pubAt);
            published = true;
          }
          await next.serveReplay({ withTopic, at: replayAt });
          return true;
        } catch {
          return false;
        }
      },
      5_000,
      "the ports of the old engine",
    );
    return next;
  }

  it("catches a restarted engine whose first batch we see carries the next expected number", async () => {
    const { engine, sub, sink } = await setup({ replay: "new" });
    await warmUp(engine, sub, 0, batch([stored(1)], 0));
    await engine.publish(1, batch([stored(2, 1)], 0));
    await engine.publish(2, batch([stored(3, 2)], 0));
    await until(() => sub.stats.lastSeq === 2);
    // The new engine's first batches went out while we reconnected (lost to us); the first we
    // read is numbered exactly as the old stream's next.
    const lost = range(0, 3).map((seq) => ({ seq, payload: batch([stored(100 + seq)], 0, LATER_TS) }));
    const next = await restart(engine, lost);
    const three = batch([stored(103, 102)], 0, LATER_TS);
    next.buffer.push({ seq: 3, payload: three });
    await until(
      async () => {
        await next.sendRaw([Buffer.from(next.topic), encodeSeq(3), three]);
        return sub.stats.lastSeq === 3 && !sub.stats.replaying;
      },
      5_000,
      "the new engine's batch 3",
    );
    expect(sink.trace()).toEqual([
      "0:BlockStored",
      "1:BlockStored",
      "2:BlockStored",
      "reset:restart",
      ...range(0, 4).map((s) => `${s}:BlockStored`),
    ]);
    const hashes = sink.log.flatMap((d) =>
      d.kind === "event" && d.event.type === "BlockStored" ? d.event.hashes : [],
    );
    expect(hashes.slice(3)).toEqual([100n, 101n, 102n, 103n]);
    expect(sub.stats.disconnects).toBe(1);
  });

  it("notices an idle engine's restart as soon as the connection is back", async () => {
    const { engine, sub, sink } = await setup({ replay: "old" });
    await warmUp(engine, sub, 0, batch([stored(1)], 0));
    await engine.publish(1, batch([stored(2, 1)], 0));
    await until(() => sub.stats.lastSeq === 1);
    await restart(engine, [], false); // publishes nothing
    await until(() => sub.stats.resets.restart === 1 && !sub.stats.replaying, 5_000, "the restart");
    expect(sink.trace()).toEqual(["0:BlockStored", "1:BlockStored", "reset:restart"]);
  });

  it("keeps an engine that survived a dropped connection, with nothing reset", async () => {
    const { engine, sub, sink } = await setup({ replay: "new" });
    await warmUp(engine, sub, 0, batch([stored(1)], 0));
    await engine.publish(1, batch([stored(2, 1)], 0));
    await until(() => sub.stats.lastSeq === 1);
    // The same engine (same buffer) on a fresh PUB socket: the connection drops and comes back;
    // batch 2 was published while we were away.
    await restart(engine, [...engine.buffer, { seq: 2, payload: batch([stored(3, 2)], 0) }]);
    await until(() => sub.stats.disconnects === 1 && settled(sub, 2), 5_000, "the check after reconnecting");
    expect(sink.trace()).toEqual(["0:BlockStored", "1:BlockStored", "2:BlockStored"]);
    expect(sub.stats.resets).toEqual({ gap: 0, restart: 0 });
  });

  it("counts and survives garbage frames, then keeps going", async () => {
    const { engine, sub, sink } = await setup({});
    await warmUp(engine, sub, 0, batch([stored(1)], 0));
    const t = Buffer.from(engine.topic);
    await engine.sendRaw([t]);
    await engine.sendRaw([t, encodeSeq(1)]);
    await engine.sendRaw([t, Buffer.alloc(4), Buffer.from("x")]);
    await engine.sendRaw([t, encodeSeq(1), Buffer.from("x"), Buffer.from("y")]);
    await engine.sendRaw([t, Buffer.alloc(8, 0xff), Buffer.from("x")]);
    await engine.sendRaw([t, encodeSeq(1), Buffer.from([0xc1, 0x00, 0x17])]); // valid frames, bad msgpack
    await engine.sendRaw([t, encodeSeq(2), encode(["not", "a", "batch"])]);
    await engine.sendRaw([t, encodeSeq(3), batch([["BlockStored", "junk"], stored(4)], 0)]);
    await engine.publish(4, batch([stored(5)], 0));
    await until(() => sub.stats.lastSeq === 4);
    expect(sink.trace()).toEqual(["0:BlockStored", "3:BlockStored", "4:BlockStored"]);
    expect(sub.stats.dropped).toMatchObject({
      frame_count: 3,
      seq_size: 1,
      seq_range: 1,
      msgpack: 1,
      batch_shape: 1,
      event_shape: 1,
    });
    expect(sub.stats.resets).toEqual({ gap: 0, restart: 0 });
  });

  it("survives random multipart garbage over the socket", async () => {
    const { engine, sub, sink } = await setup({});
    await warmUp(engine, sub, 0, batch([stored(1)], 0));
    const samples = fc.sample(
      fc.array(
        fc.oneof(
          fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
          fc.constant(Buffer.from(engine.topic)),
          fc.nat({ max: 1_000 }).map((n) => encodeSeq(n)),
        ),
        { minLength: 1, maxLength: 5 },
      ),
      { numRuns: 300, seed: 42 },
    );
    // Every message carries the topic first so the SUB filter lets it through.
    for (const m of samples) await engine.sendRaw([Buffer.from(engine.topic), ...m]);
    await engine.sendRaw([Buffer.from(engine.topic), encodeSeq(5_000), batch([stored(2)], 0)]);
    await until(() => sub.stats.lastSeq === 5_000, 5_000, "final valid batch");
    expect(sink.trace().at(-1)).toBe("5000:BlockStored");
    const dropped = Object.values(sub.stats.dropped).reduce((a, b) => a + (b ?? 0), 0);
    expect(dropped).toBeGreaterThan(100);
  });

  it("binds for engines that connect to a central subscriber", async () => {
    const sink = new RecordingSink();
    const sub = new RankSubscriber({
      slotKey: "w2#3",
      rank: 3,
      endpoint: "tcp://127.0.0.1:*",
      mode: "bind",
      sink,
      logger: quiet,
    });
    cleanups.push(() => sub.stop());
    await sub.start();
    const pub = new Publisher({ linger: 0 });
    cleanups.push(async () => pub.close());
    pub.connect(sub.boundEndpoint as string); // what vLLM does for tcp://host:port endpoints
    const payload = batch([stored(77)], 3);
    while (sub.stats.lastMessageAt === null) {
      await pub.send(["", encodeSeq(0), payload]);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(sink.trace()[0]).toBe("0:BlockStored");
  });
});

describe("central subscriber (engines connect, kvroute binds)", () => {
  it("demultiplexes engines sharing one bound port by topic, each with its own sequence", async () => {
    const pool = new BindPool({ receiveHighWaterMark: 1_000, maxMessageBytes: 1 << 20 });
    cleanups.push(() => pool.close());
    const sink = new RecordingSink();
    const mk = (slotKey: string, topic: string) =>
      new RankSubscriber({
        slotKey,
        rank: 0,
        endpoint: "tcp://127.0.0.1:*",
        mode: "bind",
        topic,
        sink,
        logger: quiet,
        bindPool: pool,
      });
    const a = mk("a#0", "kv@10.0.0.1@m");
    const b = mk("b#0", "kv@10.0.0.2@m");
    cleanups.push(
      () => a.stop(),
      () => b.stop(),
    );
    await a.start();
    await b.start();
    expect(a.boundEndpoint).toBe(b.boundEndpoint);
    await expect(mk("c#0", "kv@10.0.0.1@m").start()).rejects.toThrow(/distinct topics/);

    const pubs = ["kv@10.0.0.1@m", "kv@10.0.0.2@m"].map((topic) => {
      const pub = new Publisher({ linger: 0 });
      pub.connect(a.boundEndpoint as string);
      cleanups.push(async () => pub.close());
      return { pub, topic };
    });
    // Both engines count from 0; interleaved on one socket they must not look like gaps.
    for (const [i, { pub, topic }] of pubs.entries()) {
      const sub = i === 0 ? a : b;
      while (sub.stats.lastMessageAt === null) {
        await pub.send([topic, encodeSeq(0), batch([stored(100 + i)], 0)]);
        await new Promise((r) => setTimeout(r, 10));
      }
    }
    for (const seq of [1, 2]) {
      for (const [i, { pub, topic }] of pubs.entries())
        await pub.send([topic, encodeSeq(seq), batch([stored(seq * 10 + i)], 0)]);
    }
    await until(() => a.stats.lastSeq === 2 && b.stats.lastSeq === 2);
    const bySlot = (slot: string) =>
      sink.log.filter((d) => d.slot === slot).map((d) => (d.kind === "event" ? d.meta.seq : d.reason));
    expect(bySlot("a#0")).toEqual([0, 1, 2]);
    expect(bySlot("b#0")).toEqual([0, 1, 2]);
    expect(a.stats.resets).toEqual({ gap: 0, restart: 0 });
    expect(b.stats.resets).toEqual({ gap: 0, restart: 0 });
  });
});

describe("central subscriber: an engine restarts while another keeps streaming", () => {
  it("clears and rebuilds the restarted engine's rank; the other one's stream is checked, not reset", async () => {
    const pool = new BindPool({ receiveHighWaterMark: 1_000, maxMessageBytes: 1 << 20 });
    cleanups.push(() => pool.close());
    const sink = new RecordingSink();
    const engines = new Map<string, TestEngine>();
    const start = async (topic: string, at?: string) => {
      const engine = new TestEngine(topic);
      cleanups.push(() => engine.close());
      await engine.serveReplay({ withTopic: true, at });
      engines.set(topic, engine);
      return engine;
    };
    const a0 = await start("kv@a");
    const b = await start("kv@b");
    const subs = [
      ["a#0", "kv@a", a0.replayAt],
      ["b#0", "kv@b", b.replayAt],
    ].map(([slotKey, topic, replayEndpoint]) => {
      const sub = new RankSubscriber({
        slotKey: slotKey as string,
        rank: 0,
        endpoint: "tcp://127.0.0.1:*",
        mode: "bind",
        topic,
        replayEndpoint,
        sink,
        logger: quiet,
        bindPool: pool,
      });
      cleanups.push(() => sub.stop());
      return sub;
    });
    for (const sub of subs) await sub.start();
    const [subA, subB] = subs as [RankSubscriber, RankSubscriber];
    const bound = subA.boundEndpoint as string;
    await until(() => settled(subA, 1) && settled(subB, 1), 5_000, "the first replay rounds");
    a0.pub.connect(bound);
    b.pub.connect(bound);
    const send = (engine: TestEngine, seq: number, payload: Buffer, sub: RankSubscriber) =>
      until(
        async () => {
          if (!engine.buffer.some((x) => x.seq === seq)) engine.buffer.push({ seq, payload });
          await engine.sendRaw([Buffer.from(engine.topic), encodeSeq(seq), payload]);
          return sub.stats.lastSeq === seq && !sub.stats.replaying;
        },
        5_000,
        `${engine.topic} ${seq}`,
      );
    for (const seq of [0, 1, 2]) {
      await send(a0, seq, batch([stored(10 + seq)], 0), subA);
      await send(b, seq, batch([stored(20 + seq)], 0), subB);
    }
    // Engine a restarts: its new process connects again, its replay ROUTER on the same address.
    const replayAt = a0.replayAt;
    await a0.close();
    await until(() => subA.stats.disconnects >= 1, 5_000, "the disconnect");
    const restarted: { engine?: TestEngine } = {};
    await until(
      async () => {
        restarted.engine = await start("kv@a", replayAt).catch(() => undefined);
        return restarted.engine !== undefined;
      },
      5_000,
      "the replay port",
    );
    const next = restarted.engine as TestEngine;
    for (const seq of [0, 1, 2]) next.buffer.push({ seq, payload: batch([stored(30 + seq)], 0, LATER_TS) });
    next.pub.connect(bound);
    await send(next, 3, batch([stored(33)], 0, LATER_TS), subA);
    await send(b, 3, batch([stored(23)], 0), subB);

    const bySlot = (slot: string) =>
      sink.log
        .filter((d) => d.slot === slot)
        .map((d) => (d.kind === "event" && d.event.type === "BlockStored" ? d.event.hashes[0] : d.kind));
    expect(bySlot("a#0")).toEqual([10n, 11n, 12n, "reset", 30n, 31n, 32n, 33n]);
    expect(bySlot("b#0")).toEqual([20n, 21n, 22n, 23n]);
    expect(subB.stats.resets).toEqual({ gap: 0, restart: 0 });
  });
});

describe("EventsSupervisor", () => {
  it("starts, lists and stops subscribers as specs change", async () => {
    const e0 = await new TestEngine("kv").bind();
    const e1 = await new TestEngine("kv").bind();
    cleanups.push(
      () => e0.close(),
      () => e1.close(),
    );
    const sink = new RecordingSink();
    const sup = new EventsSupervisor({ sink, logger: quiet });
    cleanups.push(() => sup.stop());
    const spec = (rank: number, endpoint: string) => ({
      slotKey: `w#${rank}`,
      rank,
      endpoint,
      mode: "connect" as const,
    });
    await sup.sync([spec(0, e0.endpoint), spec(1, e1.endpoint)]);
    expect(sup.stats().map((s) => s.slotKey)).toEqual(["w#0", "w#1"]);
    await sup.sync([spec(1, e1.endpoint)]);
    expect(sup.stats().map((s) => s.slotKey)).toEqual(["w#1"]);
    // A bad bind address is logged and skipped, not thrown.
    await sup.sync([spec(1, e1.endpoint), { ...spec(2, "tcp://256.0.0.1:1"), mode: "bind" }]);
    expect(sup.stats().map((s) => s.slotKey)).toEqual(["w#1"]);
  });
});
