// The quality bench's whole configuration in one place: cluster, seeds, workloads and their rate
// ladders, for the full run and for `--quick` (same shapes, fewer requests, KV capacity
// shrunk with the llm-d workload so eviction still matters). Reported verbatim in the results.
// Every point runs once per seed (workload content, arrivals and tie breaks all follow the seed).

import { type LatencyProfileName, latencyProfile } from "../../control-plane/sim/latency.ts";
import { lognormalAround } from "../../control-plane/sim/output-lengths.ts";
import type { ClusterConfig } from "./harness.ts";
import { dynamoDefaultPolicy } from "./policies/dynamo-default.ts";
import { gaiePrefixPolicy } from "./policies/gaie-prefix.ts";
import { idealPolicy } from "./policies/ideal.ts";
import { type KvrouteOptions, kvroutePolicy } from "./policies/kvroute.ts";
import { llmdPrecisePolicy, llmdPreciseSpeculativePolicy } from "./policies/llmd-precise.ts";
import { randomPolicy } from "./policies/random.ts";
import { roundRobinPolicy } from "./policies/round-robin.ts";
import { sglangCacheAwarePolicy } from "./policies/sglang-cache-aware.ts";
import type { PolicyFactory } from "./policies/types.ts";
import { vllmCurrentPolicy, vllmLegacyPolicy } from "./policies/vllm-dp.ts";
import type { BenchTokenizer } from "./tokens.ts";
import { AGENTIC_DEFAULTS, agentic } from "./workloads/agentic.ts";
import { generatedSharedPrefix, SGLANG_GSP_DEFAULTS } from "./workloads/generated-shared-prefix.ts";
import { LLMD_DEFAULTS, llmdSharedPrefix } from "./workloads/llmd-shared-prefix.ts";
import { multiTurn } from "./workloads/multi-turn.ts";
import { noSharing } from "./workloads/no-sharing.ts";
import { RAG_DEFAULTS, rag } from "./workloads/rag.ts";
import type { Workload } from "./workloads/types.ts";

/** REFERENCE §6: ≈ 470k KV tokens per H100 for an 8B model, 16-token blocks. */
const H100_KV_TOKENS = 470_000;

/** Seeds for development: explore.ts and every tuning of the filter use these (1–6 were the
 * seeds of earlier reports and of the tuning that followed them, so they are spent). */
export const DEVELOPMENT_SEEDS: readonly number[] = [1, 2, 3, 4, 5, 6];
/** Held-out seeds: the report uses only these, and nothing is tuned on them. Eight, so the exact
 * Wilcoxon signed-rank test (paired.ts) can reach p < 0.05 two-sided (its smallest p with n
 * pairs is 2 / 2ⁿ; the sign test with 8 pairs needs 8 of 8). */
export const REPORT_SEEDS: readonly number[] = [101, 102, 103, 104, 105, 106, 107, 108];

/** The cost models both the full and the quick run measure under (latency.ts LATENCY_PROFILES). */
export const BENCH_PROFILES: readonly LatencyProfileName[] = ["h200-measured", "h100-derived"];

/** The cache-pressure variants' working set, in multiples of one rank's KV capacity. */
export const PRESSURE_FACTOR = 2.5;

export interface BenchConfig {
  quick: boolean;
  seed: number;
  /** The engines' cost model, by name. */
  profile: LatencyProfileName;
  cluster: ClusterConfig;
  /** llm-d groups in this mode vs the published 150: KV capacity scales with it. */
  llmdGroups: number;
}

export function benchConfig(
  quick: boolean,
  seed: number,
  kvEventDelayMs: number,
  profile: LatencyProfileName = "h200-measured",
): BenchConfig {
  const llmdGroups = quick ? 30 : LLMD_DEFAULTS.groups;
  const kvTokens = Math.round((H100_KV_TOKENS * llmdGroups) / LLMD_DEFAULTS.groups);
  return {
    quick,
    seed,
    profile,
    llmdGroups,
    cluster: {
      latency: latencyProfile(profile),
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

/** Private/system tokens per unit of the pressure variants (a GSP group, a conversation's document). */
export const PRESSURE_UNIT_TOKENS = 4096;

/** Sizes of the cache-pressure variants: their unshared prefixes alone are PRESSURE_FACTOR × one
 * rank's KV (each conversation's history adds to that). */
export function pressureSizes(c: BenchConfig): {
  kvTokens: number;
  gspGroups: number;
  mtConversations: number;
} {
  const kvTokens = c.cluster.numGpuBlocks * c.cluster.blockSize;
  const units = Math.ceil((PRESSURE_FACTOR * kvTokens) / PRESSURE_UNIT_TOKENS);
  return { kvTokens, gspGroups: units, mtConversations: units };
}

export function workloads(tok: BenchTokenizer, c: BenchConfig): Workload[] {
  const q = c.quick;
  const seed = c.seed;
  const {
    kvTokens,
    gspGroups: gspPressureGroups,
    mtConversations: mtPressureConversations,
  } = pressureSizes(c);
  const workingSet = (tokens: number) =>
    `working set ≥ ${(tokens / 1000).toFixed(0)}k tokens = ${(tokens / kvTokens).toFixed(1)}× one rank's KV`;
  const mtTurns = q ? 4 : 6;
  return [
    generatedSharedPrefix(tok, {
      ...SGLANG_GSP_DEFAULTS,
      groups: q ? 32 : SGLANG_GSP_DEFAULTS.groups,
      output: lognormalAround(SGLANG_GSP_DEFAULTS.outputTokens),
      qps: q ? [64, 192] : [32, 64, 128, 192, 256],
      seed,
    }),
    generatedSharedPrefix(tok, {
      groups: gspPressureGroups,
      promptsPerGroup: 4,
      systemTokens: PRESSURE_UNIT_TOKENS,
      questionTokens: 128,
      outputTokens: 256,
      output: lognormalAround(256),
      qps: q ? [32, 96] : [16, 32, 64, 96, 128],
      seed,
      name: "generated-shared-prefix-pressure",
      note: workingSet(gspPressureGroups * PRESSURE_UNIT_TOKENS),
    }),
    llmdSharedPrefix(tok, {
      ...LLMD_DEFAULTS,
      groups: c.llmdGroups,
      output: lognormalAround(LLMD_DEFAULTS.outputTokens),
      requests: q ? 480 : 3000,
      qps: q ? [8, 20] : [16, 32, 48, 64, 80],
      seed,
    }),
    multiTurn(tok, {
      conversations: q ? 160 : 512,
      turns: mtTurns,
      systemTokens: 1024,
      questionTokens: [64, 320],
      outputTokens: 200,
      output: lognormalAround(200),
      thinkMs: 1000,
      qps: q ? [48, 192] : [32, 64, 128, 192, 256],
      seed,
    }),
    multiTurn(tok, {
      conversations: mtPressureConversations,
      turns: mtTurns,
      systemTokens: 1024,
      privateContextTokens: PRESSURE_UNIT_TOKENS,
      questionTokens: [64, 320],
      outputTokens: 200,
      output: lognormalAround(200),
      thinkMs: 1000,
      qps: q ? [24, 64] : [16, 32, 64, 96, 128],
      seed,
      name: "multi-turn-pressure",
      note: `${workingSet(mtPressureConversations * PRESSURE_UNIT_TOKENS)} in documents alone, histories on top`,
    }),
    agentic(tok, {
      ...AGENTIC_DEFAULTS,
      sessions: q ? 12 : 120,
      output: lognormalAround(AGENTIC_DEFAULTS.outputTokens),
      qps: q ? [16, 48] : [8, 16, 32, 48, 64],
      seed,
    }),
    rag(tok, {
      ...RAG_DEFAULTS,
      requests: q ? 300 : 1500,
      output: lognormalAround(RAG_DEFAULTS.outputTokens),
      qps: q ? [32, 96] : [16, 32, 64, 96, 128],
      seed,
    }),
    noSharing(tok, {
      requests: q ? 300 : 1000,
      promptTokens: 1024,
      outputTokens: 256,
      output: lognormalAround(256),
      qps: q ? [64, 192] : [32, 64, 128, 192, 256],
      seed,
    }),
  ];
}

function kvroute(c: BenchConfig, name: string, extra: Partial<KvrouteOptions> = {}): PolicyFactory {
  const o = {
    workers: c.cluster.workers,
    ranksPerWorker: c.cluster.ranksPerWorker,
    speculative: true,
    ...extra,
  };
  return kvroutePolicy(o, name);
}

/** kvroute variants run on the heaviest rate of `sensitivityWorkloads` only: what its result
 * depends on (event delay, load freshness, report interval, speculative entries, the queue
 * weight, and how many independent deciders — gateways × worker threads — share the fleet). */
export function kvrouteVariants(c: BenchConfig): PolicyFactory[] {
  return [
    kvroute(c, "kvroute (events 0 ms late)", { kvEventDelayMs: 0 }),
    kvroute(c, "kvroute (events 500 ms late)", { kvEventDelayMs: 500 }),
    kvroute(c, "kvroute (no speculative entries)", { speculative: false }),
    kvroute(c, "kvroute (load every 50 ms)", { load: { scrapeIntervalMs: 50 } }),
    kvroute(c, "kvroute (reports every 100 ms)", { plugin: { reportMs: 100 } }),
    kvroute(c, "kvroute (inflightWeight 0.5)", { routing: { inflightWeight: 0.5 } }),
    kvroute(c, "kvroute (1 gateway × 1 thread)", { gateways: 1, threadsPerGateway: 1 }),
    kvroute(c, "kvroute (4 gateways × 2 threads)", { gateways: 4, threadsPerGateway: 2 }),
  ];
}

/** Where the variants run: the cache-pressure workloads (kvroute's weakest in the quick runs) and
 * the llm-d benchmark. */
export function sensitivityWorkloads(c: BenchConfig): string[] {
  return c.quick
    ? ["generated-shared-prefix-pressure"]
    : ["generated-shared-prefix-pressure", "multi-turn-pressure", "llm-d-shared-prefix"];
}

export function policies(c: BenchConfig): PolicyFactory[] {
  return [
    randomPolicy,
    roundRobinPolicy,
    vllmLegacyPolicy,
    vllmCurrentPolicy,
    gaiePrefixPolicy,
    sglangCacheAwarePolicy,
    dynamoDefaultPolicy,
    llmdPrecisePolicy,
    llmdPreciseSpeculativePolicy,
    kvroutePolicy({
      workers: c.cluster.workers,
      ranksPerWorker: c.cluster.ranksPerWorker,
      speculative: true,
    }),
    idealPolicy,
  ];
}
