// ≥ 100k random and mutated request bodies through scan + render + hash in the Wasm core: no
// trap, and agreement with JSON.parse on what is a valid body. Longer runs: npm run fuzz.
import { describe, expect, it } from "vitest";
import { BodyFuzzer, checkBody } from "./fuzz-bodies.ts";
import { segmentTemplate } from "./helpers.ts";

describe("core fuzz", () => {
  it("survives 100k mutated bodies with zero traps", () => {
    const fuzzer = new BodyFuzzer(0x5eed);
    const templates = [segmentTemplate("qwen3"), segmentTemplate("llama3_1")];
    const problems: string[] = [];
    const N = 100_000;
    for (let i = 0; i < N && problems.length < 5; i++) {
      const body = fuzzer.next();
      const p = checkBody(body, templates[i & 1] as (typeof templates)[0]);
      if (p !== null) problems.push(`#${i} ${p}: ${Buffer.from(body.subarray(0, 200)).toString("latin1")}`);
    }
    expect(problems).toEqual([]);
  }, 120_000);
});
