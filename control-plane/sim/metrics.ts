// Prometheus text exposition with vLLM's metric names, types and labels, written by hand so
// the output matches Python prometheus_client's as scraped from vLLM V1: per-engine series
// labelled `{engine="<global DP rank>",model_name="..."}` (in that order, as captured vLLM
// scrapes show), floats Python-style ("0.0"), counters declared under their `_total` name;
// `cache_config_info` carries CacheConfig fields as labels with `engine` last. A server lists exactly
// the engines it fronts: all ranks (internal LB), its local range (hybrid), its own (external).
import type { Engine } from "./engine.ts";

export function pyFloat(v: number): string {
  if (Number.isInteger(v) && Math.abs(v) < 1e16) return v.toFixed(1);
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return v > 0 ? "+Inf" : "-Inf";
  // JS writes 1e-7 where Python writes 1e-07.
  return String(v).replace(/e([+-])(\d)$/, "e$10$2");
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function labels(pairs: Array<[string, string]>): string {
  return `{${pairs.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`;
}

interface Family {
  name: string;
  type: "gauge" | "counter";
  help: string;
  value: (e: Engine) => number;
}

const FAMILIES: Family[] = [
  {
    name: "vllm:num_requests_running",
    type: "gauge",
    help: "Number of requests in model execution batches.",
    value: (e) => e.running.length,
  },
  {
    name: "vllm:num_requests_waiting",
    type: "gauge",
    help: "Number of requests waiting to be processed.",
    value: (e) => e.waiting.length,
  },
  {
    name: "vllm:kv_cache_usage_perc",
    type: "gauge",
    help: "KV-cache usage. 1 means 100 percent usage.",
    value: (e) => e.pool.usage,
  },
  {
    name: "vllm:prefix_cache_queries_total",
    type: "counter",
    help: "Prefix cache queries, in terms of number of queried tokens.",
    value: (e) => e.counters.prefixCacheQueries,
  },
  {
    name: "vllm:prefix_cache_hits_total",
    type: "counter",
    help: "Prefix cache hits, in terms of number of cached tokens.",
    value: (e) => e.counters.prefixCacheHits,
  },
  {
    name: "vllm:num_preemptions_total",
    type: "counter",
    help: "Cumulative number of preemption from the engine.",
    value: (e) => e.counters.preemptions,
  },
  {
    name: "vllm:prompt_tokens_total",
    type: "counter",
    help: "Number of prefill tokens processed.",
    value: (e) => e.counters.promptTokens,
  },
  {
    name: "vllm:generation_tokens_total",
    type: "counter",
    help: "Number of generation tokens processed.",
    value: (e) => e.counters.generationTokens,
  },
];

/** `extraLabels(i)` adds labels before `engine` on engine i's series (the Dynamo mode's `worker_id`). */
export function renderMetrics(
  modelName: string,
  engines: readonly Engine[],
  extraLabels: (index: number) => Array<[string, string]> = () => [],
): string {
  const out: string[] = [];
  out.push("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig");
  out.push("# TYPE vllm:cache_config_info gauge");
  for (const [i, e] of engines.entries()) {
    const c = e.config;
    out.push(
      `vllm:cache_config_info${labels([
        ...extraLabels(i),
        ["block_size", String(c.blockSize)],
        ["cache_dtype", "auto"],
        ["enable_prefix_caching", "True"],
        ["gpu_memory_utilization", "0.9"],
        ["num_cpu_blocks", "None"],
        ["num_gpu_blocks", String(c.numGpuBlocks)],
        ["prefix_caching_hash_algo", "sha256"],
        ["engine", String(c.rank)],
      ])} 1.0`,
    );
  }
  for (const f of FAMILIES) {
    out.push(`# HELP ${f.name} ${f.help}`);
    out.push(`# TYPE ${f.name} ${f.type}`);
    for (const [i, e] of engines.entries()) {
      out.push(
        `${f.name}${labels([
          ...extraLabels(i),
          ["engine", String(e.config.rank)],
          ["model_name", modelName],
        ])} ${pyFloat(f.value(e))}`,
      );
    }
  }
  renderLoraInfo(out, engines, extraLabels);
  return `${out.join("\n")}\n`;
}

/**
 * vllm:lora_requests_info as vLLM's PrometheusStatLogger writes it: labels max_lora,
 * waiting_lora_adapters, running_lora_adapters (comma-separated names), value the Unix time it was
 * set. vLLM refuses LoRA metrics with several engines behind one server; the simulator then adds
 * `engine` (last) so each rank's adapters can be told apart. Only engines serving LoRA have it.
 */
function renderLoraInfo(
  out: string[],
  engines: readonly Engine[],
  extraLabels: (index: number) => Array<[string, string]>,
): void {
  const lora = engines.map((e) => e.loraInfo());
  if (lora.every((l) => l === null)) return;
  out.push("# HELP vllm:lora_requests_info Running stats on lora requests.");
  out.push("# TYPE vllm:lora_requests_info gauge");
  const now = Date.now() / 1000;
  for (const [i, l] of lora.entries()) {
    if (l === null) continue;
    const engine: Array<[string, string]> =
      engines.length > 1 ? [["engine", String((engines[i] as Engine).config.rank)]] : [];
    out.push(
      `vllm:lora_requests_info${labels([
        ...extraLabels(i),
        ["max_lora", String(l.maxLoras)],
        ["waiting_lora_adapters", l.waiting.join(",")],
        ["running_lora_adapters", l.running.join(",")],
        ...engine,
      ])} ${pyFloat(now)}`,
    );
  }
}

export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";
