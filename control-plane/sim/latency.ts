// The step-time model: what one engine step costs on the GPU it stands for.
//   step = overhead                                   (weights read once per step, launch, sampling)
//        + prefill_tokens × per_token                 (projections and MLP of every new prompt token)
//        + attention_pairs × per_pair                 (each new prompt token attends to every token
//                                                      before it: cached context, earlier chunks, and
//                                                      the tokens of its own chunk before it)
//        + decode_seqs × per_seq                      (per-sequence work of a decode token)
//        + decode_context_tokens × kv_read_per_token  (a decode token reads its whole context's KV
//                                                      from HBM: memory-bound, grows with context)
//        + loaded_tokens × cpu_load_per_token         (prefix blocks copied back from the CPU
//                                                      offload tier over PCIe, cpu-tier.ts)
// Defaults: an 8B model (Llama-3.1-8B / Qwen3-8B class, bf16) on one H100 SXM. The first three
// constants are llm-d's fit (REFERENCE §6); the two context terms are derived from H100 figures
// in docs/simulator.md ("Cost model"), which also lists simulated vs published numbers.
// The context terms are optional so a hand-written three-term model keeps its old meaning.

export interface LatencyModel {
  stepOverheadMs: number;
  prefillPerTokenMs: number;
  decodePerSeqMs: number;
  /** ms per token of context whose KV one decoding sequence reads in a step (0 when absent). */
  kvReadPerTokenMs?: number;
  /** ms per (new prompt token, earlier token) attention pair in a prefill chunk (0 when absent). */
  prefillAttentionPerPairMs?: number;
  /** ms per prompt token whose KV is loaded back from the CPU offload tier (0 when absent). */
  cpuLoadPerTokenMs?: number;
}

/** KV bytes per token of an 8B bf16 model (32 layers × 8 KV heads × 128 dims × K,V × 2 B). */
export const KV_BYTES_PER_TOKEN = 131_072;
/** H100 SXM HBM3 bandwidth, bytes/s (NVIDIA datasheet). */
export const H100_HBM_BYTES_PER_S = 3.35e12;
/** Share of the HBM roofline a paged-attention decode reaches (assumed; see docs/simulator.md). */
export const DECODE_BANDWIDTH_EFFICIENCY = 0.77;
/** Attention FLOPs per (query, key) pair: QKᵀ and PV, 2 FLOPs per MAC, 32 layers × 4096 dims. */
export const ATTENTION_FLOPS_PER_PAIR = 4 * 32 * 4096;
/** H100 SXM dense BF16 tensor throughput, FLOP/s (NVIDIA datasheet). */
export const H100_BF16_FLOPS = 989e12;
/** Share of peak FLOPs a FlashAttention prefill kernel reaches (assumed; see docs/simulator.md). */
export const PREFILL_ATTENTION_EFFICIENCY = 0.5;
/** Host → GPU copy bandwidth, bytes/s: PCIe Gen5 x16 (64 GB/s nominal), ~50 GB/s reached by DMA (assumed). */
export const HOST_TO_GPU_BYTES_PER_S = 50e9;

export const DEFAULT_LATENCY: LatencyModel = {
  stepOverheadMs: 5.75,
  prefillPerTokenMs: 0.01725,
  decodePerSeqMs: 0.006,
  kvReadPerTokenMs: (KV_BYTES_PER_TOKEN / (H100_HBM_BYTES_PER_S * DECODE_BANDWIDTH_EFFICIENCY)) * 1000,
  prefillAttentionPerPairMs:
    (ATTENTION_FLOPS_PER_PAIR / (H100_BF16_FLOPS * PREFILL_ATTENTION_EFFICIENCY)) * 1000,
  cpuLoadPerTokenMs: (KV_BYTES_PER_TOKEN / HOST_TO_GPU_BYTES_PER_S) * 1000,
};

/**
 * The same additive form fitted to one engine step of a Llama-3.1-8B-shaped model measured on an
 * NVIDIA H200 (bench/gpu/*.jsonl; `npx tsx bench/gpu/print-fit.ts` prints this fit, the roofline
 * alternative and both errors per row; docs/simulator.md has the table): least squares on
 * relative error over 30 decode, prefill and mixed steps, RMS error 4.8 %. A decoding sequence
 * costs 16.4 µs (not 6), a prefill token 22.4 µs (not 17.25). The CPU-tier load is not measured
 * and stays derived (PCIe Gen5 on both GPUs).
 */
export const H200_MEASURED_LATENCY: LatencyModel = {
  stepOverheadMs: 5.076,
  prefillPerTokenMs: 0.02238,
  decodePerSeqMs: 0.01638,
  kvReadPerTokenMs: 30.7e-6,
  prefillAttentionPerPairMs: 1.37e-6,
  cpuLoadPerTokenMs: (KV_BYTES_PER_TOKEN / HOST_TO_GPU_BYTES_PER_S) * 1000,
};

/** Cost models by the name the simulator's and the quality bench's `--profile` take. */
export const LATENCY_PROFILES = {
  "h100-derived": DEFAULT_LATENCY,
  "h200-measured": H200_MEASURED_LATENCY,
} as const satisfies Record<string, LatencyModel>;

export type LatencyProfileName = keyof typeof LATENCY_PROFILES;

export function latencyProfile(name: string): LatencyModel {
  const model = (LATENCY_PROFILES as Record<string, LatencyModel>)[name];
  if (model === undefined)
    throw new RangeError(`unknown latency profile ${name}: ${Object.keys(LATENCY_PROFILES).join(", ")}`);
  return model;
}

/** What one step computes, as the scheduler planned it. */
export interface StepWork {
  prefillTokens: number;
  decodeSeqs: number;
  /** Σ over decoding sequences of the tokens already in their context (KV read this step). */
  decodeContextTokens: number;
  /** Σ over prefill chunks of attention pairs: new × (context before the chunk) + new × (new − 1) / 2. */
  prefillAttentionPairs: number;
  /** Prompt tokens whose KV is loaded from the CPU offload tier this step (absent: none). */
  loadedTokens?: number;
}

/** Attention pairs of a prefill chunk of `newTokens` after `contextTokens` already computed. */
export function chunkAttentionPairs(newTokens: number, contextTokens: number): number {
  return newTokens * contextTokens + (newTokens * (newTokens - 1)) / 2;
}

export function stepDurationMs(model: LatencyModel, work: StepWork): number {
  return (
    model.stepOverheadMs +
    work.prefillTokens * model.prefillPerTokenMs +
    work.prefillAttentionPairs * (model.prefillAttentionPerPairMs ?? 0) +
    work.decodeSeqs * model.decodePerSeqMs +
    work.decodeContextTokens * (model.kvReadPerTokenMs ?? 0) +
    (work.loadedTokens ?? 0) * (model.cpuLoadPerTokenMs ?? 0)
  );
}

/**
 * Time from admission to the first token of a prompt of `promptTokens` with `cachedTokens` found
 * in the cache, alone on an idle rank: its prefill in chunks of at most `budget` tokens, one step
 * each. Every term of a step is non-negative and other requests only add to a step, so no
 * schedule and no router can give that prompt its first token sooner — the ideal bound's TTFT
 * floor. It decreases as `cachedTokens` grows (fewer new tokens, and the attention pairs
 * (L² − c²)/2 shrink), so the largest cache hit any router could get gives the floor.
 */
export function isolatedPrefillMs(
  model: LatencyModel,
  promptTokens: number,
  cachedTokens: number,
  budget: number,
): number {
  let done = Math.min(Math.max(0, cachedTokens), promptTokens - 1);
  let ms = 0;
  while (done < promptTokens) {
    const n = Math.min(budget, promptTokens - done);
    ms += stepDurationMs(model, {
      prefillTokens: n,
      decodeSeqs: 0,
      decodeContextTokens: 0,
      prefillAttentionPairs: chunkAttentionPairs(n, done),
    });
    done += n;
  }
  return ms;
}
