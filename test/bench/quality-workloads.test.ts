import { beforeAll, describe, expect, it } from "vitest";
import { pieceRng, wordText } from "../../bench/quality/text.ts";
import { BenchTokenizer } from "../../bench/quality/tokens.ts";
import { generatedSharedPrefix } from "../../bench/quality/workloads/generated-shared-prefix.ts";
import { multiTurn } from "../../bench/quality/workloads/multi-turn.ts";
import { Rng } from "../../control-plane/sim/rng.ts";

let tok: BenchTokenizer;
beforeAll(() => {
  tok = new BenchTokenizer();
});

describe("bench tokenizer", () => {
  it("has thousands of single-token words", () => {
    expect(tok.words.length).toBeGreaterThan(3000);
    expect(tok.encodeWhole(tok.words.slice(0, 50).join(""))).toEqual(tok.wordIds.slice(0, 50));
  });

  it("word text of n tokens tokenizes to about n tokens", () => {
    for (const n of [16, 128, 2048]) {
      const ids = tok.encodeWhole(wordText(new Rng(n), n, tok.words));
      expect(ids.length).toBeGreaterThanOrEqual(n);
      expect(ids.length).toBeLessThanOrEqual(n + 3);
    }
  });

  it("piecewise encoding equals encoding the whole rendered chat", () => {
    const system = wordText(pieceRng(1, 1), 300, tok.words);
    const text = tok.renderChat([
      { role: "system", content: system },
      {
        role: "user",
        content: `${wordText(pieceRng(1, 2), 40, tok.words)}\n\n${wordText(pieceRng(1, 3), 20, tok.words)}`,
      },
      { role: "assistant", content: tok.textOf(tok.wordIds.slice(5, 30)) },
      { role: "user", content: "And then?" },
    ]);
    expect(tok.encodeRendered(text)).toEqual(tok.encodeWhole(text));
    expect(tok.encodeRendered(text)).toEqual(tok.encodeWhole(text)); // memoised path
  });
});

describe("workloads", () => {
  it("generated-shared-prefix: system + question tokens plus the template's few", () => {
    const w = generatedSharedPrefix(tok, {
      groups: 2,
      promptsPerGroup: 3,
      systemTokens: 256,
      questionTokens: 32,
      outputTokens: 8,
      qps: [10],
      seed: 7,
    });
    const run = w.run(10);
    expect(run.arrivals).toHaveLength(6);
    for (const a of run.arrivals) {
      expect(a.request.tokens.length).toBeGreaterThanOrEqual(256 + 32);
      expect(a.request.tokens.length).toBeLessThanOrEqual(256 + 32 + 16);
    }
    const times = run.arrivals.map((a) => a.atMs);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    // Deterministic for the seed.
    expect(w.run(10).arrivals.map((a) => a.atMs)).toEqual(times);
  });

  it("multi-turn: the next turn carries the model's answer and extends the previous prompt", () => {
    const w = multiTurn(tok, {
      conversations: 1,
      turns: 2,
      systemTokens: 64,
      questionTokens: [8, 8],
      outputTokens: 4,
      thinkMs: 1000,
      qps: [1],
      seed: 3,
    });
    const run = w.run(1);
    const first = run.arrivals[0]?.request;
    if (first === undefined) throw new Error("no arrival");
    const answer = tok.wordIds.slice(0, 4);
    const next = run.followUp?.(first, answer, 5000);
    expect(next?.atMs).toBeGreaterThan(5000);
    const tokens = next?.request.tokens ?? [];
    expect(tokens.slice(0, first.tokens.length + 4)).toEqual([...first.tokens, ...answer]);
    expect(run.followUp?.(next?.request ?? first, answer, 9000)).toBeNull();
  });
});
