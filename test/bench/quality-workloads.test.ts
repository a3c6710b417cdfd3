import { beforeAll, describe, expect, it } from "vitest";
import {
  benchConfig,
  PRESSURE_FACTOR,
  PRESSURE_UNIT_TOKENS,
  pressureSizes,
} from "../../bench/quality/config.ts";
import { pieceRng, wordText } from "../../bench/quality/text.ts";
import { BenchTokenizer } from "../../bench/quality/tokens.ts";
import {
  AGENTIC_DEFAULTS,
  agentic,
  callsPerSession,
  lanesOf,
} from "../../bench/quality/workloads/agentic.ts";
import { generatedSharedPrefix } from "../../bench/quality/workloads/generated-shared-prefix.ts";
import { multiTurn } from "../../bench/quality/workloads/multi-turn.ts";
import { RAG_DEFAULTS, rag, retrieve, zipfCdf } from "../../bench/quality/workloads/rag.ts";
import type { BenchRequest } from "../../bench/quality/workloads/types.ts";
import { lognormalAround, sampleOutputLength } from "../../control-plane/sim/output-lengths.ts";
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

  it("cuts at blank lines only where the tokenizer would: random mixes of letters, digits, newlines", () => {
    const alphabet = ["a", "Zeta", "é", "𝐀", "7", " ", "\n", "\n\n", "\n\n\n", ".", "{", " the"];
    const rng = pieceRng(9, 9);
    for (let n = 0; n < 300; n++) {
      let text = "";
      const length = 1 + Math.floor(rng.next() * 14);
      for (let i = 0; i < length; i++) text += alphabet[Math.floor(rng.next() * alphabet.length)];
      expect(tok.encodeRendered(text), JSON.stringify(text)).toEqual(tok.encodeWhole(text));
    }
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

describe("answer lengths", () => {
  it.each([
    [{ kind: "fixed", tokens: 7 } as const, 7, 7],
    [{ kind: "uniform", min: 3, max: 9 } as const, 3, 9],
    [{ kind: "lognormal", mean: 200, cv: 0.7, max: 800 } as const, 1, 800],
  ])("%j stays within [%d, %d]", (d, lo, hi) => {
    const rng = new Rng(5);
    for (let i = 0; i < 2000; i++) {
      const n = sampleOutputLength(d, rng);
      expect(n).toBeGreaterThanOrEqual(lo);
      expect(n).toBeLessThanOrEqual(hi);
      expect(Number.isInteger(n)).toBe(true);
    }
  });

  it("log-normal has about the asked mean and spread (so request counts are no load proxy)", () => {
    const rng = new Rng(9);
    const xs = Array.from({ length: 20_000 }, () => sampleOutputLength(lognormalAround(200), rng));
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
    const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length);
    expect(mean).toBeGreaterThan(185);
    expect(mean).toBeLessThan(205);
    expect(sd / mean).toBeGreaterThan(0.55); // cv 0.7 before clamping at 4× the mean
  });

  it("the engine stops at the drawn length; the body carries the client's cap", () => {
    const w = generatedSharedPrefix(tok, {
      groups: 1,
      promptsPerGroup: 8,
      systemTokens: 64,
      questionTokens: 8,
      outputTokens: 100,
      output: lognormalAround(100),
      qps: [1],
      seed: 4,
    });
    const reqs = w.run(1).arrivals.map((a) => a.request);
    expect(new Set(reqs.map((r) => r.maxTokens)).size).toBeGreaterThan(1);
    for (const r of reqs) expect(new TextDecoder().decode(r.body)).toContain('"max_tokens":400');
    // Same seed, same lengths (every policy and rate sees the same answers).
    expect(
      w
        .run(2)
        .arrivals.map((a) => a.request.maxTokens)
        .sort(),
    ).toEqual(reqs.map((r) => r.maxTokens).sort());
  });
});

describe("agentic tool use", () => {
  const o = {
    ...AGENTIC_DEFAULTS,
    toolsets: 2,
    toolSchemaTokens: [5000, 6000] as [number, number],
    sessions: 12,
    qps: [10],
    seed: 3,
  };

  it("shares a 5-20k tool-schema block across sessions, starts lanes together, grows each step", () => {
    const w = agentic(tok, o);
    const run = w.run(10);
    const first = run.arrivals.map((a) => a.request);
    // Every first call opens with one of two schema blocks of ≥ 5000 tokens.
    const systems = new Set(first.map((r) => r.messages[0]?.content));
    expect(systems.size).toBe(2);
    for (const r of first) expect(r.tokens.length).toBeGreaterThan(5000);
    // Lanes of a session arrive at the same instant (a burst) and share the schema and task.
    const bySession = new Map<string, number[]>();
    for (const a of run.arrivals) {
      const s = a.request.id.split("-")[1] as string;
      bySession.set(s, [...(bySession.get(s) ?? []), a.atMs]);
    }
    expect([...bySession.values()].some((t) => t.length > 1)).toBe(true);
    for (const t of bySession.values()) expect(new Set(t).size).toBe(1);
    // A step appends the model's answer and a tool result to the previous prompt.
    const a0 = first[0] as BenchRequest;
    const answer = tok.wordIds.slice(0, 20);
    const next = run.followUp?.(a0, answer, 1000);
    if (next === null || next === undefined) throw new Error("no follow-up");
    expect(next.atMs).toBeGreaterThan(1000);
    expect(next.request.tokens.slice(0, a0.tokens.length + 20)).toEqual([...a0.tokens, ...answer]);
    expect(next.request.tokens.length).toBeGreaterThan(a0.tokens.length + 20 + 100);
  });

  it("ends each lane after 5-20 steps", () => {
    const run = agentic(tok, { ...o, sessions: 3 }).run(10);
    const answer = tok.wordIds.slice(0, 4);
    for (const a of run.arrivals) {
      let req: BenchRequest = a.request;
      let steps = 1;
      for (let next = run.followUp?.(req, answer, 0); next; next = run.followUp?.(req, answer, 0)) {
        req = next.request;
        steps++;
      }
      expect(steps).toBeGreaterThanOrEqual(5);
      expect(steps).toBeLessThanOrEqual(20);
    }
  });

  it("lane counts follow their probabilities", () => {
    const rng = new Rng(1);
    const counts = new Map<number, number>();
    for (let i = 0; i < 10_000; i++) {
      const n = lanesOf(rng, AGENTIC_DEFAULTS.lanes);
      counts.set(n, (counts.get(n) ?? 0) + 1);
    }
    expect((counts.get(1) ?? 0) / 10_000).toBeCloseTo(0.6, 1);
    expect((counts.get(4) ?? 0) / 10_000).toBeCloseTo(0.15, 1);
    expect(callsPerSession({ ...o, lanes: [[2, 1]], steps: [5, 15] })).toBe(20);
  });
});

describe("RAG", () => {
  it("tenant prompt, then shared documents most-relevant first, then the question", () => {
    const w = rag(tok, { ...RAG_DEFAULTS, tenants: 3, documents: 20, requests: 40, qps: [5], seed: 2 });
    const reqs = w.run(5).arrivals.map((a) => a.request);
    expect(reqs).toHaveLength(40);
    expect(new Set(reqs.map((r) => r.messages[0]?.content)).size).toBe(3);
    for (const r of reqs) {
      const user = r.messages[1]?.content ?? "";
      expect(user.startsWith("Document ")).toBe(true);
      const docs = user.match(/Document \d+:/g) ?? [];
      expect(docs.length).toBeGreaterThanOrEqual(3);
      expect(docs.length).toBeLessThanOrEqual(5);
      expect(new Set(docs).size).toBe(docs.length);
      expect(user).toContain("\n\nQuestion: ");
    }
  });

  it("popular documents lead: Zipf draws favour low ranks and never repeat within a prompt", () => {
    const cdf = zipfCdf(100, 1.1);
    expect(cdf[99]).toBeCloseTo(1, 12);
    const rng = new Rng(3);
    const firsts = Array.from({ length: 5000 }, () => retrieve(rng, cdf, 4));
    const top = firsts.filter((d) => d[0] === 0).length / firsts.length;
    expect(top).toBeGreaterThan(0.15);
    for (const d of firsts) expect(new Set(d).size).toBe(4);
  });
});

describe("cache-pressure variants", () => {
  it("their working sets are at least 2x one rank's KV capacity, in quick and full mode", () => {
    for (const quick of [true, false]) {
      const c = benchConfig(quick, 1, 50);
      const { kvTokens, gspGroups, mtConversations } = pressureSizes(c);
      expect(kvTokens).toBe(c.cluster.numGpuBlocks * c.cluster.blockSize);
      expect(gspGroups * PRESSURE_UNIT_TOKENS).toBeGreaterThanOrEqual(2 * kvTokens);
      expect(mtConversations * PRESSURE_UNIT_TOKENS).toBeGreaterThanOrEqual(2 * kvTokens);
      expect(PRESSURE_FACTOR).toBeGreaterThanOrEqual(2);
    }
  });

  it("multi-turn pressure opens each conversation with its own document", () => {
    const w = multiTurn(tok, {
      conversations: 2,
      turns: 2,
      systemTokens: 32,
      privateContextTokens: 500,
      questionTokens: [8, 8],
      outputTokens: 4,
      thinkMs: 10,
      qps: [1],
      seed: 5,
      name: "multi-turn-pressure",
    });
    const [a, b] = w.run(1).arrivals.map((x) => x.request);
    expect(w.name).toBe("multi-turn-pressure");
    expect(a?.tokens.length).toBeGreaterThan(500);
    // Only the shared system prompt is common: the documents differ from their first words.
    const common = (x: readonly number[], y: readonly number[]) => {
      let n = 0;
      while (n < x.length && x[n] === y[n]) n++;
      return n;
    };
    expect(common(a?.tokens ?? [], b?.tokens ?? [])).toBeLessThan(80);
  });
});
