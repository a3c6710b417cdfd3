// KV events relayed by a pool's owner (replicas/kv-relay.ts): a real engine stream (vLLM batches,
// both encodings, stores, removals, a clear, and an engine restart the owner's ingest resets on)
// goes through the owner's RankIngest into its index through the relaying sink; the relays,
// encoded and decoded as on NATS, go into a peer's index. The peer must hold what the owner holds
// (same blocks, same bucket images) whether it reads batches in the core or in JavaScript; a lost
// relay clears the pool's slots there (and they refill); a peer that owns the pool itself does
// not apply relays; two senders of one pool at once leave the peer with the engine's state.
import { pino } from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { encodeSeq } from "../../control-plane/src/events/frames.ts";
import { RankIngest } from "../../control-plane/src/events/rank-ingest.ts";
import { applyRelayedBatch } from "../../control-plane/src/events/relayed-batch.ts";
import { newRankStats, ThrottledLog } from "../../control-plane/src/events/stats.ts";
import { coreChunkHasher } from "../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import { type OutgoingRelay, RelayApplier, RelayingSink } from "../../control-plane/src/replicas/kv-relay.ts";
import {
  decodeRelayedEvents,
  encodeRelayedEvents,
  type RelayedEvents,
} from "../../control-plane/src/replicas/replica-codec.ts";
import { detokenizeInto } from "../../control-plane/src/tokens/detokenize.ts";
import { buildTokenBytesTable } from "../../control-plane/src/tokens/token-bytes-table.ts";
import {
  batch,
  clearedMap,
  LATER_TS,
  range,
  removedArray,
  removedMap,
  storedArray,
  storedMap,
} from "../events/msgspec.ts";
import { loadModel } from "../tokens/models.ts";

const built = buildTokenBytesTable(loadModel("qwen3").tokenizer);
if (!built.ok) throw new Error(built.reason);
const table = built.table;
const SLOTS = ["p0/10.0.0.1:8000#0", "p0/10.0.0.1:8000#1"];
const poolOf = (key: string) => key.slice(0, key.indexOf("/"));
const indexes: PrefixIndex[] = [];
afterAll(() => {
  for (const i of indexes) i.dispose();
});

function newIndex(fast: boolean): PrefixIndex {
  const scratch = new Uint8Array(1 << 16);
  const index = new PrefixIndex({
    buckets: 256,
    ways: 16,
    maxSlots: 8,
    now: () => 1000,
    batchFastPath: fast,
  });
  for (const [slotId, slotKey] of SLOTS.entries())
    index.addSlot({
      slotKey,
      slotId,
      model: "m",
      hasher: coreChunkHasher(64),
      detokenize: (ids, previous) => {
        const n = detokenizeInto(table, ids, scratch, 0, previous);
        return typeof n === "number" ? scratch.subarray(0, n) : null;
      },
      tokenTable: fast ? table : null,
    });
  indexes.push(index);
  return index;
}

/** The owner: each slot's stream through its own RankIngest into the relaying sink. */
function owner(relays: RelayedEvents[], owns = () => true, fast = true) {
  const index = newIndex(fast);
  const sink = new RelayingSink(index, {
    poolOf,
    owns,
    send: (r: OutgoingRelay) =>
      // Through the wire format, as a peer receives it.
      relays.push(decodeRelayedEvents(encodeRelayedEvents({ replica: "owner", epoch: 7n, ...r }))),
  });
  const ingests = SLOTS.map(
    (slotKey) =>
      new RankIngest({
        slotKey,
        rank: 0,
        topic: "kv",
        sink,
        stats: newRankStats(slotKey, 0, "-", "connect", null),
        log: new ThrottledLog(pino({ level: "silent" }), 10_000),
        replay: null,
        maxPending: 100,
        now: () => 5,
      }),
  );
  const send = (slot: number, seq: number, payload: Buffer) =>
    ingests[slot]?.onFrames([Buffer.from("kv"), encodeSeq(seq), payload]);
  return { index, sink, send };
}

function peer(
  fast: boolean,
  owns = (_pool: string) => false,
  accepts = (_pool: string, _sender: string) => true,
) {
  const index = newIndex(fast);
  const applier = new RelayApplier({
    owns,
    accepts,
    poolOf,
    slotsOf: () => SLOTS,
    apply: (slotKey, payload) => applyRelayedBatch(index, slotKey, payload, 0),
    reset: (slotKey) => index.rankReset(slotKey, "gap"),
  });
  return { index, applier };
}

const tokens = (start: number, blocks: number) => range(start, 16 * blocks);
const stored = (hashes: number[], parent: number | null, start: number) => ({
  hashes,
  parent,
  tokens: tokens(start, hashes.length),
  blockSize: 16,
});

/** Two slots' streams: chains in both encodings, a removal, a clear, and an engine restart (seq back to 0). */
function stream(send: (slot: number, seq: number, payload: Buffer) => void): void {
  send(0, 0, batch([storedArray(stored([1, 2, 3], null, 100))], 0));
  send(1, 0, batch([storedMap(stored([11, 12], null, 500))], 0));
  send(0, 1, batch([storedMap(stored([4, 5], 3, 148))], 0));
  send(1, 1, batch([removedMap([12]), storedArray(stored([13], 11, 900))], 0));
  send(0, 2, batch([removedArray([5]), storedArray(stored([6], 4, 2000))], 0));
  send(1, 2, batch([clearedMap, storedMap(stored([21, 22, 23], null, 3000))], 0));
  // Slot 0's engine restarts: its new stream starts at 0 with a later stamp (the ingest resets).
  send(0, 0, batch([storedArray(stored([31, 32], null, 4000))], 0, LATER_TS));
}

const view = (index: PrefixIndex) =>
  SLOTS.map((s) => [...(index.slot(s)?.blockHashes() ?? [])].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
const images = (index: PrefixIndex) =>
  [...index.allImages()].map(([k, v]) => `${k}:${Buffer.from(v).toString("hex")}`);

describe("KV events relayed by a pool's owner", () => {
  const where = (fast: boolean) => (fast ? "in the core" : "in JavaScript");
  for (const [ownerFast, fast] of [
    [true, true],
    [true, false],
    [false, true],
    [false, false],
  ] as const) {
    it(`a peer that applies the relays holds what the owner holds (owner reads batches ${where(ownerFast)}, peer ${where(fast)})`, () => {
      const relays: RelayedEvents[] = [];
      const o = owner(relays, () => true, ownerFast);
      stream(o.send);
      expect(relays.filter((r) => r.kind === "reset").length).toBeGreaterThan(0);
      const p = peer(fast);
      for (const r of relays) p.applier.receive(r);
      expect(p.applier.stats).toMatchObject({
        batches: relays.length - p.applier.stats.resets,
        gaps: 0,
        dropped: {},
      });
      expect(view(o.index)[0]).toEqual([31n, 32n]);
      expect(view(p.index)).toEqual(view(o.index));
      expect(images(p.index)).toEqual(images(o.index));
    });
  }

  it("a lost relay clears the pool's slots on the peer; later batches refill them", () => {
    const relays: RelayedEvents[] = [];
    const o = owner(relays);
    o.send(0, 0, batch([storedArray(stored([1, 2], null, 100))], 0));
    o.send(1, 0, batch([storedArray(stored([11], null, 500))], 0));
    o.send(0, 1, batch([storedArray(stored([3], 2, 132))], 0)); // lost on the way
    o.send(0, 2, batch([storedArray(stored([41], null, 700))], 0));
    const p = peer(true);
    for (const r of relays.filter((_, i) => i !== 2)) p.applier.receive(r);
    expect(p.applier.stats.gaps).toBe(1);
    // Everything before the hole is gone from both slots (a chain past it would be an orphan); the batch after it applied.
    expect(view(p.index)).toEqual([[41n], []]);
    expect(view(o.index)).toEqual([[1n, 2n, 3n, 41n], [11n]]);
  });

  it("a peer that owns the pool itself applies its own subscription, not relays", () => {
    const relays: RelayedEvents[] = [];
    const o = owner(relays);
    stream(o.send);
    const p = peer(true, () => true);
    for (const r of relays) p.applier.receive(r);
    expect(p.applier.stats.dropped).toEqual({ own_pool: relays.length });
    expect(view(p.index)).toEqual([[], []]);
  });

  it("a sender the peer does not take as the pool's owner is refused (pool-sharding.ts: while that owner is heard)", () => {
    const relays: RelayedEvents[] = [];
    const o = owner(relays);
    stream(o.send);
    let quiet = false;
    const p = peer(true, undefined, (_pool, sender) => sender === "the-owner" || quiet);
    const half = Math.floor(relays.length / 2);
    for (const r of relays.slice(0, half)) p.applier.receive(r);
    expect(p.applier.stats.dropped).toEqual({ not_owner: half });
    expect(view(p.index)).toEqual([[], []]);
    // The owner went quiet: this sender (its successor, ahead of the peer's view) is applied.
    quiet = true;
    for (const r of relays.slice(half)) p.applier.receive(r);
    expect(p.applier.stats.batches + p.applier.stats.resets).toBe(relays.length - half);
  });

  it("two senders of one pool (a handover seen at different moments) leave the peer with the engine's state", () => {
    // Both relay the same engine stream; the second copy arrives interleaved with the first.
    const first: RelayedEvents[] = [];
    const second: RelayedEvents[] = [];
    const a = owner(first);
    const b = owner(second);
    for (const o of [a, b]) stream(o.send);
    const p = peer(true);
    for (let i = 0; i < Math.max(first.length, second.length); i++) {
      const x = first[i];
      const y = second[i];
      if (x !== undefined) p.applier.receive(x);
      if (y !== undefined) p.applier.receive({ ...y, replica: "second" });
    }
    expect(p.applier.stats.gaps).toBe(0);
    expect(view(p.index)).toEqual(view(a.index));
  });

  it("an owner relays nothing of a pool it no longer owns", () => {
    const relays: RelayedEvents[] = [];
    let owns = true;
    const o = owner(relays, () => owns);
    o.send(0, 0, batch([storedArray(stored([1], null, 100))], 0));
    owns = false;
    o.send(0, 1, batch([storedArray(stored([2], 1, 116))], 0));
    expect(relays.map((r) => r.seq)).toEqual([0n]);
    expect(view(o.index)[0]).toEqual([1n, 2n]);
  });
});
