import { describe, expect, it } from "vitest";
import { llmdTotal, normalizedPrefixScores } from "../../bench/quality/policies/llmd-precise.ts";

describe("llm-d precise prefix scorer (precise_prefix_cache.go @ 17abea8)", () => {
  it.each([
    [
      [0, 0, 0],
      [0, 0, 0],
    ], // no pod matched: the score map is empty
    [
      [5, 0, 0],
      [1, 0, 0],
    ], // one pod matched: min = max → 1, the others 0
    [
      [4, 4, 0],
      [1, 1, 0],
    ],
    [
      [8, 2, 0, 5],
      [1, 0, 0, 0.5],
    ], // min-max over matched pods only: the least-matched gets 0 too
  ])("match depths %j → %j", (depths, want) => {
    expect(normalizedPrefixScores(depths)).toEqual(want);
  });

  it("weights of llm-d's guide: 2 · prefix + 1 · KV + 1 · queue", () => {
    expect(llmdTotal(1, 0, 0)).toBe(2);
    expect(llmdTotal(0, 1, 0)).toBe(1);
    expect(llmdTotal(0, 0, 1)).toBe(1);
    // A full prefix match outweighs an idle, empty rival (2 > 1 + 1 only with any load on the rival).
    expect(llmdTotal(1, 0.5, 0.5)).toBeGreaterThan(llmdTotal(0, 1, 1) - 1e-12);
  });
});
