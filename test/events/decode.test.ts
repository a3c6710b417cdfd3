import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeBatch } from "../../control-plane/src/events/batch-decoder.ts";
import { normaliseHash } from "../../control-plane/src/events/hash.ts";
import type { BlockRemoved, BlockStored, KvEvent } from "../../control-plane/src/vocabulary/kv-events.ts";
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
} from "./msgspec.ts";

const BIG = 0xfedc_ba98_7654_3210n; // ≥ 2^63
const MAX = (1n << 64n) - 1n;

function events(payload: Buffer): KvEvent[] {
  const r = decodeBatch(payload);
  if (!r.ok) throw new Error(`decode failed: ${r.error}`);
  return r.batch.events;
}

describe("batch envelope", () => {
  it("reads the 3-element form with the rank", () => {
    const r = decodeBatch(batch([clearedArray], 3, 12.5));
    expect(r).toMatchObject({ ok: true, batch: { ts: 12.5, rank: 3 } });
  });

  it("reads the 2-element form (older engines, rank at its None default) as rank null", () => {
    const r = decodeBatch(batch([clearedArray]));
    expect(r).toMatchObject({ ok: true, batch: { rank: null, events: [{ type: "AllBlocksCleared" }] } });
  });

  it("accepts an explicit null rank and trailing envelope fields", () => {
    expect(decodeBatch(batch([], null))).toMatchObject({ ok: true, batch: { rank: null } });
    const r = decodeBatch(encode([new F64(1), [], 2, "future"]));
    expect(r).toMatchObject({ ok: true, batch: { rank: 2 } });
  });

  it("accepts a map-encoded batch with data_parallel_rank or SGLang's attn_dp_rank", () => {
    const a = decodeBatch(encode({ ts: new F64(2), events: [clearedMap], data_parallel_rank: 1 }));
    expect(a).toMatchObject({ ok: true, batch: { rank: 1, ts: 2 } });
    const b = decodeBatch(encode({ ts: new F64(2), events: [], attn_dp_rank: 4 }));
    expect(b).toMatchObject({ ok: true, batch: { rank: 4 } });
  });

  it.each([
    ["not msgpack", Buffer.from([0xc1, 0xff, 0x00]), "msgpack"],
    ["truncated", batch([clearedArray], 0).subarray(0, 5), "msgpack"],
    ["trailing bytes", Buffer.concat([batch([], 0), Buffer.from([0x01])]), "msgpack"],
    ["a scalar", encode(42), "batch_shape"],
    ["one element", encode([new F64(1)]), "batch_shape"],
    ["events not a list", encode([new F64(1), "x", 0]), "batch_shape"],
    ["ts not a number", encode(["now", [], 0]), "batch_shape"],
    ["negative rank", encode([new F64(1), [], -1]), "batch_rank"],
    ["string rank", encode([new F64(1), [], "0"]), "batch_rank"],
  ])("rejects %s", (_name, payload, error) => {
    expect(decodeBatch(payload)).toEqual({ ok: false, error });
  });
});

describe("vLLM array-form events", () => {
  it("decodes BlockStored with u64 hashes ≥ 2^63 and small ones, exactly", () => {
    const [ev] = events(
      batch(
        [storedArray({ hashes: [BIG, 7, MAX], parent: 1n << 63n, tokens: range(100, 48), blockSize: 16 })],
        0,
      ),
    ) as [BlockStored];
    expect(ev.type).toBe("BlockStored");
    expect(ev.hashes).toEqual([BIG, 7n, MAX]);
    expect(ev.parent).toBe(1n << 63n);
    expect(ev.tokenIds).toEqual(range(100, 48));
    expect(ev.blockSize).toBe(16);
    expect(ev.medium).toBe("GPU");
    expect(ev.loraName).toBeNull();
    expect(ev.groupIdx).toBeNull();
  });

  it("decodes the oldest 6-element form (no medium, no lora_name) and a null parent", () => {
    const old = ["BlockStored", [5], null, range(0, 4), 4, null];
    const [ev] = events(batch([old], 0)) as [BlockStored];
    expect(ev).toMatchObject({ hashes: [5n], parent: null, medium: "GPU", loraName: null, loraId: null });
  });

  it("reads medium, lora fields and the trailing extra_keys/group_idx/spec kind/window", () => {
    const a = storedArray(
      { hashes: [1, 2], tokens: range(0, 32), blockSize: 16, loraId: 3, medium: "CPU", loraName: "ad" },
      [[["ad", "salt"], ["ad"]], 0, "full_attention", 4096],
    );
    const [ev] = events(batch([a], 0)) as [BlockStored];
    expect(ev).toMatchObject({
      medium: "CPU",
      loraId: 3,
      loraName: "ad",
      extraKeys: [["ad", "salt"], ["ad"]],
      groupIdx: 0,
      kvCacheSpecKind: "full_attention",
      slidingWindow: 4096,
    });
  });

  it("decodes BlockRemoved (with and without medium) and AllBlocksCleared", () => {
    const evs = events(batch([removedArray([BIG, 9], "CPU"), ["BlockRemoved", [1]], clearedArray], 0));
    expect(evs).toEqual([
      {
        type: "BlockRemoved",
        hashes: [BIG, 9n],
        medium: "CPU",
        groupIdx: null,
        locality: null,
        ownership: null,
      },
      { type: "BlockRemoved", hashes: [1n], medium: "GPU", groupIdx: null, locality: null, ownership: null },
      { type: "AllBlocksCleared" },
    ]);
  });
});

describe("vLLM map-form events", () => {
  it("decodes BlockStored with all optional newer fields", () => {
    const m = storedMap({
      hashes: [BIG],
      parent: 11,
      tokens: range(0, 16),
      blockSize: 16,
      loraName: "x",
      extra: {
        extra_keys: [null],
        group_idx: 0,
        kv_cache_spec_kind: "mla_attention",
        kv_cache_spec_sliding_window: 512,
        event_version: 1,
        locality: "LOCAL",
        ownership: "ENGINE",
        unknown_future_field: [1, 2, 3],
      },
    });
    const [ev] = events(batch([m], 0)) as [BlockStored];
    expect(ev).toMatchObject({
      hashes: [BIG],
      parent: 11n,
      loraName: "x",
      medium: "GPU",
      extraKeys: [null],
      groupIdx: 0,
      kvCacheSpecKind: "mla_attention",
      slidingWindow: 512,
      eventVersion: 1,
      locality: "LOCAL",
      ownership: "ENGINE",
    });
  });

  it("fills defaults for omitted fields (omit_defaults)", () => {
    const minimal = { type: "BlockStored", block_hashes: [1], token_ids: [1, 2], block_size: 2 };
    const [ev] = events(batch([minimal], 0)) as [BlockStored];
    expect(ev).toMatchObject({ parent: null, medium: "GPU", loraName: null, loraId: null, extraKeys: null });
  });

  it("decodes BlockRemoved and AllBlocksCleared maps, and mixed encodings in one batch", () => {
    const evs = events(
      batch([removedMap([3], { medium: "CPU", group_idx: 0 }), clearedMap, removedArray([4])], 0),
    );
    expect(evs.map((e) => e.type)).toEqual(["BlockRemoved", "AllBlocksCleared", "BlockRemoved"]);
    expect((evs[0] as BlockRemoved).medium).toBe("CPU");
  });

  it("treats medium null or empty as GPU", () => {
    const evs = events(
      batch(
        [
          storedMap({ hashes: [1], tokens: [1], blockSize: 1, medium: null }),
          storedMap({ hashes: [2], tokens: [1], blockSize: 1, medium: "" }),
        ],
        0,
      ),
    ) as BlockStored[];
    expect(evs.map((e) => e.medium)).toEqual(["GPU", "GPU"]);
  });
});

// vLLM's cache_salt travels in the first block's `extra_keys` tuple (vllm/v1/core/kv_cache_utils.py
// generate_block_hash_extra_keys: lora_name + multimodal keys + cache_salt + prompt-embeds digest).
// One fixture per upstream definition of BlockStored (vllm/distributed/kv_events.py).
describe("vLLM cache_salt in extra_keys", () => {
  const salted = (s: StoredSpec, extraKeys: unknown, trailing: unknown[] = []) =>
    storedArray(s, [extraKeys as never, ...(trailing as never[])]);
  const two = { hashes: [1, 2], tokens: range(0, 32), blockSize: 16 };
  const saltOf = (ev: unknown) => {
    const [e] = events(batch([ev as never], 0)) as [BlockStored];
    return e.cacheSalt;
  };

  it("array form (msgspec array_like, vLLM < 0.26): the salt is a raw string in block 0's tuple", () => {
    expect(saltOf(salted({ ...two, medium: "GPU" }, [["tenant-a"], null]))).toBe("tenant-a");
    // with group_idx and the spec kind after it (vLLM 0.2x)
    expect(saltOf(salted(two, [["tenant-a"], null], [0, "full_attention"]))).toBe("tenant-a");
    expect(saltOf(salted(two, [null, null]))).toBeNull();
  });

  it("map form (vLLM ≥ 0.26, PR #42892): the same raw tuples under extra_keys", () => {
    const m = (extra_keys: unknown, parent: number | null = null) =>
      storedMap({
        ...two,
        parent,
        extra: { extra_keys: extra_keys as never, group_idx: 0, kv_cache_spec_kind: "full_attention" },
      });
    expect(saltOf(m([["tenant-a"], null]))).toBe("tenant-a");
    // What an unsalted request looks like from a live v0.26 engine: one None per block.
    expect(saltOf(m([null, null]))).toBeNull();
    expect(saltOf(m(undefined))).toBeNull();
  });

  it("typed extra keys (vLLM PR #55488, proposed): {type: cache_salt, salt}", () => {
    const typed = storedMap({
      ...two,
      loraName: "ad",
      extra: {
        event_version: 1,
        extra_keys: [
          [
            { type: "lora", name: "ad" },
            { type: "mm", modality: "image", hash: "ab".repeat(32), block_offset: 3 },
            { type: "cache_salt", salt: "tenant-a" },
          ],
          [{ type: "lora", name: "ad" }],
        ],
      },
    });
    expect(saltOf(typed)).toBe("tenant-a");
    const loraOnly = storedMap({
      ...two,
      loraName: "ad",
      extra: { extra_keys: [[{ type: "lora", name: "ad" }], [{ type: "lora", name: "ad" }]] },
    });
    expect(saltOf(loraOnly)).toBeNull();
  });

  it("tells the salt from the LoRA name, multimodal keys and prompt-embeds bytes", () => {
    const lora = { ...two, loraId: 1, loraName: "ad" };
    expect(saltOf(salted(lora, [["ad", "tenant-a"], ["ad"]]))).toBe("tenant-a");
    expect(saltOf(salted(lora, [["ad"], ["ad"]]))).toBeNull(); // LoRA alone is no salt
    expect(saltOf(salted(lora, [["ad", "ad"], ["ad"]]))).toBe("ad"); // a salt equal to the adapter's name
    // multimodal [identifier, offset] pairs come before the salt, prompt-embeds bytes after it
    const mm = [
      [["ab".repeat(32), 0], ["cd".repeat(32), 9], "tenant-a", Buffer.from([1, 2, 3])],
      [["cd".repeat(32), -7]],
    ];
    expect(saltOf(salted(two, mm))).toBe("tenant-a");
    expect(saltOf(salted(two, [[["ab".repeat(32), 0], Buffer.from([1])], null]))).toBeNull();
    // older vLLM hashed the adapter's int id
    expect(saltOf(salted({ ...two, loraId: 3 }, [[3, "tenant-a"], [3]]))).toBe("tenant-a");
  });

  it("reads it only where a sequence starts: a block with a parent inherits its salt", () => {
    expect(saltOf(salted({ ...two, parent: 77 }, [["tenant-a"], null]))).toBeNull();
    // only block 0's tuple counts
    expect(saltOf(salted(two, [null, ["tenant-a"]]))).toBeNull();
    expect(saltOf(salted(two, [["tenant-a"], null]))).toBe("tenant-a");
  });

  it("SGLang's named salt wins; malformed extra_keys are a field error", () => {
    const both = {
      ...(storedMap({ ...two, extra: { extra_keys: [["vllm-salt"], null] } }) as object),
      cache_salt: "sg",
    };
    expect(saltOf(both)).toBe("sg");
    const r = decodeBatch(batch([salted(two, "not a list")], 0));
    expect(r).toMatchObject({ ok: true, batch: { events: [], errors: { field_type: 1 } } });
  });
});

describe("integer widths", () => {
  it("accepts ints a non-msgspec producer wrote as uint64 (token ids, sizes, ranks)", () => {
    // Hand-built: fixarray [float64 ts, [["BlockStored", [1], nil, [u64 5, u64 6], u64 2, nil]], u64 3]
    const u64 = (n: number) =>
      Buffer.concat([Buffer.from([0xcf]), Buffer.from(BigInt(n).toString(16).padStart(16, "0"), "hex")]);
    const payload = Buffer.concat([
      Buffer.from([0x93, 0xcb]),
      Buffer.alloc(8), // ts 0.0
      Buffer.from([0x91, 0x96, 0xab]),
      Buffer.from("BlockStored"),
      Buffer.from([0x91, 0x01, 0xc0, 0x92]),
      u64(5),
      u64(6),
      u64(2),
      Buffer.from([0xc0]),
      u64(3),
    ]);
    const r = decodeBatch(payload);
    expect(r).toMatchObject({
      ok: true,
      batch: { rank: 3, events: [{ tokenIds: [5, 6], blockSize: 2, hashes: [1n] }] },
    });
  });
});

describe("filters", () => {
  it("ignores (and counts) non-zero group_idx and non-main attention kinds, keeps main kinds", () => {
    const s = (extra: Record<string, never> | Record<string, unknown>) =>
      storedMap({ hashes: [1], tokens: [1], blockSize: 1, extra: extra as never });
    const r = decodeBatch(
      batch(
        [
          s({ group_idx: 1 }),
          s({ kv_cache_spec_kind: "sliding_window", group_idx: 0 }),
          s({ kv_cache_spec_kind: "mamba" }),
          s({ kv_cache_spec_kind: "full_attention" }),
          s({ kv_cache_spec_kind: "sink_full_attention" }),
          removedMap([1], { group_idx: 2 }),
          { type: "BlockUpdated", block_hashes: [1] },
          ["Ignored"],
        ],
        0,
      ),
    );
    if (!r.ok) throw new Error(r.error);
    expect(r.batch.events.map((e) => (e as BlockStored).kvCacheSpecKind)).toEqual([
      "full_attention",
      "sink_full_attention",
    ]);
    expect(r.batch.ignored).toEqual({ group_idx: 2, spec_kind: 2, unknown_type: 2 });
    expect(r.batch.errors).toEqual({});
  });
});

describe("hash normalisation", () => {
  it("maps raw digest bytes to their last 8 bytes big-endian (= vLLM's int form)", () => {
    const digest = Buffer.from(range(1, 32)); // 32-byte sha256-sized digest
    const expected = BigInt(`0x${digest.subarray(24).toString("hex")}`);
    const [ev] = events(
      batch([storedArray({ hashes: [digest], parent: Buffer.from([1, 2]), tokens: [0], blockSize: 1 })], 0),
    ) as [BlockStored];
    expect(ev.hashes).toEqual([expected]);
    expect(ev.parent).toBe(0x0102n);
  });

  it("maps SGLang's signed int64 to the same 8 bytes read unsigned", () => {
    // SGLang: first 16 hex chars of the digest, shifted into the signed range.
    const hex = "f3a1c2b4d5e6f708";
    const unsigned = BigInt(`0x${hex}`);
    const signed = BigInt.asIntN(64, unsigned);
    expect(signed < 0n).toBe(true);
    expect(normaliseHash(signed)).toBe(unsigned);
    expect(normaliseHash(-1)).toBe(MAX);
    expect(normaliseHash(-5)).toBe(MAX - 4n);
  });

  it("round-trips every u64 and i64 through msgspec's smallest encodings", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(1n << 63n), max: MAX }), (h) => {
        const [ev] = events(batch([["BlockRemoved", [h]]], 0)) as [BlockRemoved];
        expect(ev.hashes[0]).toBe(BigInt.asUintN(64, h));
      }),
      { numRuns: 500 },
    );
  });

  it("rejects non-integers, empty bytes and other types", () => {
    for (const v of [1.5, Number.NaN, "12", Buffer.alloc(0), null, true, {}]) {
      expect(normaliseHash(v)).toBeNull();
    }
  });
});

describe("SGLang variant", () => {
  it("decodes 5-field positional BlockStored, attn_dp_rank and signed hashes", () => {
    const neg = -0x0123_4567_89ab_cdefn;
    const r = decodeBatch(
      encode({
        ts: new F64(3),
        events: [
          ["BlockStored", [neg, 42], null, range(0, 8), 4, null],
          ["BlockRemoved", [neg]],
        ],
        attn_dp_rank: 1,
      }),
    );
    if (!r.ok) throw new Error(r.error);
    const [st, rm] = r.batch.events as [BlockStored, BlockRemoved];
    expect(r.batch.rank).toBe(1);
    expect(st.hashes).toEqual([BigInt.asUintN(64, neg), 42n]);
    expect(rm.hashes).toEqual([BigInt.asUintN(64, neg)]);
  });

  it("reads SGLang's positional metadata map and its top-level cache_salt; keeps its media distinct", () => {
    const a = ["BlockStored", [1], null, [1, 2], 2, null, "CPU_PINNED", { cache_salt: "tenant-a" }];
    const m = {
      ...(storedMap({ hashes: [2], tokens: [1], blockSize: 1, medium: "DISK" }) as object),
      cache_salt: "t-b",
    };
    const evs = events(batch([a, m], 0)) as BlockStored[];
    expect(evs.map((e) => [e.medium, e.cacheSalt, e.loraName])).toEqual([
      ["CPU_PINNED", "tenant-a", null],
      ["DISK", "t-b", null],
    ]);
  });
});

describe("malformed events are dropped one by one", () => {
  it.each([
    ["not a list or map", 42, "event_shape"],
    ["array without tag", [1, 2, 3], "event_shape"],
    ["short BlockStored", ["BlockStored", [1], null], "event_shape"],
    ["map without type", { block_hashes: [1] }, "event_shape"],
    [
      "map BlockStored without token_ids",
      { type: "BlockStored", block_hashes: [1], block_size: 1 },
      "event_shape",
    ],
    ["hash is a float", storedArray({ hashes: [1.5], tokens: [1], blockSize: 1 }), "block_hashes"],
    ["hashes not a list", ["BlockRemoved", 5], "block_hashes"],
    ["parent is a string", ["BlockStored", [1], "p", [1], 1, null], "parent_hash"],
    ["negative token", storedArray({ hashes: [1], tokens: [-1], blockSize: 1 }), "token_ids"],
    ["bigram token pairs", ["BlockStored", [1], null, [[1, 2]], 1, null], "token_ids"],
    ["block_size zero", storedArray({ hashes: [], tokens: [], blockSize: 0 }), "block_size"],
    [
      "token count ≠ blocks × size",
      storedArray({ hashes: [1, 2], tokens: range(0, 17), blockSize: 16 }),
      "token_count",
    ],
    ["medium not a string", ["BlockStored", [1], null, [1], 1, null, 5, null], "field_type"],
    ["group_idx negative", removedMap([1], { group_idx: -1 }), "field_type"],
  ])("%s", (_name, ev, error) => {
    const r = decodeBatch(batch([ev as never, clearedArray], 0));
    if (!r.ok) throw new Error(r.error);
    expect(r.batch.errors).toEqual({ [error as string]: 1 });
    expect(r.batch.events).toEqual([{ type: "AllBlocksCleared" }]);
  });

  it("never throws on arbitrary msgpack values or bytes", () => {
    fc.assert(
      fc.property(fc.anything(), (v) => {
        let payload: Buffer;
        try {
          payload = encode(v as never);
        } catch {
          return;
        }
        expect(() => decodeBatch(payload)).not.toThrow();
      }),
      { numRuns: 300 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        expect(() => decodeBatch(bytes)).not.toThrow();
      }),
      { numRuns: 2000 },
    );
  });

  it("in a valid envelope, every event is delivered well-formed, ignored or counted as an error", () => {
    // Valid events with one field replaced by an arbitrary value, next to arbitrary values.
    const good = [
      storedArray({ hashes: [BIG, 2], parent: 1, tokens: range(0, 8), blockSize: 4 }),
      storedMap({ hashes: [3], tokens: range(0, 4), blockSize: 4, extra: { extra_keys: [["s"]] } }),
      removedArray([BIG]),
      removedMap([4]),
    ];
    const mutated = fc.tuple(fc.constantFrom(...good), fc.nat(), fc.anything()).map(([ev, at, v]) => {
      if (Array.isArray(ev)) {
        const copy = [...ev];
        copy[1 + (at % (copy.length - 1))] = v as never;
        return copy;
      }
      const copy = { ...(ev as Record<string, never>) };
      const keys = Object.keys(copy).filter((k) => k !== "type");
      copy[keys[at % keys.length] as string] = v as never;
      return copy;
    });
    fc.assert(
      fc.property(fc.array(fc.oneof(mutated, fc.anything()), { maxLength: 6 }), (evs) => {
        let payload: Buffer;
        try {
          payload = batch(evs as never[], 0);
        } catch {
          return; // not encodable as msgpack (e.g. a function-valued key)
        }
        const r = decodeBatch(payload);
        if (!r.ok) throw new Error(`a valid envelope was refused: ${r.error}`);
        const sum = (o: Partial<Record<string, number>>) =>
          Object.values(o).reduce<number>((a, b) => a + (b ?? 0), 0);
        expect(r.batch.events.length + sum(r.batch.ignored) + sum(r.batch.errors)).toBe(evs.length);
        for (const ev of r.batch.events) {
          if (ev.type === "AllBlocksCleared") continue;
          for (const h of ev.hashes) expect(h >= 0n && h < 1n << 64n).toBe(true);
          if (ev.type === "BlockStored") {
            // Tokens for every block, or none at all (a placeholder store, resolved by hash).
            if (ev.tokenIds.length > 0) expect(ev.tokenIds.length).toBe(ev.hashes.length * ev.blockSize);
            else expect(ev.hashes.length).toBeGreaterThan(0);
            expect(ev.tokenIds.every((t) => Number.isInteger(t) && t >= 0 && t <= 0xffffffff)).toBe(true);
            expect(ev.cacheSalt === null || typeof ev.cacheSalt === "string").toBe(true);
          }
        }
      }),
      { numRuns: 1000 },
    );
  });
});
