// The ingest fast path (the core walks a batch payload and applies it, filter/core/kv-batch.ts)
// must give exactly what the JavaScript decoder and event-by-event delivery give, and hand back
// every batch it does not fully understand. Two pipelines — frames → RankIngest → PrefixIndex,
// one with the fast path and one without — are fed the same frames; after every few batches
// their dirty bucket images, slot counters, rank stats (drops, errors, ignored, per-medium
// counts), resets and block sets must be equal. Streams: the payload forms the decoder tests
// use, generated chains (both encodings, every envelope, removals, clears, tiers, duplicates,
// orphans, out-of-vocabulary ids, gaps, restarts, other ranks, the slot's block cap), LoRA
// adapters and salts in every form extra-keys.ts reads (the fast path takes them and hashes
// their roots in the core), and the same with what the fast path must refuse mixed in
// (placeholders, hybrid groups, SGLang's metadata, strings that are not UTF-8, bytes and float
// hashes, malformed events and payloads), plus arbitrary mutations of valid events and
// arbitrary extra keys.
import fc from "fast-check";
import { pino } from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { encodeEventBatch } from "../../control-plane/sim/kv-events.ts";
import { encodeSeq } from "../../control-plane/src/events/frames.ts";
import { RankIngest } from "../../control-plane/src/events/rank-ingest.ts";
import { newRankStats, ThrottledLog } from "../../control-plane/src/events/stats.ts";
import { coreChunkHasher } from "../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import { detokenizeInto } from "../../control-plane/src/tokens/detokenize.ts";
import {
  buildTokenBytesTable,
  type TokenBytesTable,
} from "../../control-plane/src/tokens/token-bytes-table.ts";
import {
  batch,
  clearedArray,
  clearedMap,
  encode,
  F64,
  range,
  removedArray,
  removedMap,
  type StoredSpec,
  storedArray,
  storedMap,
} from "../events/msgspec.ts";
import { loadModel } from "../tokens/models.ts";

const built = buildTokenBytesTable(loadModel("qwen3").tokenizer);
if (!built.ok) throw new Error(built.reason);
const table: TokenBytesTable = built.table;
const TOPIC = Buffer.from("kv");
const BIG = 0xfedc_ba98_7654_3210n;
type Value = Parameters<typeof encode>[0];

function jsDetokenize(t: TokenBytesTable) {
  const scratch = new Uint8Array(1 << 16);
  return (ids: ArrayLike<number>, previous: number) => {
    const n = detokenizeInto(t, ids, scratch, 0, previous);
    return typeof n === "number" ? scratch.subarray(0, n) : null;
  };
}

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Pipeline {
  readonly index: PrefixIndex;
  readonly stats = newRankStats("s", 0, "-", "connect", null);
  readonly ingest: RankIngest;
  fastBatches = 0;

  constructor(fast: boolean, maxBlocks: number) {
    // A fixed clock: chunk stamps order rows in an image, and the two runs must not differ by it.
    this.index = new PrefixIndex({
      buckets: 256,
      ways: 16,
      maxSlots: 8,
      maxBlocksPerSlot: maxBlocks,
      now: () => 1000,
      batchFastPath: fast,
    });
    this.index.addSlot({
      slotKey: "s",
      slotId: 1,
      model: "m",
      hasher: coreChunkHasher(64),
      detokenize: jsDetokenize(table),
      tokenTable: table,
    });
    const scan = this.index.scanBatch.bind(this.index);
    this.index.scanBatch = (slotKey, payload) => {
      const r = scan(slotKey, payload);
      if (r !== null) this.fastBatches++;
      return r;
    };
    this.ingest = new RankIngest({
      slotKey: "s",
      rank: 0,
      topic: "kv",
      sink: this.index,
      stats: this.stats,
      log: new ThrottledLog(pino({ level: "silent" }), 10_000),
      replay: null,
      maxPending: 100,
      now: () => 5,
    });
  }

  snapshot() {
    const slot = this.index.slot("s");
    return {
      images: this.index.takeDirtyImages().map(([k, v]) => `${k}:${Buffer.from(v).toString("hex")}`),
      slot: { ...slot?.stats },
      blocks: [...(slot?.blockHashes() ?? [])].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
      rank: JSON.parse(JSON.stringify(this.stats)),
      resets: this.index.resets,
      unknownSlotEvents: this.index.unknownSlotEvents,
      chunks: this.index.chunks.size,
    };
  }
}

const open: Pipeline[] = [];
afterAll(() => {
  for (const p of open) p.index.dispose();
});

/** Frames as [seq, payload]; returns both pipelines after comparing them every `every` frames. */
function runBoth(frames: Array<[number, Buffer]>, every = 7, maxBlocks = 1 << 20): [Pipeline, Pipeline] {
  const fast = new Pipeline(true, maxBlocks);
  const js = new Pipeline(false, maxBlocks);
  open.push(fast, js);
  for (const [i, [seq, payload]] of frames.entries()) {
    for (const p of [fast, js]) p.ingest.onFrames([TOPIC, encodeSeq(seq), payload]);
    if (i % every === every - 1 || i === frames.length - 1) expect(fast.snapshot()).toEqual(js.snapshot());
  }
  expect(js.fastBatches).toBe(0);
  return [fast, js];
}

const inOrder = (payloads: Buffer[]): Array<[number, Buffer]> => payloads.map((p, i) => [i, p]);

/** The payload forms of test/events (decode, tiers, salt), in one stream. */
function decoderFixtures(): Buffer[] {
  const s = (spec: Partial<StoredSpec> & { hashes: StoredSpec["hashes"] }): StoredSpec => ({
    tokens: range(100, 4 * spec.hashes.length),
    blockSize: 4,
    ...spec,
  });
  const ts = (i: number) => 1_700_000_000 + i;
  const out: Value[][] = [
    [storedArray(s({ hashes: [BIG, 2] })), storedMap(s({ hashes: [3], parent: 2 }))],
    [storedArray(s({ hashes: [BIG + 1n] })).slice(0, 6)], // oldest 6-element form
    [storedArray(s({ hashes: [10], medium: "CPU" }), [null, 0, "full_attention", null])],
    [
      storedMap(
        s({ hashes: [11], extra: { group_idx: 0, kv_cache_spec_kind: "mla_attention", event_version: 2 } }),
      ),
    ],
    [storedMap(s({ hashes: [12], medium: null })), storedMap(s({ hashes: [13], parent: 12, medium: "" }))],
    [removedArray([BIG]), removedArray([2], "GPU"), removedMap([3]), clearedArray],
    [storedMap(s({ hashes: [20], extra: { extra_keys: [["salt-a"]] } }))], // salt (vLLM raw)
    [storedArray(s({ hashes: [21] }), [[["salt-b"]]])],
    [storedMap(s({ hashes: [22], extra: { extra_keys: [[{ type: "cache_salt", salt: "s" }]] } }))],
    [storedMap(s({ hashes: [23], loraName: "adapter", extra: { extra_keys: [["adapter", "salt"]] } }))],
    [storedMap(s({ hashes: [24], parent: 23, extra: { extra_keys: [null] } }))],
    [storedMap(s({ hashes: [25], extra: { extra_keys: [null, null] } }))],
    [
      storedMap(s({ hashes: [26], extra: { group_idx: 1 } })),
      storedMap(s({ hashes: [27], extra: { kv_cache_spec_kind: "sliding_window" } })),
    ],
    [{ type: "BlockStored", block_hashes: [12, 13], token_ids: [], block_size: 16, medium: "CPU" }], // placeholder
    [removedMap([12], { medium: "CPU" }), removedArray([13], "CPU")],
    [
      storedMap(
        s({
          hashes: [-5n, -(2n ** 63n)],
          extra: { cache_salt: "sg", session_id: "sess" },
          medium: "CPU_TIER1",
        }),
      ),
    ],
    [
      storedArray({
        hashes: [30],
        tokens: range(0, 4),
        blockSize: 4,
        loraName: { cache_salt: "m" } as never,
      }),
    ],
    [storedArray(s({ hashes: [Buffer.from("0102030405060708090a", "hex")] }))],
    [storedArray(s({ hashes: [40], loraId: 7 }))],
    [42 as Value, ["BlockStored", [1], null], { type: "Foo" }, storedArray(s({ hashes: [41] }))],
    [clearedMap, storedMap(s({ hashes: [50] }))],
  ];
  const payloads = out.map((evs, i) => batch(evs, i % 3 === 0 ? undefined : i % 3 === 1 ? 0 : null, ts(i)));
  // Envelopes: a map batch, SGLang's attn_dp_rank, trailing fields, another rank, broken bytes.
  const ev = [storedMap(s({ hashes: [60] })), storedArray(s({ hashes: [61], parent: 60 }))];
  payloads.push(encode({ ts: new F64(ts(30)), events: ev, data_parallel_rank: 0 }));
  payloads.push(encode({ ts: new F64(ts(31)), events: [storedMap(s({ hashes: [62] }))], attn_dp_rank: 0 }));
  payloads.push(encode([new F64(ts(32)), [storedMap(s({ hashes: [63] }))], 0, "extra", { more: 1 }]));
  payloads.push(batch([storedMap(s({ hashes: [64] }))], 1, ts(33)));
  const good = batch([storedMap(s({ hashes: [65] }))], 0, ts(34));
  payloads.push(
    good.subarray(0, good.length - 3),
    Buffer.concat([good, Buffer.from([0xc0])]),
    Buffer.from([0xc1, 0x00]),
  );
  payloads.push(encode([ts(35), [storedMap(s({ hashes: [66] }))], 0])); // integer ts
  return payloads;
}

/** One chain per LoRA/salt form (extra-keys.ts), each a parentless run of two blocks and a
 * child, the same tokens every time so that only the root tells them apart. */
function keyedFixtures(): Buffer[] {
  const tokens = range(1000, 48);
  const out: Buffer[] = [];
  let base = 100;
  const form = (
    lora: string | null,
    first: Value,
    extra: Record<string, Value> = {},
    loraId: number | null = null,
  ) => {
    const spec = (hashes: number[], parent: number | null, toks: number[], keys: Value[]): StoredSpec => ({
      hashes,
      parent,
      tokens: toks,
      blockSize: 16,
      loraName: lora,
      loraId,
      extra: { extra_keys: keys, ...extra },
    });
    // The child's tuples hold strings too: only a sequence's first run carries the salt.
    const childKeys: Value[] = [[lora ?? "other", "ignored-salt"]];
    const a = spec([base, base + 1], null, tokens.slice(0, 32), [first, lora === null ? null : [lora]]);
    const b = spec([base + 2], base + 1, tokens.slice(32), childKeys);
    base += 10;
    const ts = 1_700_000_000 + out.length;
    out.push(batch([storedArray(a, [a.extra?.extra_keys ?? null]), storedArray(b, [childKeys])], 0, ts));
    out.push(
      batch(
        [
          storedMap({ ...a, hashes: [base, base + 1] }),
          storedMap({ ...b, hashes: [base + 2], parent: base + 1 }),
        ],
        0,
        ts + 0.5,
      ),
    );
    base += 10;
  };
  form(null, null); // the plain chain (first: keyedFixtures().slice(0, 1) is its array form)
  form("adapter-a", ["adapter-a"]); // LoRA only: the name leads every tuple
  form("adapter-a", ["adapter-a", "tenant"]); // LoRA and salt
  form(null, ["tenant"]); // salt only (vLLM's raw tuple)
  form(null, [{ type: "cache_salt", salt: "tenant" }]); // vLLM PR #55488's typed form
  form("x", [
    { type: "lora", name: "x" },
    { type: "cache_salt", salt: "t2" },
  ]);
  form(null, [["mm-1", 0], ["mm-2", 16], "tenant"]); // multimodal pairs, then the salt
  form(null, ["bare-mm-hash"]); // an older engine's bare multimodal hash: taken for a salt
  form(null, [3, "tenant"], {}, 3); // an older engine's int LoRA id leads the tuple
  form(null, ["tenant", new Uint8Array([1, 2, 3])]); // prompt-embeds digest last
  form(null, [""]); // an empty salt is no salt
  form(null, [{ type: "cache_salt", salt: "" }, "later"]); // a typed empty salt ends the search
  form("", [""]); // an empty LoRA name
  form("ädapter", ["ädapter", "tenant-ü-🙂"]); // non-ASCII names and salts
  form("a", ["s", "a"]); // the LoRA name elsewhere than first is a salt candidate like any string
  form(null, [{ type: "mm", hash: "h" }, { type: "cache_salt", salt: 5 }, "s2"]); // other maps pass
  form(null, "not-a-tuple"); // a first entry that is not a list: no salt
  form(null, [], { cache_salt: "sg" }); // SGLang's named salt (map form only; the array ignores it)
  form(null, ["v"], { cache_salt: "sg" }); // the named salt wins over extra keys
  form(null, ["v"], { cache_salt: "" }); // even when empty
  form("adapter-a", ["adapter-a"], {}, 7); // lora_id beside the name (not hashed)
  return out;
}

/** LoRA/salt payloads the decoder must read: each differs from a taken form by one thing. */
function keyedNearMisses(): Buffer[] {
  const s = (extra: Record<string, Value>, loraName: string | null = null): Value =>
    storedMap({ hashes: [900], tokens: range(1000, 16), blockSize: 16, loraName, extra });
  /** Overwrites the UTF-8 of `from` with as many other bytes: strings msgspec would not write. */
  const patch = (p: Buffer, from: string, to: number[]) => {
    const at = p.indexOf(from);
    expect(at).toBeGreaterThan(0);
    expect(Buffer.byteLength(from)).toBe(to.length);
    Buffer.from(to).copy(p, at);
    return p;
  };
  return [
    patch(batch([s({ extra_keys: [["salt\x01", null]] })]), "salt\x01", [0x73, 0x61, 0x6c, 0xff, 0x01]),
    patch(batch([s({ extra_keys: [["adapter"]] }, "ad\xaa")]), "ad\xaa", [0x61, 0xed, 0xa0, 0x80]),
    patch(batch([s({ cache_salt: "sg\x02" })]), "sg\x02", [0xc0, 0xaf, 0x67]),
    // A typed salt with its key repeated (msgpackr keeps the last).
    patch(
      batch([s({ extra_keys: [[{ type: "cache_salt", salt: "a", salX: "b" }]] })]),
      "salX",
      [0x73, 0x61, 0x6c, 0x74],
    ),
    batch([s({ metadata: { cache_salt: "m" } })]),
    batch([
      storedArray({
        hashes: [901],
        tokens: range(0, 16),
        blockSize: 16,
        loraName: { cache_salt: "m" } as never,
      }),
    ]),
    batch([s({}, 5 as never)]),
    batch([s({ extra_keys: "tenant" })]),
    batch([s({ cache_salt: 5 })]),
    batch([storedMap({ hashes: [902], tokens: range(0, 16), blockSize: 16, loraId: -1 })]),
    batch([storedMap({ hashes: [903], tokens: range(0, 16), blockSize: 16, extra: { lora_id: "3" } })]),
  ];
}

interface Knobs {
  /** Mix in what the fast path must refuse. */
  refused: boolean;
  /** Now and then skip or repeat a sequence number. */
  sequencing: boolean;
}

/** A generated stream of chained stores, removals and clears. */
function generated(seed: number, batches: number, k: Knobs): Array<[number, Buffer]> {
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  /** Wire values of the hashes stored so far (the same value is reused for parents and removals). */
  const known: Array<number | bigint> = [];
  let next = 1;
  const newHash = (): number | bigint => {
    // msgspec writes the smallest form: fixints, u16/u32s, u64s ≥ 2^63, or SGLang's signed form.
    const n = next++;
    const r = rnd();
    if (r < 0.15 && n < 120) return n;
    if (r < 0.4) return 1000 + n * 7919;
    if (r < 0.8) return BIG + BigInt(n);
    return -BigInt(n);
  };
  const token = () => {
    const r = rnd();
    if (r < 0.003) return table.size + 3; // out of the vocabulary
    if (r < 0.1) return Math.floor(rnd() * 300);
    return Math.floor(rnd() * table.size);
  };
  const media = k.refused
    ? [null, "GPU", "", "CPU", "STORAGE", "CPU_TIER1", "DISK", "weird"]
    : [null, "GPU", "GPU", "", "CPU", "STORAGE"];
  const stored = (): Value => {
    const size = pick([1, 4, 16]);
    const n = 1 + Math.floor(rnd() * 4);
    const r = rnd();
    let parent: number | bigint | null = null;
    if (known.length > 0 && r < 0.75)
      parent = known[known.length - 1 - Math.floor(rnd() * Math.min(8, known.length))] as number | bigint;
    else if (r < 0.8) parent = 999_999; // never stored: an orphan
    const hashes = Array.from({ length: n }, () =>
      known.length > 0 && rnd() < 0.08 ? pick(known) : newHash(),
    );
    known.push(...hashes);
    const spec: StoredSpec = {
      hashes,
      parent,
      tokens: Array.from({ length: n * size }, token),
      blockSize: size,
      medium: pick(media),
    };
    const extra: Record<string, Value> = {};
    if (rnd() < 0.2) extra.extra_keys = Array.from({ length: n }, () => null);
    if (rnd() < 0.1) extra.group_idx = 0;
    if (rnd() < 0.1) extra.kv_cache_spec_kind = "full_attention";
    if (k.refused) {
      const x = rnd();
      if (x < 0.05) spec.loraName = "lora-a";
      else if (x < 0.08) spec.loraId = 3;
      else if (x < 0.14) extra.extra_keys = [["salt-x"], ...Array.from({ length: n - 1 }, () => null)];
      else if (x < 0.17) extra.extra_keys = [[["mm-hash", 0]]];
      else if (x < 0.2) extra.group_idx = 1;
      else if (x < 0.22) extra.kv_cache_spec_kind = "sliding_window";
      else if (x < 0.25) extra.cache_salt = "sglang-salt";
      else if (x < 0.28)
        return { type: "BlockStored", block_hashes: hashes, token_ids: [], block_size: size, medium: "CPU" };
      else if (x < 0.3)
        spec.tokens = spec.tokens.slice(1); // token count mismatch
      else if (x < 0.31) spec.hashes = [new Uint8Array([1, 2, 3])];
      else if (x < 0.32) spec.hashes = [new F64(1.5) as never];
    }
    if (rnd() < 0.5) return storedMap({ ...spec, extra });
    const trailing: Value[] =
      Object.keys(extra).length === 0
        ? []
        : [extra.extra_keys ?? null, extra.group_idx ?? null, extra.kv_cache_spec_kind ?? null];
    const arr = storedArray(spec, trailing);
    if (k.refused && "cache_salt" in extra) return storedMap({ ...spec, extra });
    return arr;
  };
  const removed = (): Value => {
    const hashes = Array.from({ length: 1 + Math.floor(rnd() * 3) }, () =>
      known.length > 0 && rnd() < 0.85 ? pick(known) : 777_777,
    );
    const medium = pick(media);
    if (rnd() < 0.5) return removedArray(hashes, medium);
    const extra: Record<string, Value> = { medium };
    if (k.refused && rnd() < 0.1) extra.group_idx = 2;
    return removedMap(hashes, extra);
  };
  const frames: Array<[number, Buffer]> = [];
  let seq = 0;
  let ts = 1_700_000_000;
  for (let b = 0; b < batches; b++) {
    const events: Value[] = [];
    const count = 1 + Math.floor(rnd() * 4);
    for (let e = 0; e < count; e++) {
      const r = rnd();
      if (r < 0.7) events.push(stored());
      else if (r < 0.99) events.push(removed());
      else events.push(rnd() < 0.5 ? clearedArray : clearedMap);
    }
    if (k.refused && rnd() < 0.03)
      events.push(pick<Value>([42, ["Unknown"], { type: "Foo" }, ["BlockStored", [1]]]));
    ts += rnd();
    const env = rnd();
    let payload: Buffer;
    if (env < 0.4) payload = batch(events, 0, ts);
    else if (env < 0.6) payload = batch(events, undefined, ts);
    else if (env < 0.7) payload = batch(events, null, ts);
    else if (env < 0.8) payload = encode([new F64(ts), events, 0, "trailing"]);
    else if (env < 0.95) payload = encode({ ts: new F64(ts), events, data_parallel_rank: 0 });
    else payload = batch(events, 1, ts); // another rank's batch
    if (k.refused && rnd() < 0.03)
      payload =
        rnd() < 0.5
          ? payload.subarray(0, Math.floor(payload.length / 2))
          : Buffer.concat([payload, Buffer.from([0])]);
    const jump = k.sequencing ? rnd() : 1;
    if (jump < 0.02)
      seq += 2; // a gap (no replay endpoint: the rank resets)
    else if (jump < 0.04 && seq > 0) seq -= 1; // a repeat: a duplicate or a restart
    frames.push([seq, payload]);
    seq++;
  }
  return frames;
}

describe("the core's batch fast path indexes exactly what the JavaScript decoder indexes", () => {
  it("the decoder tests' payload forms", () => {
    const [fast] = runBoth(inOrder(decoderFixtures()), 1);
    // Ten go to the decoder: the placeholder, group 1 / sliding window, SGLang's salt on an
    // unknown medium, SGLang's metadata in lora_name's place, a bytes hash, junk events,
    // attn_dp_rank, and three broken payloads. Salts and LoRA take the fast path.
    expect(fast.fastBatches).toBe(decoderFixtures().length - 10);
  });

  it("LoRA adapters, salts and multimodal keys in every form extra-keys.ts reads take the fast path", () => {
    const payloads = keyedFixtures();
    const [fast] = runBoth(inOrder(payloads), 1);
    expect(fast.fastBatches).toBe(payloads.length);
    // The roots were applied: the same tokens under the keyed roots are mostly other chunks than
    // the plain chain's (which is the first fixture).
    const plainOnly = runBoth(inOrder(payloads.slice(0, 1)), 1)[0].snapshot().chunks;
    expect(plainOnly).toBeGreaterThan(1);
    expect(fast.snapshot().chunks).toBeGreaterThan(10 * plainOnly);
  });

  it("near misses of the LoRA and salt forms go to the decoder", () => {
    const payloads = keyedNearMisses();
    const [fast] = runBoth(inOrder(payloads), 1);
    expect(fast.fastBatches).toBe(0);
  });

  it("arbitrary LoRA names and first-block extra keys", () => {
    const text = fc.oneof(fc.string({ unit: "grapheme", maxLength: 6 }), fc.constantFrom("", "a", "s"));
    const key = fc.oneof(
      text,
      fc.integer({ min: -5, max: 1000 }),
      fc.constant(null),
      fc.tuple(text, fc.nat(64)),
      fc.record({ type: fc.constantFrom("cache_salt", "lora", "mm"), salt: fc.oneof(text, fc.nat()) }),
      fc.record({ type: fc.constantFrom("lora", "cache_salt"), name: text }),
      fc.uint8Array({ maxLength: 4 }),
    );
    const event = fc.record({
      lora: fc.option(text),
      loraId: fc.option(fc.nat(9)),
      first: fc.oneof({ weight: 4, arbitrary: fc.array(key, { maxLength: 4 }) }, key),
      salt: fc.option(text, { freq: 5 }),
      child: fc.boolean(),
      map: fc.boolean(),
    });
    let taken = 0;
    let runs = 0;
    fc.assert(
      fc.property(fc.array(event, { minLength: 1, maxLength: 4 }), (events) => {
        const evs = events.map((e, i) => {
          const spec: StoredSpec = {
            hashes: [BIG + BigInt(2 * i), BIG + BigInt(2 * i + 1)],
            parent: e.child ? 7 : null,
            tokens: range(2000, 32),
            blockSize: 16,
            loraName: e.lora,
            loraId: e.loraId,
          };
          const extraKeys = [e.first as Value, null];
          if (!e.map) return storedArray(spec, [extraKeys]);
          return storedMap({
            ...spec,
            extra:
              e.salt === null ? { extra_keys: extraKeys } : { extra_keys: extraKeys, cache_salt: e.salt },
          });
        });
        const [fast, js] = runBoth(
          inOrder([
            batch([storedArray({ hashes: [7], tokens: range(3000, 16), blockSize: 16 })], 0),
            batch(evs, 0),
          ]),
          1,
        );
        taken += fast.fastBatches;
        runs++;
        for (const p of [fast, js]) {
          p.index.dispose();
          open.splice(open.indexOf(p), 1);
        }
      }),
      { numRuns: 150 },
    );
    // Grapheme strings are well-formed UTF-8: every batch takes the fast path.
    expect(taken).toBe(2 * runs);
  });

  it("the simulated worker's batches (vLLM's encodings) take the fast path", () => {
    const ids = range(1000, 32);
    const payloads = (["array", "map"] as const).flatMap((encoding) => [
      encodeEventBatch(
        1.7e9,
        [
          {
            type: "BlockStored",
            blockHashes: [BIG, 5n],
            parentBlockHash: null,
            tokenIds: ids,
            blockSize: 16,
            loraName: null,
            extraKeys: null,
          },
          {
            type: "BlockStored",
            blockHashes: [6n],
            parentBlockHash: 5n,
            tokenIds: ids.slice(0, 16),
            blockSize: 16,
            loraName: null,
            extraKeys: [null],
            medium: "CPU",
          },
          { type: "BlockRemoved", blockHashes: [6n], medium: "CPU" },
        ],
        0,
        encoding,
      ),
      encodeEventBatch(1.7e9 + 1, [{ type: "AllBlocksCleared" }], 0, encoding),
    ]);
    const [fast] = runBoth(inOrder(payloads), 1);
    expect(fast.fastBatches).toBe(payloads.length);
    expect(fast.stats.storedByMedium).toEqual({ GPU: 4, CPU: 2 });
  });

  it("generated streams the fast path understands: chains, removals, clears, tiers, envelopes", () => {
    const frames = generated(1, 600, { refused: false, sequencing: false });
    const [fast, js] = runBoth(frames);
    // Every batch but another rank's takes the fast path (those are refused by the rank check).
    expect(fast.fastBatches).toBeGreaterThan(frames.length * 0.9);
    const st = fast.snapshot().slot;
    expect(st.storedBlocks).toBeGreaterThan(500);
    expect(st.removedBlocks).toBeGreaterThan(30);
    expect(st.orphanBlocks).toBeGreaterThan(0);
    expect(st.undetokenizableBlocks).toBeGreaterThan(0);
    expect(st.duplicateStores).toBeGreaterThan(0);
    expect(st.lowerTierStores).toBeGreaterThan(0);
    expect(js.stats.dropped.rank_mismatch).toBeGreaterThan(0);
  });

  it("streams with salts, LoRA, media, placeholders, malformed events and payloads, gaps and restarts", () => {
    for (const seed of [2, 3, 4]) {
      const frames = generated(seed, 500, { refused: true, sequencing: true });
      const [fast, js] = runBoth(frames);
      expect(fast.fastBatches).toBeGreaterThan(frames.length * 0.1);
      expect(fast.fastBatches).toBeLessThan(frames.length * 0.9);
      const r = js.stats;
      expect(r.resets.gap + r.resets.restart).toBeGreaterThan(0);
      expect(Object.keys(r.dropped).length).toBeGreaterThan(2);
      expect(Object.keys(r.ignored).length).toBeGreaterThan(0);
      const slot = js.snapshot().slot;
      expect((slot.unresolvedPlaceholders ?? 0) + (slot.unknownMediumBlocks ?? 0)).toBeGreaterThan(0);
    }
  });

  it("a slot at its block cap evicts the same blocks both ways", () => {
    const [fast] = runBoth(generated(5, 300, { refused: false, sequencing: false }), 5, 64);
    expect(fast.snapshot().slot.evictedBlocks).toBeGreaterThan(0);
  });

  it("every truncation of valid payloads, and arbitrary bytes, are refused like the decoder refuses them", () => {
    const s = (hashes: (number | bigint)[], parent: number | bigint | null): StoredSpec => ({
      hashes,
      parent,
      tokens: range(40_000, 16 * hashes.length),
      blockSize: 16,
    });
    const whole = [
      batch([storedArray(s([BIG, 70_000], null)), removedArray([BIG], "CPU"), clearedArray], 0),
      encode({
        ts: new F64(1_700_000_001),
        events: [storedMap(s([-3n, 300], null)), removedMap([300], { medium: "GPU", group_idx: 0 })],
        data_parallel_rank: 0,
      }),
    ];
    const frames: Array<[number, Buffer]> = [];
    for (const p of whole) {
      for (let cut = 0; cut <= p.length; cut++) frames.push([frames.length, p.subarray(0, cut)]);
    }
    const [fast] = runBoth(frames, 25);
    expect(fast.fastBatches).toBe(whole.length); // only the uncut payloads
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 120 }), { minLength: 1, maxLength: 8 }), (payloads) => {
        const pair = runBoth(inOrder(payloads.map((b) => Buffer.from(b))), 1);
        for (const p of pair) {
          p.index.dispose();
          open.splice(open.indexOf(p), 1);
        }
      }),
      { numRuns: 100 },
    );
  });

  it("arbitrary mutations of valid events", () => {
    const good: Value[] = [
      storedArray({ hashes: [BIG, 2], parent: null, tokens: range(10, 8), blockSize: 4 }),
      storedMap({
        hashes: [3],
        parent: 2,
        tokens: range(20, 4),
        blockSize: 4,
        extra: { extra_keys: [null] },
      }),
      removedArray([BIG]),
      removedMap([3], { medium: "CPU" }),
    ];
    const mutated = fc.tuple(fc.constantFrom(...good), fc.nat(), fc.anything()).map(([ev, at, v]) => {
      if (Array.isArray(ev)) {
        const copy = [...ev];
        copy[1 + (at % (copy.length - 1))] = v as never;
        return copy;
      }
      const copy = { ...(ev as Record<string, never>) };
      const keys = Object.keys(copy).filter((key) => key !== "type");
      copy[keys[at % keys.length] as string] = v as never;
      return copy;
    });
    const events = fc.array(fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...good) }, mutated), {
      maxLength: 5,
    });
    fc.assert(
      fc.property(fc.array(events, { minLength: 1, maxLength: 6 }), (batches) => {
        const payloads: Buffer[] = [];
        for (const [i, evs] of batches.entries()) {
          try {
            payloads.push(batch(evs as Value[], 0, 1_700_000_000 + i));
          } catch {
            // not encodable as msgpack
          }
        }
        const [fast, js] = runBoth(inOrder(payloads), 1);
        for (const p of [fast, js]) {
          p.index.dispose();
          open.splice(open.indexOf(p), 1);
        }
      }),
      { numRuns: 150 },
    );
  });
});
