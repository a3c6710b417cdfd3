// The step-time model: one engine step costs a fixed overhead, plus a cost per prompt token
// computed (cache hits are free), plus a cost per sequence that decodes a token.
// Defaults: llm-d's fit for an 8B model on one H100 (REFERENCE §6).

export interface LatencyModel {
  stepOverheadMs: number;
  prefillPerTokenMs: number;
  decodePerSeqMs: number;
}

export const DEFAULT_LATENCY: LatencyModel = {
  stepOverheadMs: 5.75,
  prefillPerTokenMs: 0.01725,
  decodePerSeqMs: 0.006,
};

export function stepDurationMs(model: LatencyModel, prefillTokens: number, decodeSeqs: number): number {
  return model.stepOverheadMs + prefillTokens * model.prefillPerTokenMs + decodeSeqs * model.decodePerSeqMs;
}
