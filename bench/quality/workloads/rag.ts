// Retrieval-augmented generation for several tenants: each request is a tenant's system prompt,
// then the documents its retriever returned (a few chunks of a shared corpus, the most relevant
// first), then the user's question. Document popularity is Zipf-like, so a few documents head
// many prompts; prompts share a prefix as far as tenant and leading documents agree.
import type { OutputLengths } from "../../../control-plane/sim/output-lengths.ts";
import { Rng } from "../../../control-plane/sim/rng.ts";
import { pieceRng, poissonTimes, wordText } from "../text.ts";
import type { BenchTokenizer } from "../tokens.ts";
import { answerLength, describeAnswers } from "./output.ts";
import { chatRequest } from "./request.ts";
import type { BenchRequest, Workload } from "./types.ts";

export interface RagOptions {
  tenants: number;
  tenantPromptTokens: [number, number];
  documents: number;
  documentTokens: [number, number];
  /** Documents per prompt, uniform in [min, max]. */
  retrieved: [number, number];
  /** Zipf exponent of document popularity (rank r drawn ∝ 1 / r^s). */
  zipf: number;
  questionTokens: [number, number];
  requests: number;
  outputTokens: number;
  output?: OutputLengths;
  qps: readonly number[];
  seed: number;
}

export const RAG_DEFAULTS = {
  tenants: 16,
  tenantPromptTokens: [300, 1500] as [number, number],
  documents: 400,
  documentTokens: [300, 1200] as [number, number],
  retrieved: [3, 5] as [number, number],
  zipf: 1.1,
  questionTokens: [30, 200] as [number, number],
  outputTokens: 250,
};

const uniform = (rng: Rng, [lo, hi]: readonly [number, number]) => lo + rng.int(hi - lo + 1);

/** Cumulative Zipf weights over ranks 1..n, for inverse-CDF draws. */
export function zipfCdf(n: number, s: number): number[] {
  const w = Array.from({ length: n }, (_, i) => 1 / (i + 1) ** s);
  const total = w.reduce((a, b) => a + b, 0);
  let acc = 0;
  return w.map((x) => {
    acc += x / total;
    return acc;
  });
}

/** `k` distinct document indices drawn by popularity, in draw order (most relevant first). */
export function retrieve(rng: Rng, cdf: readonly number[], k: number): number[] {
  const out: number[] = [];
  while (out.length < Math.min(k, cdf.length)) {
    const u = rng.next();
    let lo = 0;
    let hi = cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((cdf[mid] as number) < u) lo = mid + 1;
      else hi = mid;
    }
    if (!out.includes(lo)) out.push(lo);
  }
  return out;
}

export function rag(tok: BenchTokenizer, o: RagOptions): Workload {
  const tenantPrompt = Array.from({ length: o.tenants }, (_, t) => {
    const rng = pieceRng(o.seed, 61, t);
    return wordText(rng, uniform(rng, o.tenantPromptTokens), tok.words);
  });
  const docs = Array.from({ length: o.documents }, (_, d) => {
    const rng = pieceRng(o.seed, 62, d);
    return `Document ${d}: ${wordText(rng, uniform(rng, o.documentTokens), tok.words)}`;
  });
  const cdf = zipfCdf(o.documents, o.zipf);
  const requests: BenchRequest[] = Array.from({ length: o.requests }, (_, i) => {
    const rng = pieceRng(o.seed, 63, i);
    const tenant = rng.int(o.tenants);
    const picked = retrieve(rng, cdf, uniform(rng, o.retrieved));
    const question = wordText(rng, uniform(rng, o.questionTokens), tok.words);
    const a = answerLength(o.output, o.outputTokens, o.seed, 64, i);
    const content = `${picked.map((d) => docs[d]).join("\n\n")}\n\nQuestion: ${question}`;
    return chatRequest(
      tok,
      `rag-${tenant}-${i}`,
      [
        { role: "system", content: tenantPrompt[tenant] as string },
        { role: "user", content },
      ],
      a.tokens,
      a.cap,
    );
  });
  return {
    name: "rag",
    describe:
      `RAG: ${o.tenants} tenants' system prompts (${o.tenantPromptTokens[0]}–${o.tenantPromptTokens[1]} tokens), then ` +
      `${o.retrieved[0]}–${o.retrieved[1]} of ${o.documents} shared documents (${o.documentTokens[0]}–${o.documentTokens[1]} ` +
      `tokens, Zipf ${o.zipf} popularity, most relevant first), then a ${o.questionTokens[0]}–${o.questionTokens[1]}-token ` +
      `question; output ${describeAnswers(o.output, o.outputTokens)}; ${o.requests} requests, Poisson arrivals`,
    qps: o.qps,
    run(qps) {
      const times = poissonTimes(new Rng(o.seed ^ Math.round(qps * 1000)), requests.length, qps);
      return { arrivals: requests.map((request, i) => ({ atMs: times[i] as number, request })) };
    },
  };
}
