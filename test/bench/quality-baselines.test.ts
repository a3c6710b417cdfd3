import { describe, expect, it } from "vitest";
import {
  GAIE_BLOCK_CHARS,
  GAIE_MAX_BLOCKS,
  gaieBlockHashes,
  kvCacheScores,
  pickMax,
  prefixScore,
  queueScores,
} from "../../bench/quality/policies/gaie-prefix.ts";
import { LruSet } from "../../bench/quality/policies/lru-set.ts";
import { isImbalanced, sglangChoose } from "../../bench/quality/policies/sglang-cache-aware.ts";
import { TEXT_CHUNK, TextPrefixSet, textPrefixHashes } from "../../bench/quality/policies/text-prefix-set.ts";
import { Rng } from "../../control-plane/sim/rng.ts";

describe("GAIE approximate prefix scorer", () => {
  it("cuts 64-byte blocks, chained, the trailing partial block included, at most 256", () => {
    const text = "x".repeat(GAIE_BLOCK_CHARS * 3 + 10);
    const hashes = gaieBlockHashes(text);
    expect(hashes).toHaveLength(4); // three full blocks and the 10-byte tail
    // Same content, different position → different hash (the chain carries the prefix).
    expect(new Set(hashes).size).toBe(4);
    expect(gaieBlockHashes("x".repeat(GAIE_BLOCK_CHARS * 3))).toHaveLength(3); // no empty tail
    expect(gaieBlockHashes("x".repeat(10))).toHaveLength(1); // shorter than a block: one partial block
    expect(gaieBlockHashes("")).toHaveLength(0);
    expect(gaieBlockHashes("y".repeat(GAIE_BLOCK_CHARS * 400 + 5))).toHaveLength(GAIE_MAX_BLOCKS);
    // A longer text extends the chain of its full blocks; its tail block differs from the shorter one's.
    const longer = gaieBlockHashes(`${text}${"z".repeat(200)}`);
    expect(longer.slice(0, 3)).toEqual(hashes.slice(0, 3));
    expect(longer[3]).not.toBe(hashes[3]);
    // Tails differing in one byte differ; the model seeds the chain.
    expect(gaieBlockHashes(`${text.slice(0, -1)}y`)[3]).not.toBe(hashes[3]);
    expect(gaieBlockHashes(text, "other-model")[0]).not.toBe(hashes[0]);
  });

  it("prefix score = consecutive matched blocks / blocks", () => {
    const lru = new LruSet<bigint>(10);
    lru.touch(1n);
    lru.touch(2n);
    lru.touch(4n);
    expect(prefixScore([1n, 2n, 3n, 4n], lru)).toBe(0.5);
    expect(prefixScore([3n, 1n], lru)).toBe(0);
    expect(prefixScore([], lru)).toBe(0);
  });

  it.each([
    [
      [0, 5, 10],
      [1, 0.5, 0],
    ],
    [
      [3, 3],
      [1, 1],
    ],
  ])("queue scores of %j are %j", (waiting, want) => {
    expect(queueScores(waiting)).toEqual(want);
  });

  it("KV score is 1 - utilisation; max total wins", () => {
    expect(kvCacheScores([0, 0.25, 1])).toEqual([1, 0.75, 0]);
    expect(pickMax([1, 7, 3], new Rng(1))).toBe(1);
    const picks = new Set(Array.from({ length: 50 }, (_, i) => pickMax([2, 2, 1], new Rng(i))));
    expect(picks).toEqual(new Set([0, 1]));
  });
});

describe("LruSet", () => {
  it("evicts the least recently used entry", () => {
    const lru = new LruSet<number>(2);
    lru.touch(1);
    lru.touch(2);
    lru.touch(1);
    lru.touch(3);
    expect([lru.has(1), lru.has(2), lru.has(3)]).toEqual([true, false, true]);
  });
});

describe("SGLang cache-aware rule (0.3 / 64 / 1.5)", () => {
  it.each([
    [[100, 30], true],
    [[90, 30], false], // difference 60 ≤ 64
    [[200, 140], false], // 200 ≤ 1.5 · 140
    [[0, 65], true],
  ])("loads %j imbalanced = %s", (loads, want) => {
    expect(isImbalanced(loads)).toBe(want);
  });

  it.each([
    // loads, matched chars, text length, tree chars → worker
    [[5, 1, 3], [0, 0, 700], 1000, [10, 20, 30], 2], // 70% match → the matching worker even if busier
    [[5, 1, 3], [0, 0, 300], 1000, [10, 20, 30], 0], // 30% is not > 0.3 → smallest tree, not least loaded
    [[5, 1, 3], [0, 0, 300], 1000, [30, 20, 10], 2],
    [[100, 30], [900, 0], 1000, [0, 500], 1], // imbalanced → least loaded whatever the cache
  ])("loads %j, matched %j of %d, trees %j → %d", (loads, matched, chars, trees, want) => {
    expect(sglangChoose(loads, matched, chars, trees, new Rng(3))).toBe(want);
  });

  it("text prefix set matches whole chunks of the shared prefix", () => {
    const set = new TextPrefixSet(1000);
    const a = "abcdefghijklmnopqrstuvwxyz".repeat(4);
    set.insert(textPrefixHashes(a));
    const b = `${a.slice(0, 50)}DIFFERENT${a.slice(59)}`;
    expect(set.matchChars(textPrefixHashes(b))).toBe(Math.floor(50 / TEXT_CHUNK) * TEXT_CHUNK);
    expect(set.matchChars(textPrefixHashes(a))).toBe(Math.floor(a.length / TEXT_CHUNK) * TEXT_CHUNK);
  });
});
