// Many LoRA adapters over one base model (the multi-tenant fine-tune case GAIE's lora-affinity
// scorer was built for): `adapters` adapters with Zipf(s) popularity — a few adapters carry most
// of the traffic, a long tail the rest — each with its own task instructions (a system prompt
// every request of that adapter repeats), each request a fresh question. An adapter's request
// finds prefix hits only among the same adapter's blocks (the engine keys blocks by adapter), and
// it waits when its rank's max_loras places are taken by other adapters.
import type { OutputLengths } from "../../../control-plane/sim/output-lengths.ts";
import { Rng } from "../../../control-plane/sim/rng.ts";
import { pieceRng, poissonTimes, wordText } from "../text.ts";
import type { BenchTokenizer } from "../tokens.ts";
import { answerLength, describeAnswers } from "./output.ts";
import { chatRequest } from "./request.ts";
import type { BenchRequest, Workload } from "./types.ts";

export interface LoraWorkloadOptions {
  adapters: number;
  /** Zipf exponent of adapter popularity (1: the k-th adapter gets 1/k of the first's traffic). */
  zipf: number;
  requests: number;
  systemTokens: number;
  questionTokens: number;
  outputTokens: number;
  output?: OutputLengths;
  qps: readonly number[];
  seed: number;
}

export const LORA_DEFAULTS = {
  adapters: 32,
  zipf: 1,
  systemTokens: 1024,
  questionTokens: 128,
  outputTokens: 128,
};

/** Adapter names as the engines serve them (--lora-modules) and requests name them. */
export function adapterNames(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `tenant-${String(i).padStart(2, "0")}-lora`);
}

export function loraWorkload(tok: BenchTokenizer, o: LoraWorkloadOptions): Workload {
  const names = adapterNames(o.adapters);
  const systems = names.map((_, a) => wordText(pieceRng(o.seed, 71, a), o.systemTokens, tok.words));
  // Zipf: weight 1/(k+1)^s, drawn by inverse CDF.
  const weights = names.map((_, k) => 1 / (k + 1) ** o.zipf);
  const total = weights.reduce((a, b) => a + b, 0);
  const cdf: number[] = [];
  let acc = 0;
  for (const w of weights) {
    acc += w / total;
    cdf.push(acc);
  }
  const pick = new Rng(o.seed ^ 0x10ca);
  const requests: BenchRequest[] = Array.from({ length: o.requests }, (_, i) => {
    const u = pick.next();
    const a = Math.min(
      names.length - 1,
      cdf.findIndex((c) => u < c),
    );
    const question = wordText(pieceRng(o.seed, 72, i), o.questionTokens, tok.words);
    const answer = answerLength(o.output, o.outputTokens, o.seed, 73, i);
    return chatRequest(
      tok,
      `lora-${i}`,
      [
        { role: "system", content: systems[a] as string },
        { role: "user", content: question },
      ],
      answer.tokens,
      answer.cap,
      names[a],
    );
  });
  return {
    name: "lora-zipf",
    describe:
      `LoRA: ${o.adapters} adapters over one base, Zipf(${o.zipf}) popularity, ${o.requests} requests, ` +
      `per-adapter ${o.systemTokens}-token system prompt + ${o.questionTokens}-token question, output ` +
      `${describeAnswers(o.output, o.outputTokens)}; Poisson arrivals`,
    qps: o.qps,
    run(qps) {
      const times = poissonTimes(new Rng(o.seed ^ Math.round(qps * 1000)), requests.length, qps);
      return { arrivals: requests.map((request, i) => ({ atMs: times[i] as number, request })) };
    },
  };
}
