// The quality bench's whole configuration in one place: cluster, workloads and their rate
// ladders, for the full run and for `--quick` (same shapes, fewer requests, KV capacity
// shrunk with the llm-d workload so eviction still matters). Reported verbatim in the results.
import type { ClusterConfig } from "./harness.ts";
import { dynamoOraclePolicy } from "./policies/dynamo-oracle.ts";
import { gaiePrefixPolicy } from "./policies/gaie-prefix.ts";
import { idealPolicy } from "./policies/ideal.ts";
import { kvroutePolicy } from "./policies/kvroute.ts";
import { randomPolicy } from "./policies/random.ts";
import { roundRobinPolicy } from "./policies/round-robin.ts";
import { sglangCacheAwarePolicy } from "./policies/sglang-cache-aware.ts";
import type { PolicyFactory } from "./policies/types.ts";
import { vllmDpPolicy } from "./policies/vllm-dp.ts";
import type { BenchTokenizer } from "./tokens.ts";
import { generatedSharedPrefix, SGLANG_GSP_DEFAULTS } from "./workloads/generated-shared-prefix.ts";
import { LLMD_DEFAULTS, llmdSharedPrefix } from "./workloads/llmd-shared-prefix.ts";
import { multiTurn } from "./workloads/multi-turn.ts";
import { noSharing } from "./workloads/no-sharing.ts";
import type { Workload } from "./workloads/types.ts";

/** REFERENCE §6: ≈ 470k KV tokens per H100 for an 8B model, 16-token blocks. */
const H100_KV_TOKENS = 470_000;

export interface BenchConfig {
  quick: boolean;
  seed: number;
  cluster: ClusterConfig;
  /** llm-d groups in this mode vs the published 150: KV capacity scales with it. */
  llmdGroups: number;
}

export function benchConfig(quick: boolean, seed: number, kvEventDelayMs: number): BenchConfig {
  const llmdGroups = quick ? 30 : LLMD_DEFAULTS.groups;
  const kvTokens = Math.round((H100_KV_TOKENS * llmdGroups) / LLMD_DEFAULTS.groups);
  return {
    quick,
    seed,
    llmdGroups,
    cluster: {
      workers: 2,
      ranksPerWorker: 4,
      blockSize: 16,
      numGpuBlocks: Math.floor(kvTokens / 16),
      maxNumSeqs: 256,
      maxNumBatchedTokens: 8192,
      statsIntervalMs: 100,
      kvEventDelayMs,
      tickMs: 50,
      maxVirtualMs: 3_600_000,
    },
  };
}

export function workloads(tok: BenchTokenizer, c: BenchConfig): Workload[] {
  const q = c.quick;
  const seed = c.seed;
  return [
    generatedSharedPrefix(tok, {
      ...SGLANG_GSP_DEFAULTS,
      groups: q ? 16 : SGLANG_GSP_DEFAULTS.groups,
      qps: q ? [32, 128] : [16, 32, 64, 128, 192],
      seed,
    }),
    llmdSharedPrefix(tok, {
      ...LLMD_DEFAULTS,
      groups: c.llmdGroups,
      requests: q ? 240 : 2400,
      qps: q ? [6, 14] : [4, 8, 16, 32, 48, 64],
      seed,
    }),
    multiTurn(tok, {
      conversations: q ? 48 : 256,
      turns: q ? 4 : 6,
      systemTokens: 1024,
      questionTokens: [64, 320],
      outputTokens: 200,
      thinkMs: 2000,
      qps: q ? [16, 48] : [8, 16, 32, 48, 64],
      seed,
    }),
    noSharing(tok, {
      requests: q ? 200 : 1000,
      promptTokens: 1024,
      outputTokens: 256,
      qps: q ? [32, 128] : [16, 32, 64, 128, 192],
      seed,
    }),
  ];
}

export function policies(c: BenchConfig): PolicyFactory[] {
  return [
    randomPolicy,
    roundRobinPolicy,
    vllmDpPolicy,
    gaiePrefixPolicy,
    sglangCacheAwarePolicy,
    dynamoOraclePolicy,
    kvroutePolicy({
      workers: c.cluster.workers,
      ranksPerWorker: c.cluster.ranksPerWorker,
      speculative: true,
    }),
    idealPolicy,
  ];
}
