// KV events over real ZeroMQ sockets on 127.0.0.1: the live PUB stream, replay through the
// ROUTER socket (both reply forms), eviction and reset events, a subscriber that rebuilds the
// simulator's cache exactly, and the control plane's subscriber learning an idle engine's cache
// from replay alone. Where the PUB endpoint has no wildcard the simulator connects (as vLLM
// does) and the test's subscriber binds. Every wait is on a condition: the number of batches
// each publisher has sent, never a quiet period.

import { isDeepStrictEqual } from "node:util";
import { describe, expect, it } from "vitest";
import { Dealer, Subscriber } from "zeromq";
import type { ZmqKvPublisher } from "../../control-plane/sim/kv-publisher.ts";
import { type RunningSim, type SimConfig, startSim } from "../../control-plane/sim/server.ts";
import { subscriptionFor } from "../../control-plane/src/events/endpoints.ts";
import { decodeBatch } from "../../control-plane/src/events/index.ts";
import { RankSubscriber } from "../../control-plane/src/events/rank-subscriber.ts";
import type { EventSink, KvEvent } from "../../control-plane/src/vocabulary/kv-events.ts";
import { until } from "../events/harness.ts";
import {
  applyEvents,
  type DecodedEvent,
  decodePayload,
  freePortRange,
  post,
  simConfig,
  withSim,
} from "./helpers.ts";

interface Message {
  topic: string;
  seq: bigint;
  rank: number;
  payload: Buffer;
}

// A SUB socket must be read from the start: libzmq hands a newly connected PUB peer our
// subscription only while the socket is being serviced (here, by a pending receive).
class Collector {
  readonly msgs: Message[] = [];

  constructor(private readonly sub: Subscriber) {
    void this.loop();
  }

  private async loop(): Promise<void> {
    try {
      for await (const [topic, seq, payload] of this.sub as AsyncIterable<Buffer[]>) {
        this.msgs.push({
          topic: (topic as Buffer).toString(),
          seq: (seq as Buffer).readBigUInt64BE(),
          rank: decodePayload(payload as Buffer).rank,
          payload: payload as Buffer,
        });
      }
    } catch {
      // socket closed
    }
  }

  /** Waits for the last batch each publisher has sent (one connection keeps order, so all
   * before it are here too); returns and forgets what arrived. */
  async upTo(publishers: ZmqKvPublisher[]): Promise<Message[]> {
    await Promise.all(publishers.map((p) => p.flush()));
    const last = publishers.map((p) => ({ rank: p.rank, seq: BigInt(p.published - 1) }));
    await until(
      () => last.every((l) => l.seq < 0n || this.msgs.some((m) => m.rank === l.rank && m.seq === l.seq)),
      5_000,
      "every batch published",
    );
    return this.msgs.splice(0);
  }
}

/** Binds `sub` on `n` consecutive loopback ports (vLLM offsets each rank's port by its rank),
 * starting from one the system picked; returns the first. */
async function bindConsecutive(sub: Subscriber, n: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    await sub.bind("tcp://127.0.0.1:*");
    const base = Number((sub.lastEndpoint as string).split(":").at(-1));
    const bound = [base];
    try {
      for (let i = 1; i < n; i++) {
        await sub.bind(`tcp://127.0.0.1:${base + i}`);
        bound.push(base + i);
      }
      return base;
    } catch {
      for (const port of bound) await sub.unbind(`tcp://127.0.0.1:${port}`);
    }
  }
  throw new Error("no consecutive ports");
}

/**
 * The simulator binds its replay (and wildcard publish) ports itself, at fixed offsets per rank,
 * so they cannot be ephemeral: pick free-looking ones and start again on the rare clash.
 */
async function startWithPorts(
  make: (base: number) => SimConfig,
  n: number,
): Promise<{ sim: RunningSim; base: number }> {
  for (let attempt = 0; ; attempt++) {
    const base = await freePortRange(n);
    try {
      return { sim: await startSim(make(base)), base };
    } catch (err) {
      if (attempt >= 5 || !String(err).includes("in use")) throw err;
    }
  }
}

const publishersOf = (sim: RunningSim) => sim.ranks.map((r) => r.publisher as ZmqKvPublisher);

async function replay(endpoint: string, from: bigint): Promise<Buffer[][]> {
  const d = new Dealer({ linger: 0, receiveTimeout: 3000 });
  d.connect(endpoint);
  const start = Buffer.alloc(8);
  start.writeBigUInt64BE(from);
  await d.send(["", start]);
  const out: Buffer[][] = [];
  for (;;) {
    const frames = (await d.receive()) as Buffer[];
    out.push(frames);
    if (frames.some((f) => f.length === 8 && f.equals(Buffer.alloc(8, 0xff)))) break;
  }
  d.close();
  return out;
}

type CacheModel = Map<bigint, { parent: bigint | null; tokens: number[] }>;

async function cacheDump(sim: RunningSim, rank: number): Promise<CacheModel> {
  const res = await fetch(`http://127.0.0.1:${sim.ports[0]}/kvroute/sim/cache?rank=${rank}`);
  const body = (await res.json()) as Record<
    string,
    Array<{ hash: string; parent: string | null; tokens: number[] }>
  >;
  return new Map(
    (body[String(rank)] ?? []).map((b) => [
      BigInt(b.hash),
      { parent: b.parent === null ? null : BigInt(b.parent), tokens: b.tokens },
    ]),
  );
}

function prompt(i: number): string {
  return `Request number ${i}: ${"a carefully chosen sentence about caches ".repeat(14)}`;
}

describe("KV events over ZeroMQ", () => {
  it("a subscriber rebuilds each rank's cache exactly; eviction under pressure and reset are reported", async () => {
    const sub = new Subscriber({ linger: 0 });
    const pubBase = await bindConsecutive(sub, 2);
    sub.subscribe();
    const collector = new Collector(sub);
    const { sim } = await startWithPorts(
      (replayBase) =>
        simConfig({
          numGpuBlocks: 24,
          kvEvents: {
            enableKvCacheEvents: true,
            publisher: "zmq",
            endpoint: `tcp://127.0.0.1:${pubBase}`,
            replayEndpoint: `tcp://127.0.0.1:${replayBase}`,
            bufferSteps: 10_000,
            hwm: 100_000,
            maxQueueSize: 100_000,
            topic: "kv@sim@qwen3",
          },
        }),
      2,
    );
    const replayBase = Number(sim.ranks[0]?.publisher?.replayEndpoint?.split(":").at(-1));
    const publishers = publishersOf(sim);
    try {
      {
        // The simulator's PUB sockets connect to us; until our subscription has reached them
        // what they send is dropped. vLLM's reset route publishes AllBlocksCleared on every
        // rank and changes nothing else: repeat it until both ranks' reach us.
        await until(
          async () => {
            await fetch(`http://127.0.0.1:${sim.ports[0]}/reset_prefix_cache`, { method: "POST" });
            await Promise.all(publishers.map((p) => p.flush()));
            return [0, 1].every((r) => collector.msgs.some((m) => m.rank === r));
          },
          10_000,
          "both ranks' subscriptions",
        );
        await collector.upTo(publishers);
        const firstSeq = BigInt(publishers[0]?.published ?? 0);
        // Request 0 alone first, to learn its chain.
        await post(
          sim.ports[0] as number,
          "/v1/completions",
          { prompt: prompt(0), max_tokens: 20 },
          { "x-data-parallel-rank": "0" },
        );
        const first = await cacheDump(sim, 0);
        expect(first.size).toBeGreaterThanOrEqual(5);
        const parents = new Set([...first.values()].map((v) => v.parent));
        const lastOfFirst = [...first.keys()].find((h) => !parents.has(h));
        for (let i = 1; i < 6; i++) {
          await post(
            sim.ports[0] as number,
            "/v1/completions",
            { prompt: prompt(i), max_tokens: 20 },
            { "x-data-parallel-rank": "0" },
          );
        }
        await post(
          sim.ports[0] as number,
          "/v1/completions",
          { prompt: prompt(9), max_tokens: 3 },
          { "x-data-parallel-rank": "1" },
        );
        const msgs = await collector.upTo(publishers);

        const byRank = new Map<number, { seqs: bigint[]; events: DecodedEvent[] }>();
        for (const m of msgs) {
          expect(m.topic).toBe("kv@sim@qwen3");
          const b = decodePayload(m.payload);
          const e = byRank.get(b.rank) ?? { seqs: [], events: [] };
          e.seqs.push(m.seq);
          e.events.push(...b.events);
          byRank.set(b.rank, e);
          // The control plane's own decoder accepts every batch without errors.
          const cp = decodeBatch(m.payload);
          expect(cp.ok && Object.keys(cp.batch.errors).length === 0).toBe(true);
        }
        const r0 = byRank.get(0);
        expect(r0?.seqs).toEqual(r0?.seqs.map((_, i) => firstSeq + BigInt(i))); // consecutive per rank
        const removed = r0?.events.filter((e) => e.type === "BlockRemoved") ?? [];
        expect(removed.length).toBeGreaterThan(0);
        // LRU: the first block evicted is the first request's last block (freed tail-first).
        expect(removed[0]?.hashes[0]).toBe(lastOfFirst);
        expect(removed.every((e) => e.hashes.length === 1)).toBe(true);

        for (const rank of [0, 1]) {
          const rebuilt: CacheModel = new Map();
          applyEvents(rebuilt, byRank.get(rank)?.events ?? []);
          expect(rebuilt).toEqual(await cacheDump(sim, rank));
        }
        expect([...(await cacheDump(sim, 0)).keys()].some((h) => h >= 2n ** 63n)).toBe(true);

        // Replay (topic form) returns every buffered batch from the requested seq, then the end marker.
        const rep = await replay(`tcp://127.0.0.1:${replayBase}`, firstSeq + 2n);
        const end = rep.at(-1) as Buffer[];
        expect(end.map((f) => f.toString("hex"))).toEqual(["", "", "ffffffffffffffff", ""]);
        const body = rep.slice(0, -1);
        expect(body.map((f) => f.length)).toEqual(body.map(() => 4));
        expect(body.map((f) => (f[2] as Buffer).readBigUInt64BE())).toEqual(r0?.seqs.slice(2));
        expect(body).toHaveLength((r0?.seqs.length ?? 0) - 2);
        expect(body.map((f) => (f[1] as Buffer).toString())).toEqual(body.map(() => "kv@sim@qwen3"));
        expect(body.map((f) => (f[3] as Buffer).toString("hex"))).toEqual(
          msgs.filter((m) => m.rank === 0 && m.seq >= firstSeq + 2n).map((m) => m.payload.toString("hex")),
        );

        // Reset: vLLM's /reset_prefix_cache → AllBlocksCleared on every rank.
        const reset = await fetch(`http://127.0.0.1:${sim.ports[0]}/reset_prefix_cache`, { method: "POST" });
        expect(reset.status).toBe(200);
        expect(reset.headers.get("x-kvroute-sim-reset")).toBe("done");
        const after = await collector.upTo(publishers);
        expect(after.map((m) => decodePayload(m.payload).events.map((e) => e.type))).toEqual([
          ["AllBlocksCleared"],
          ["AllBlocksCleared"],
        ]);
        expect((await cacheDump(sim, 0)).size).toBe(0);
      }
    } finally {
      await sim.close();
      sub.close();
    }
  });

  it("legacy replay form, buffer_steps and map encoding", async () => {
    const pubBase = await freePortRange(1);
    const { sim, base: replayBase } = await startWithPorts(
      (replayBase) =>
        simConfig({
          topology: { mode: "internal", size: 1, sizeLocal: 1, startRank: 0 },
          eventEncoding: "map",
          replayForm: "legacy",
          kvEvents: {
            enableKvCacheEvents: true,
            publisher: "zmq",
            // Nobody listens here: a connecting PUB socket drops, the replay buffer still fills.
            endpoint: `tcp://127.0.0.1:${pubBase}`,
            replayEndpoint: `tcp://127.0.0.1:${replayBase}`,
            bufferSteps: 3,
            hwm: 1000,
            maxQueueSize: 1000,
            topic: "",
          },
        }),
      1,
    );
    try {
      for (let i = 0; i < 5; i++)
        await post(sim.ports[0] as number, "/v1/completions", { prompt: prompt(i), max_tokens: 2 });
      const pub = publishersOf(sim)[0] as ZmqKvPublisher;
      await pub.flush();
      expect(pub.published).toBeGreaterThan(3);
      const rep = await replay(`tcp://127.0.0.1:${replayBase}`, 0n);
      const end = rep.at(-1) as Buffer[];
      expect(end.map((f) => f.toString("hex"))).toEqual(["", "ffffffffffffffff", ""]);
      const body = rep.slice(0, -1);
      expect(body.every((f) => f.length === 3)).toBe(true);
      // only the last buffer_steps batches are kept
      const seqs = body.map((f) => (f[1] as Buffer).readBigUInt64BE());
      expect(seqs).toEqual([3, 2, 1].map((back) => BigInt(pub.published - back)));
      const decoded = decodePayload(body[0]?.[2] as Buffer);
      expect(decoded.rank).toBe(0);
      const raw = decoded.events[0]?.raw as Record<string, unknown>;
      expect(raw.type).toBe("BlockStored");
      // One entry per block, null without LoRA or salt (vLLM's raw per-block list).
      expect(raw.extra_keys).toEqual((raw.block_hashes as unknown[]).map(() => null));
      expect(raw).toHaveProperty("lora_name", null);
    } finally {
      await sim.close();
    }
  });

  it("a subscriber started after the engine went idle learns each rank's cache from replay alone", async () => {
    // vLLM's defaults: the engine binds tcp://*:port+r and replays on replay_port+r.
    const { sim, base } = await startWithPorts(
      (base) =>
        simConfig({
          kvEvents: {
            enableKvCacheEvents: true,
            publisher: "zmq",
            endpoint: `tcp://*:${base}`,
            replayEndpoint: `tcp://*:${base + 2}`,
            bufferSteps: 10_000,
            hwm: 100_000,
            maxQueueSize: 100_000,
            topic: "kv",
          },
        }),
      4,
    );
    const subs: RankSubscriber[] = [];
    try {
      for (const [rank, i] of [
        [0, 1],
        [1, 2],
        [0, 3],
      ])
        await post(
          sim.ports[0] as number,
          "/v1/completions",
          { prompt: prompt(i as number), max_tokens: 20 },
          { "x-data-parallel-rank": String(rank) },
        );
      await Promise.all(publishersOf(sim).map((p) => p.flush()));
      // A control plane starting now: nothing will be published again.
      const caches = new Map<string, CacheModel>();
      const sink: EventSink = {
        event(slot: string, ev: KvEvent) {
          const cache = caches.get(slot) ?? new Map();
          caches.set(slot, cache);
          if (ev.type === "AllBlocksCleared") cache.clear();
          else if (ev.type === "BlockRemoved") for (const h of ev.hashes) cache.delete(h);
          else
            ev.hashes.forEach((h, i) => {
              cache.set(h, {
                parent: i === 0 ? ev.parent : (ev.hashes[i - 1] as bigint),
                tokens: ev.tokenIds.slice(i * ev.blockSize, (i + 1) * ev.blockSize),
              });
            });
        },
        rankReset(slot: string) {
          caches.get(slot)?.clear();
        },
      };
      for (const rank of [0, 1]) {
        const spec = subscriptionFor(`sim#${rank}`, rank, `127.0.0.1:${sim.ports[0]}`, {
          endpoint: `tcp://*:${base}`,
          replayEndpoint: `tcp://*:${base + 2}`,
          topic: "kv",
        });
        const sub = new RankSubscriber({ ...spec, sink });
        subs.push(sub);
        await sub.start();
      }
      const engine = [await cacheDump(sim, 0), await cacheDump(sim, 1)];
      expect(engine.map((c) => c.size > 0)).toEqual([true, true]);
      await until(
        () => [0, 1].every((r) => isDeepStrictEqual(caches.get(`sim#${r}`), engine[r])),
        5_000,
        "each rank's cache rebuilt",
      );
      for (const r of [0, 1]) expect(caches.get(`sim#${r}`)).toEqual(engine[r]);
      expect(subs.map((s) => s.stats.replays.ok)).toEqual([1, 1]);
    } finally {
      for (const s of subs) await s.stop();
      await sim.close();
    }
  });

  it("publishers use the global rank for ports and batches in hybrid mode", async () => {
    const base = await freePortRange(4);
    const cfg = simConfig({
      topology: { mode: "hybrid", size: 4, sizeLocal: 2, startRank: 2 },
      kvEvents: {
        enableKvCacheEvents: true,
        publisher: "zmq",
        endpoint: `tcp://127.0.0.1:${base}`,
        replayEndpoint: null,
        bufferSteps: 10,
        hwm: 10,
        maxQueueSize: 10,
        topic: "",
      },
    });
    await withSim(cfg, async (sim) => {
      expect(sim.ranks.map((r) => [r.rank, r.publisher?.endpoint])).toEqual([
        [2, `tcp://127.0.0.1:${base + 2}`],
        [3, `tcp://127.0.0.1:${base + 3}`],
      ]);
    });
  });
});
