// Per-request answer lengths for the bench workloads: drawn from the workload's distribution
// with a generator named by the request (so every policy and rate sees the same lengths), and
// the client's cap for the body. A workload without a distribution keeps its fixed length.
import {
  describeOutputLengths,
  type OutputLengths,
  outputCap,
  sampleOutputLength,
} from "../../../control-plane/sim/output-lengths.ts";
import { pieceRng } from "../text.ts";

export interface AnswerLength {
  /** Where the simulated model stops. */
  tokens: number;
  /** `max_tokens` in the request body. */
  cap: number;
}

export function answerLength(
  d: OutputLengths | undefined,
  fixed: number,
  seed: number,
  ...piece: number[]
): AnswerLength {
  if (d === undefined) return { tokens: fixed, cap: fixed };
  return { tokens: sampleOutputLength(d, pieceRng(seed, 0x0a75, ...piece)), cap: outputCap(d) };
}

export function describeAnswers(d: OutputLengths | undefined, fixed: number): string {
  return d === undefined ? `${fixed}` : describeOutputLengths(d);
}
