import { describe, expect, it } from "vitest";
import { MetricsParseError, parseEngineMetrics } from "../../control-plane/src/load/engine-metrics.ts";

// The shape vLLM's /metrics page has with DP=2 (internal LB: one server reports all ranks).
const vllmPage = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 3.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 0.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-8B"} 7.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-8B"} 0.5
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="29000",engine="0"} 1.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 1200.0
`;

describe("engine metrics", () => {
  it("reads ranks and load per engine label", () => {
    const m = parseEngineMetrics(vllmPage);
    expect([...m.ranks.keys()]).toEqual([0, 1]);
    expect(m.ranks.get(0)).toEqual({ running: 3, waiting: 0, kvUsage: 0.25 });
    expect(m.ranks.get(1)).toEqual({ running: 1, waiting: 7, kvUsage: 0.5 });
    expect(m.blockSize).toBe(16);
    expect(m.numGpuBlocks).toBe(29000);
  });

  it("filters by model name and ignores malformed rank labels", () => {
    const page = `${vllmPage}vllm:num_requests_running{engine="-1",model_name="Qwen/Qwen3-8B"} 9\nvllm:num_requests_running{engine="2",model_name="other"} 9\n`;
    expect([...parseEngineMetrics(page, "Qwen/Qwen3-8B").ranks.keys()]).toEqual([0, 1]);
    expect([...parseEngineMetrics(page).ranks.keys()].sort()).toEqual([0, 1, 2]);
    expect(parseEngineMetrics(page).ranks.get(0)?.running).toBe(3);
  });

  it("falls back to the deprecated KV usage name and to rank 0 without labels", () => {
    const page = "vllm:num_requests_running 2\nvllm:gpu_cache_usage_perc 0.75"; // no final newline
    expect(parseEngineMetrics(page).ranks.get(0)).toEqual({ running: 2, waiting: 0, kvUsage: 0.75 });
  });

  it("gives an empty result for a page without engine metrics and an error for garbage", () => {
    expect(parseEngineMetrics("# nothing here\nprocess_cpu_seconds_total 1\n").ranks.size).toBe(0);
    expect(() => parseEngineMetrics('vllm:num_requests_running{engine="0" 1\n')).toThrow(MetricsParseError);
  });
});
