// The llm-d "KV-cache wins you can see" shape (REFERENCE §6): 150 groups × 5 users, a 6k-token
// system prompt per group, a 1.2k-token question per user, 1k output tokens. Like
// inference-perf's shared-prefix generator, the groups × users prompts form a fixed set and
// every request picks one of them at random, so prompts recur and whole-prompt hits happen.
// Scaled to the simulated cluster: the same 8 serving slots as llm-d's 8 pods; `--quick` keeps
// the shape with fewer groups and shrinks KV capacity in the same ratio (config.ts), so the
// system prompts still do not all fit on one rank.
import type { OutputLengths } from "../../../control-plane/sim/output-lengths.ts";
import { Rng } from "../../../control-plane/sim/rng.ts";
import { pieceRng, poissonTimes, wordText } from "../text.ts";
import type { BenchTokenizer } from "../tokens.ts";
import { answerLength, describeAnswers } from "./output.ts";
import { chatRequest, resend } from "./request.ts";
import type { BenchRequest, Workload } from "./types.ts";

export interface LlmdSharedPrefixOptions {
  groups: number;
  usersPerGroup: number;
  systemTokens: number;
  questionTokens: number;
  outputTokens: number;
  /** Answer lengths (default: every answer exactly `outputTokens`). */
  output?: OutputLengths;
  requests: number;
  qps: readonly number[];
  seed: number;
}

export const LLMD_DEFAULTS = {
  groups: 150,
  usersPerGroup: 5,
  systemTokens: 6000,
  questionTokens: 1200,
  outputTokens: 1000,
};

export function llmdSharedPrefix(tok: BenchTokenizer, o: LlmdSharedPrefixOptions): Workload {
  const prompts: BenchRequest[] = [];
  for (let g = 0; g < o.groups; g++) {
    const system = wordText(pieceRng(o.seed, 11, g), o.systemTokens, tok.words);
    for (let u = 0; u < o.usersPerGroup; u++) {
      const question = wordText(pieceRng(o.seed, 12, g, u), o.questionTokens, tok.words);
      const messages = [
        { role: "system", content: system },
        { role: "user", content: question },
      ];
      prompts.push(chatRequest(tok, `llmd-${g}-${u}`, messages, o.outputTokens));
    }
  }
  const pick = new Rng(o.seed ^ 0x11d);
  const sequence = Array.from({ length: o.requests }, (_, i) => {
    const p = prompts[pick.int(prompts.length)] as BenchRequest;
    const answer = answerLength(o.output, o.outputTokens, o.seed, 13, i);
    return resend(p, `${p.id}#${i}`, answer.tokens, answer.cap);
  });
  return {
    name: "llm-d-shared-prefix",
    describe:
      `llm-d shared prefix: ${o.groups} groups × ${o.usersPerGroup} users, system ${o.systemTokens} + question ` +
      `${o.questionTokens} tokens, output ${describeAnswers(o.output, o.outputTokens)}; ${o.requests} requests drawn from the ` +
      `${o.groups * o.usersPerGroup} prompts; Poisson arrivals`,
    qps: o.qps,
    run(qps) {
      const times = poissonTimes(new Rng(o.seed ^ Math.round(qps * 1000)), sequence.length, qps);
      return { arrivals: sequence.map((request, i) => ({ atMs: times[i] as number, request })) };
    },
  };
}
