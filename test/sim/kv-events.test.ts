// KV events over real ZeroMQ sockets on 127.0.0.1: the live PUB stream, replay through the
// ROUTER socket (both reply forms), eviction and reset events, and a subscriber that rebuilds
// the simulator's cache exactly. The PUB endpoint has no wildcard, so (as in vLLM) the
// simulator connects and the subscriber binds.

import { describe, expect, it } from "vitest";
import { Dealer, Subscriber } from "zeromq";
import type { RunningSim } from "../../control-plane/sim/server.ts";
import { decodeBatch } from "../../control-plane/src/events/index.ts";
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
  payload: Buffer;
}

// A SUB socket must be read from the start: libzmq hands a newly connected PUB peer our
// subscription only while the socket is being serviced (here, by a pending receive).
class Collector {
  readonly msgs: Message[] = [];
  private last = Date.now();

  constructor(private readonly sub: Subscriber) {
    void this.loop();
  }

  private async loop(): Promise<void> {
    try {
      for await (const [topic, seq, payload] of this.sub as AsyncIterable<Buffer[]>) {
        this.msgs.push({
          topic: (topic as Buffer).toString(),
          seq: (seq as Buffer).readBigUInt64BE(),
          payload: payload as Buffer,
        });
        this.last = Date.now();
      }
    } catch {
      // socket closed
    }
  }

  /** Resolves once nothing has arrived for `ms`; returns and forgets what arrived. */
  async quiet(ms = 400): Promise<Message[]> {
    const start = Date.now();
    while (Date.now() - Math.max(this.last, start) < ms) await new Promise((r) => setTimeout(r, 50));
    return this.msgs.splice(0);
  }
}

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
    const pubBase = await freePortRange(2);
    const replayBase = await freePortRange(2);
    const sub = new Subscriber({ linger: 0 });
    await sub.bind(`tcp://127.0.0.1:${pubBase}`);
    await sub.bind(`tcp://127.0.0.1:${pubBase + 1}`);
    sub.subscribe();
    const collector = new Collector(sub);
    const cfg = simConfig({
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
    });
    try {
      await withSim(cfg, async (sim) => {
        await new Promise((r) => setTimeout(r, 500)); // let the connects and subscriptions settle
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
        const msgs = await collector.quiet();

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
        expect(r0?.seqs).toEqual(r0?.seqs.map((_, i) => BigInt(i))); // 0, 1, 2, … per rank
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
        const rep = await replay(`tcp://127.0.0.1:${replayBase}`, 2n);
        const end = rep.at(-1) as Buffer[];
        expect(end.map((f) => f.toString("hex"))).toEqual(["", "", "ffffffffffffffff", ""]);
        const body = rep.slice(0, -1);
        expect(body.map((f) => f.length)).toEqual(body.map(() => 4));
        expect(body.map((f) => (f[2] as Buffer).readBigUInt64BE())).toEqual(r0?.seqs.slice(2));
        expect(body.map((f) => (f[1] as Buffer).toString())).toEqual(body.map(() => "kv@sim@qwen3"));
        expect(body.map((f) => (f[3] as Buffer).toString("hex"))).toEqual(
          msgs
            .filter((m) => decodePayload(m.payload).rank === 0 && m.seq >= 2n)
            .map((m) => m.payload.toString("hex")),
        );

        // Reset: vLLM's /reset_prefix_cache → AllBlocksCleared on every rank.
        const reset = await fetch(`http://127.0.0.1:${sim.ports[0]}/reset_prefix_cache`, { method: "POST" });
        expect(reset.status).toBe(200);
        expect(reset.headers.get("x-kvroute-sim-reset")).toBe("done");
        const after = await collector.quiet();
        expect(after.map((m) => decodePayload(m.payload).events.map((e) => e.type))).toEqual([
          ["AllBlocksCleared"],
          ["AllBlocksCleared"],
        ]);
        expect((await cacheDump(sim, 0)).size).toBe(0);
      });
    } finally {
      sub.close();
    }
  });

  it("legacy replay form, buffer_steps and map encoding", async () => {
    const replayBase = await freePortRange(1);
    const pubBase = await freePortRange(1);
    const cfg = simConfig({
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
    });
    await withSim(cfg, async (sim) => {
      for (let i = 0; i < 5; i++)
        await post(sim.ports[0] as number, "/v1/completions", { prompt: prompt(i), max_tokens: 2 });
      const pub = sim.ranks[0]?.publisher;
      await pub?.flush();
      const rep = await replay(`tcp://127.0.0.1:${replayBase}`, 0n);
      const end = rep.at(-1) as Buffer[];
      expect(end.map((f) => f.toString("hex"))).toEqual(["", "ffffffffffffffff", ""]);
      const body = rep.slice(0, -1);
      expect(body).toHaveLength(3); // only buffer_steps batches are kept
      expect(body.every((f) => f.length === 3)).toBe(true);
      const seqs = body.map((f) => (f[1] as Buffer).readBigUInt64BE());
      expect(seqs[2]).toBeGreaterThanOrEqual(3n);
      expect(seqs).toEqual([seqs[0], (seqs[0] as bigint) + 1n, (seqs[0] as bigint) + 2n]);
      const decoded = decodePayload(body[0]?.[2] as Buffer);
      expect(decoded.rank).toBe(0);
      const raw = decoded.events[0]?.raw as Record<string, unknown>;
      expect(raw.type).toBe("BlockStored");
      // One entry per block, null without LoRA or salt (vLLM's raw per-block list).
      expect(raw.extra_keys).toEqual((raw.block_hashes as unknown[]).map(() => null));
      expect(raw).toHaveProperty("lora_name", null);
    });
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
