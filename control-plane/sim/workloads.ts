// Synthetic token workloads for the virtual-time simulator (REFERENCE §6 definitions), seeded
// so a benchmark run is repeatable: SGLang's generated-shared-prefix (groups of prompts that
// share a long system prompt) with Poisson arrivals, answers fixed or drawn from a distribution.
import { type OutputLengths, sampleOutputLength } from "./output-lengths.ts";
import { Rng } from "./rng.ts";
import type { SimRequest } from "./virtual-cluster.ts";

export interface SharedPrefixOptions {
  requests: number;
  groups?: number;
  systemTokens?: number;
  questionTokens?: number;
  outputTokens?: number;
  /** Answer lengths drawn per request (default: every answer exactly `outputTokens`). */
  outputLengths?: OutputLengths;
  /** Mean arrival rate (requests per second of virtual time). */
  ratePerSecond: number;
  seed: number;
  /** Token ids are drawn from [vocabStart, vocabStart + vocabSize). */
  vocabStart?: number;
  vocabSize?: number;
}

export interface TimedRequest {
  atMs: number;
  group: number;
  request: SimRequest;
}

export function sharedPrefixWorkload(o: SharedPrefixOptions): TimedRequest[] {
  const rng = new Rng(o.seed);
  const groups = o.groups ?? 64;
  const sys = o.systemTokens ?? 2048;
  const q = o.questionTokens ?? 128;
  const vs = o.vocabStart ?? 1000;
  const vn = o.vocabSize ?? 50_000;
  const token = () => vs + rng.int(vn);
  const prefixes = Array.from({ length: groups }, () => Array.from({ length: sys }, token));
  const out: TimedRequest[] = [];
  let t = 0;
  for (let i = 0; i < o.requests; i++) {
    const group = rng.int(groups);
    const tokens = (prefixes[group] as number[]).concat(Array.from({ length: q }, token));
    t += (-Math.log(1 - rng.next()) * 1000) / o.ratePerSecond;
    const maxTokens =
      o.outputLengths === undefined ? (o.outputTokens ?? 256) : sampleOutputLength(o.outputLengths, rng);
    out.push({ atMs: t, group, request: { id: `r${i}`, tokens, maxTokens } });
  }
  return out;
}
