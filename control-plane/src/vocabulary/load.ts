// The load vocabulary: what an engine's load looks like once read from its /metrics page, and
// what a scrape of one endpoint reports. The scraper (load/) produces it and the fleet model
// (model/) consumes it; neither imports the other.

export interface RankLoad {
  running: number;
  waiting: number;
  /** 0..1 */
  kvUsage: number;
  /** vLLM's vllm:lora_requests_info, when the engine exports it (LoRA enabled). */
  lora?: RankLora;
}

export interface RankLora {
  maxLoras: number;
  running: string[];
  waiting: string[];
}

export interface EngineMetrics {
  /** Global DP rank → load, one entry per `engine` label value seen. */
  ranks: Map<number, RankLoad>;
  /** From vllm:cache_config_info labels when present. */
  blockSize?: number;
  numGpuBlocks?: number;
}

export interface ScrapeTarget {
  /** Identifies the endpoint to the callback (pool + address). */
  key: string;
  url: string;
  modelName?: string;
}

export type ScrapeOutcome = { ok: true; metrics: EngineMetrics } | { ok: false; error: string };
