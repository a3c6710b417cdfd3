// The control: every prompt is unique, so no router can win on cache; only load balance
// matters. A cache-aware router must not lose here.
import type { OutputLengths } from "../../../control-plane/sim/output-lengths.ts";
import { Rng } from "../../../control-plane/sim/rng.ts";
import { pieceRng, poissonTimes, wordText } from "../text.ts";
import type { BenchTokenizer } from "../tokens.ts";
import { answerLength, describeAnswers } from "./output.ts";
import { chatRequest } from "./request.ts";
import type { BenchRequest, Workload } from "./types.ts";

export interface NoSharingOptions {
  requests: number;
  promptTokens: number;
  outputTokens: number;
  /** Answer lengths (default: every answer exactly `outputTokens`). */
  output?: OutputLengths;
  qps: readonly number[];
  seed: number;
}

export function noSharing(tok: BenchTokenizer, o: NoSharingOptions): Workload {
  const requests: BenchRequest[] = Array.from({ length: o.requests }, (_, i) => {
    const content = wordText(pieceRng(o.seed, 31, i), o.promptTokens, tok.words);
    const answer = answerLength(o.output, o.outputTokens, o.seed, 32, i);
    return chatRequest(tok, `unique-${i}`, [{ role: "user", content }], answer.tokens, answer.cap);
  });
  return {
    name: "no-sharing",
    describe: `no sharing (control): ${o.requests} unique ${o.promptTokens}-token prompts, output ${describeAnswers(o.output, o.outputTokens)}; Poisson arrivals`,
    qps: o.qps,
    run(qps) {
      const times = poissonTimes(new Rng(o.seed ^ Math.round(qps * 1000)), requests.length, qps);
      return { arrivals: requests.map((request, i) => ({ atMs: times[i] as number, request })) };
    },
  };
}
