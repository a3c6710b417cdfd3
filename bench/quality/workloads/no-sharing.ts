// The control: every prompt is unique, so no router can win on cache; only load balance
// matters. A cache-aware router must not lose here.
import { Rng } from "../../../control-plane/sim/rng.ts";
import { pieceRng, poissonTimes, wordText } from "../text.ts";
import type { BenchTokenizer } from "../tokens.ts";
import { chatRequest } from "./request.ts";
import type { BenchRequest, Workload } from "./types.ts";

export interface NoSharingOptions {
  requests: number;
  promptTokens: number;
  outputTokens: number;
  qps: readonly number[];
  seed: number;
}

export function noSharing(tok: BenchTokenizer, o: NoSharingOptions): Workload {
  const requests: BenchRequest[] = Array.from({ length: o.requests }, (_, i) => {
    const content = wordText(pieceRng(o.seed, 31, i), o.promptTokens, tok.words);
    return chatRequest(tok, `unique-${i}`, [{ role: "user", content }], o.outputTokens);
  });
  return {
    name: "no-sharing",
    describe: `no sharing (control): ${o.requests} unique ${o.promptTokens}-token prompts, output ${o.outputTokens}; Poisson arrivals`,
    qps: o.qps,
    run(qps) {
      const times = poissonTimes(new Rng(o.seed ^ Math.round(qps * 1000)), requests.length, qps);
      return { arrivals: requests.map((request, i) => ({ atMs: times[i] as number, request })) };
    },
  };
}
