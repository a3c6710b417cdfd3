import { describe, expect, it } from "vitest";
import { ActiveBlocks, dynamoCost } from "../../bench/quality/policies/dynamo-oracle.ts";
import {
  GAIE_BLOCK_CHARS,
  GAIE_MAX_BLOCKS,
  gaieBlockHashes,
  kvCacheScores,
  pickMax,
  prefixScore,
  queueScores,
} from "../../bench/quality/policies/gaie-prefix.ts";
import { globallyCachedTokens } from "../../bench/quality/policies/ideal.ts";
import { LruSet } from "../../bench/quality/policies/lru-set.ts";
import { isImbalanced, sglangChoose } from "../../bench/quality/policies/sglang-cache-aware.ts";
import { TEXT_CHUNK, TextPrefixSet, textPrefixHashes } from "../../bench/quality/policies/text-prefix-set.ts";
import { tokenBlockKeys } from "../../bench/quality/policies/token-blocks.ts";
import { Rng } from "../../control-plane/sim/rng.ts";

describe("GAIE approximate prefix scorer", () => {
  it("cuts full 64-char blocks, chained, at most 256", () => {
    const text = "x".repeat(GAIE_BLOCK_CHARS * 3 + 10);
    const hashes = gaieBlockHashes(text);
    expect(hashes).toHaveLength(3);
    // Same content, different position → different hash (the chain carries the prefix).
    expect(new Set(hashes).size).toBe(3);
    expect(gaieBlockHashes("y".repeat(GAIE_BLOCK_CHARS * 400))).toHaveLength(GAIE_MAX_BLOCKS);
    // A longer text extends the chain of its prefix.
    expect(gaieBlockHashes(`${text}${"z".repeat(200)}`).slice(0, 3)).toEqual(hashes);
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
    // loads, matched chars, text length → worker
    [[5, 1, 3], [0, 0, 700], 1000, 2], // 70% match → the matching worker even if busier
    [[5, 1, 3], [0, 0, 300], 1000, 1], // 30% is not > 0.3 → least loaded
    [[100, 30], [900, 0], 1000, 1], // imbalanced → least loaded whatever the cache
  ])("loads %j, matched %j of %d → %d", (loads, matched, chars, want) => {
    expect(sglangChoose(loads, matched, chars, new Rng(3))).toBe(want);
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

describe("Dynamo cost (REFERENCE §3)", () => {
  it("is uncached prefill blocks plus active decode blocks", () => {
    // (32 active prefill + 160 request − 64 cached) / 16 = 8, plus 5 decode blocks.
    expect(dynamoCost({ activePrefillTokens: 32, activeDecodeBlocks: 5 }, 160, 64, 16)).toBe(13);
  });

  it("counts shared prompt blocks of active requests once", () => {
    const active = new ActiveBlocks();
    active.add([1, 2, 3]);
    active.add([1, 2, 4]);
    expect(active.distinct).toBe(4);
    active.remove([1, 2, 3]);
    expect(active.distinct).toBe(3);
  });
});

describe("ideal bound", () => {
  it("skips the prefix an earlier request computed, keeping one token", () => {
    const a = Array.from({ length: 64 }, (_, i) => i);
    const seen = new Set(tokenBlockKeys(a, 16));
    expect(globallyCachedTokens([...a.slice(0, 40), 999, 998], seen, 16)).toBe(32);
    expect(globallyCachedTokens(a, seen, 16)).toBe(63);
    expect(globallyCachedTokens([7, ...a], seen, 16)).toBe(0);
  });
});
