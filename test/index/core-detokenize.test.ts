// The index detokenizes whole KV events in the core (filter/core/token-table.ts) when a slot is
// registered with its token-bytes table, as production does; otherwise it calls the JavaScript
// detokenizer block by block. Both must index exactly the same chunks: for a byte-level (Qwen3,
// Llama-3.1) and a metaspace vocabulary with the dummy-prefix rule across blocks (Llama-2),
// random chained events — added/special tokens (segment boundaries), ids outside the vocabulary,
// several block sizes, duplicates — give the same bucket images and the same counters.
import { describe, expect, it } from "vitest";
import { coreChunkHasher } from "../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import { detokenizeInto } from "../../control-plane/src/tokens/detokenize.ts";
import {
  buildTokenBytesTable,
  type TokenBytesTable,
} from "../../control-plane/src/tokens/token-bytes-table.ts";
import type { BlockStored } from "../../control-plane/src/vocabulary/kv-events.ts";
import { loadModel, type ModelName } from "../tokens/models.ts";
import { gpuStored } from "./block-stored.ts";

const meta = { seq: 0, ts: 0, receivedAt: 0, replayed: false };

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

function jsDetokenize(table: TokenBytesTable) {
  const scratch = new Uint8Array(1 << 16);
  return (ids: ArrayLike<number>, previous: number) => {
    const n = detokenizeInto(table, ids, scratch, 0, previous);
    return typeof n === "number" ? scratch.subarray(0, n) : null;
  };
}

function stored(hashes: bigint[], parent: bigint | null, size: number, tokenIds: number[]): BlockStored {
  return gpuStored(hashes, parent, size, tokenIds);
}

function indexBoth(table: TokenBytesTable, events: BlockStored[]): [PrefixIndex, PrefixIndex] {
  const make = (core: boolean) => {
    // A fixed clock: the LRU stamp orders rows in an image, and the two runs must not differ by it.
    const index = new PrefixIndex({ buckets: 512, ways: 64, maxSlots: 8, now: () => 1000 });
    index.addSlot({
      slotKey: "s",
      slotId: 1,
      model: "m",
      hasher: coreChunkHasher(64),
      detokenize: jsDetokenize(table),
      tokenTable: core ? table : null,
    });
    for (const e of events) index.event("s", structuredClone(e), meta);
    return index;
  };
  return [make(true), make(false)];
}

function images(index: PrefixIndex): string[] {
  return [...index.allImages()].map(([k, v]) => `${k}:${Buffer.from(v).toString("hex")}`);
}

describe("detokenizing in the core indexes what the JavaScript detokenizer indexes", () => {
  for (const name of ["qwen3", "llama3_1", "llama2"] as ModelName[]) {
    it(`${name}: same images and counters for random chained events`, () => {
      const built = buildTokenBytesTable(loadModel(name).tokenizer);
      if (!built.ok) throw new Error(built.reason);
      const table = built.table;
      const rnd = prng(name.length * 7919);
      // Mostly ordinary ids, some of the first few hundred (special/added tokens, byte fallbacks),
      // now and then one past the vocabulary.
      const token = () => {
        const r = rnd();
        if (r < 0.002) return table.size + 5;
        if (r < 0.1) return Math.floor(rnd() * 300);
        return Math.floor(rnd() * table.size);
      };
      const events: BlockStored[] = [];
      const hashes: bigint[] = [];
      let next = 1n;
      for (let e = 0; e < 600; e++) {
        const size = [1, 4, 16][e % 3] as number;
        const n = 1 + Math.floor(rnd() * 4);
        const parent =
          hashes.length > 0 && rnd() < 0.8
            ? (hashes[hashes.length - 1 - Math.floor(rnd() * 5)] ?? null)
            : null;
        const blockHashes = Array.from({ length: n }, () =>
          hashes.length > 0 && rnd() < 0.05 ? (hashes[0] as bigint) : next++,
        );
        events.push(stored(blockHashes, parent, size, Array.from({ length: n * size }, token)));
        hashes.push(...blockHashes);
      }
      const [core, js] = indexBoth(table, events);
      expect(core.slot("s")?.stats).toEqual(js.slot("s")?.stats);
      const stats = core.slot("s")?.stats;
      expect(stats?.storedBlocks).toBeGreaterThan(500);
      expect(stats?.undetokenizableBlocks).toBeGreaterThan(0);
      expect(core.chunks.size).toBeGreaterThan(100);
      expect(images(core)).toEqual(images(js));
    });
  }
});
