// Assembles a running simulator from a validated configuration: one Engine per simulated rank
// (each with its real-time driver and, when enabled, its ZMQ KV-event publisher) and the API
// servers the DP mode calls for. Also used by tests and the demo as a library.

import type { BalancerRule } from "./balancer.ts";
import { noneHash } from "./block-hash.ts";
import { Engine, type LoraSettings } from "./engine.ts";
import { VllmFront } from "./http-front.ts";
import type { EventEncoding } from "./kv-events.ts";
import type { KvEventsConfig } from "./kv-events-config.ts";
import { type ReplayForm, ZmqKvPublisher } from "./kv-publisher.ts";
import { DEFAULT_LATENCY, type LatencyModel } from "./latency.ts";
import { type DpTopology, frontsOf, simulatedRanks } from "./rank-header.ts";
import { RealtimeEngine } from "./realtime.ts";
import { SimTokenizer } from "./tokenize.ts";

export interface EngineSettings {
  blockSize: number;
  numGpuBlocks: number;
  /** CPU offload tier per rank, in blocks (0 or absent: none; cpu-tier.ts). */
  numCpuBlocks?: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  maxModelLen: number;
  latency: LatencyModel;
  seed: number;
  /** LoRA serving (--enable-lora, --max-loras, --lora-load-ms); absent or null: off. */
  lora?: LoraSettings | null;
}

export interface SimConfig extends EngineSettings {
  model: string;
  host: string;
  port: number;
  topology: DpTopology;
  tokenizerDir: string;
  timeScale: number;
  kvEvents: KvEventsConfig | null;
  eventEncoding: EventEncoding;
  replayForm: ReplayForm;
  balancerRule: BalancerRule;
  statsIntervalMs: number;
  promptTokensDetails: boolean;
  loraNames: string[];
}

export const ENGINE_DEFAULTS: EngineSettings = {
  blockSize: 16,
  numGpuBlocks: 29_375, // ≈ 470k tokens of 16-token blocks: REFERENCE §6's H100/8B figure
  maxNumSeqs: 256,
  maxNumBatchedTokens: 8192,
  maxModelLen: 8192,
  latency: DEFAULT_LATENCY,
  seed: 0,
};

/** A simulated engine with its driver and publisher, usable by any kind of front. */
export interface RankRuntime {
  rank: number;
  rt: RealtimeEngine;
  publisher: ZmqKvPublisher | null;
}

export async function startRanks(
  ranks: readonly number[],
  s: EngineSettings & {
    timeScale: number;
    kvEvents: KvEventsConfig | null;
    eventEncoding: EventEncoding;
    replayForm: ReplayForm;
  },
  outputVocab: readonly number[],
  portOffsetOf: (rank: number) => number = (rank) => rank,
): Promise<RankRuntime[]> {
  const out: RankRuntime[] = [];
  try {
    for (const rank of ranks) {
      const publisher =
        s.kvEvents?.enableKvCacheEvents && s.kvEvents.publisher === "zmq"
          ? await ZmqKvPublisher.create(
              s.kvEvents,
              rank,
              { encoding: s.eventEncoding, replayForm: s.replayForm },
              portOffsetOf(rank),
            )
          : null;
      const engine = new Engine({
        rank,
        blockSize: s.blockSize,
        numGpuBlocks: s.numGpuBlocks,
        numCpuBlocks: s.numCpuBlocks ?? 0,
        maxNumSeqs: s.maxNumSeqs,
        maxNumBatchedTokens: s.maxNumBatchedTokens,
        maxModelLen: s.maxModelLen,
        latency: s.latency,
        seed: s.seed,
        outputVocab,
        hashRoot: noneHash(s.seed),
        lora: s.lora ?? null,
      });
      const rt = new RealtimeEngine(engine, {
        timeScale: s.timeScale,
        onEvents: publisher ? (events, ts) => publisher.publish(events, ts) : undefined,
      });
      out.push({ rank, rt, publisher });
    }
  } catch (err) {
    await closeRanks(out);
    throw err;
  }
  return out;
}

export async function closeRanks(ranks: readonly RankRuntime[]): Promise<void> {
  for (const r of ranks) r.rt.close();
  await Promise.all(ranks.map((r) => r.publisher?.close()));
}

export interface RunningSim {
  /** Bound HTTP port of each front, in front order (rank order for external LB). */
  ports: number[];
  fronts: VllmFront[];
  ranks: RankRuntime[];
  close(): Promise<void>;
}

export async function startSim(cfg: SimConfig): Promise<RunningSim> {
  const tokenizer = SimTokenizer.load(cfg.tokenizerDir);
  const ranks = await startRanks(simulatedRanks(cfg.topology), cfg, tokenizer.outputVocab);
  const byRank = new Map(ranks.map((r) => [r.rank, r.rt]));
  const fronts: VllmFront[] = [];
  const ports: number[] = [];
  try {
    for (const spec of frontsOf(cfg.topology)) {
      const front = new VllmFront({
        model: cfg.model,
        loraNames: cfg.loraNames,
        tokenizer,
        engines: spec.ranks.map((r) => byRank.get(r) as RealtimeEngine),
        balancerRule: cfg.balancerRule,
        statsIntervalMs: cfg.statsIntervalMs,
        timeScale: cfg.timeScale,
        maxModelLen: cfg.maxModelLen,
        promptTokensDetails: cfg.promptTokensDetails,
      });
      ports.push(await front.listen(cfg.port === 0 ? 0 : cfg.port + spec.portOffset, cfg.host));
      fronts.push(front);
    }
  } catch (err) {
    await Promise.all(fronts.map((f) => f.close()));
    await closeRanks(ranks);
    throw err;
  }
  return {
    ports,
    fronts,
    ranks,
    async close() {
      await Promise.all(fronts.map((f) => f.close()));
      await closeRanks(ranks);
    },
  };
}
