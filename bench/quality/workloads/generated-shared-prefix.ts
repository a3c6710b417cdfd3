// SGLang's `generated-shared-prefix` benchmark dataset (REFERENCE §6): `groups` system prompts,
// `promptsPerGroup` questions each, prompt = system + "\n\n" + question, every prompt sent
// once in shuffled order. Defaults 64 × 16, 2048 / 128 tokens, 256 output tokens. Sent here as
// a chat (one user message) so every router sees the same request body.
import type { OutputLengths } from "../../../control-plane/sim/output-lengths.ts";
import { Rng } from "../../../control-plane/sim/rng.ts";
import { pieceRng, poissonTimes, wordText } from "../text.ts";
import type { BenchTokenizer } from "../tokens.ts";
import { answerLength, describeAnswers } from "./output.ts";
import { chatRequest } from "./request.ts";
import type { BenchRequest, Workload } from "./types.ts";

export interface GeneratedSharedPrefixOptions {
  groups: number;
  promptsPerGroup: number;
  systemTokens: number;
  questionTokens: number;
  outputTokens: number;
  /** Answer lengths (default: every answer exactly `outputTokens`). */
  output?: OutputLengths;
  qps: readonly number[];
  seed: number;
  /** Report name (the cache-pressure variant is named apart). */
  name?: string;
  /** Appended to the description (e.g. the working set against one rank's KV). */
  note?: string;
}

export const SGLANG_GSP_DEFAULTS = {
  groups: 64,
  promptsPerGroup: 16,
  systemTokens: 2048,
  questionTokens: 128,
  outputTokens: 256,
};

export function generatedSharedPrefix(tok: BenchTokenizer, o: GeneratedSharedPrefixOptions): Workload {
  const requests: BenchRequest[] = [];
  for (let g = 0; g < o.groups; g++) {
    const system = wordText(pieceRng(o.seed, 1, g), o.systemTokens, tok.words);
    for (let p = 0; p < o.promptsPerGroup; p++) {
      const question = wordText(pieceRng(o.seed, 2, g, p), o.questionTokens, tok.words);
      const content = `${system}\n\n${question}`;
      const answer = answerLength(o.output, o.outputTokens, o.seed, 3, g, p);
      requests.push(
        chatRequest(tok, `gsp-${g}-${p}`, [{ role: "user", content }], answer.tokens, answer.cap),
      );
    }
  }
  // Fisher–Yates with the workload's seed: the same order at every rate and for every policy.
  const order = new Rng(o.seed ^ 0x5eed);
  for (let i = requests.length - 1; i > 0; i--) {
    const j = order.int(i + 1);
    [requests[i], requests[j]] = [requests[j] as BenchRequest, requests[i] as BenchRequest];
  }
  return {
    name: o.name ?? "generated-shared-prefix",
    describe:
      `SGLang generated-shared-prefix: ${o.groups} groups × ${o.promptsPerGroup} prompts, system ${o.systemTokens} + ` +
      `question ${o.questionTokens} tokens, output ${describeAnswers(o.output, o.outputTokens)}; every prompt once, ` +
      `shuffled; Poisson arrivals${o.note === undefined ? "" : `; ${o.note}`}`,
    qps: o.qps,
    run(qps) {
      const times = poissonTimes(new Rng(o.seed ^ Math.round(qps * 1000)), requests.length, qps);
      return { arrivals: requests.map((request, i) => ({ atMs: times[i] as number, request })) };
    },
  };
}
