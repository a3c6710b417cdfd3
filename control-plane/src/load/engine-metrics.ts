// Reads what routing needs from an engine's Prometheus /metrics page: which DP ranks it serves
// (the `engine` label, REFERENCE §1.3) and each rank's load. vLLM and SGLang name things
// differently; the names below are the ones each exports today.
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import type { EngineMetrics, RankLoad, RankLora } from "../vocabulary/load.ts";

const RUNNING = ["vllm:num_requests_running", "sglang:num_running_reqs"];
const WAITING = ["vllm:num_requests_waiting", "sglang:num_queue_reqs"];
// vllm:gpu_cache_usage_perc is the deprecated name older servers still export.
const KV_USAGE = ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"];

export class MetricsParseError extends Error {}

/**
 * vLLM's adapter gauge: labels max_lora, running_lora_adapters, waiting_lora_adapters (names,
 * comma-separated), value = the Unix time it was set. vLLM sets a new label set on every change
 * and the old series stay on the page, so the newest value is the current state (as GAIE reads it).
 * vLLM exports it without an `engine` label (it refuses LoRA metrics under DP): such a series is
 * the page's only rank (none when the page shows several). The simulator labels each rank's.
 */
const LORA_INFO = "vllm:lora_requests_info";
/** Adapters read from one label at most: a page is engine output, not trusted to be small. */
const MAX_LABEL_ADAPTERS = 256;

function loraInfo(
  samples: Array<{ value?: string; labels?: Record<string, string> }>,
  onlyRank: number | undefined,
): Map<number, RankLora> {
  const newest = new Map<number, { at: number; lora: RankLora }>();
  const names = (v: string | undefined) =>
    (v ?? "")
      .split(",")
      .map((n) => n.trim())
      .filter((n) => n.length > 0)
      .slice(0, MAX_LABEL_ADAPTERS);
  for (const s of samples) {
    const labelled = s.labels?.engine !== undefined || s.labels?.dp_rank !== undefined;
    const rank = labelled ? rankOf(s.labels) : onlyRank;
    const at = Number(s.value);
    const max = s.labels?.max_lora ?? "";
    if (rank === undefined || !Number.isFinite(at) || !/^\d{1,6}$/.test(max)) continue;
    const seen = newest.get(rank);
    if (seen !== undefined && seen.at >= at) continue;
    newest.set(rank, {
      at,
      lora: {
        maxLoras: Number(max),
        running: names(s.labels?.running_lora_adapters),
        waiting: names(s.labels?.waiting_lora_adapters),
      },
    });
  }
  return new Map([...newest].map(([rank, v]) => [rank, v.lora]));
}

function rankOf(labels: Record<string, string> | undefined): number | undefined {
  // SGLang labels attention-DP ranks as dp_rank; a single-engine server may omit the label (rank 0).
  const raw = labels?.engine ?? labels?.dp_rank ?? "0";
  return /^(0|[1-9]\d{0,5})$/.test(raw) ? Number(raw) : undefined;
}

export function parseEngineMetrics(text: string, modelName?: string): EngineMetrics {
  let families: ReturnType<typeof parsePrometheusTextFormat>;
  try {
    // The parser drops a last line that lacks its newline.
    families = parsePrometheusTextFormat(text.endsWith("\n") ? text : `${text}\n`);
  } catch (err) {
    throw new MetricsParseError(`unparseable metrics page: ${(err as Error).message}`);
  }
  // A well-formed page has one family per name, but merge repeats rather than lose samples.
  const byName = new Map<string, { metrics: (typeof families)[number]["metrics"] }>();
  for (const f of families) {
    const seen = byName.get(f.name);
    if (seen === undefined) byName.set(f.name, { metrics: [...f.metrics] });
    else seen.metrics.push(...f.metrics);
  }
  const ranks = new Map<number, RankLoad>();
  const apply = (names: string[], field: "running" | "waiting" | "kvUsage") => {
    const family = names.map((n) => byName.get(n)).find((f) => f !== undefined && f.metrics.length > 0);
    for (const sample of family?.metrics ?? []) {
      if (
        modelName !== undefined &&
        sample.labels?.model_name !== undefined &&
        sample.labels.model_name !== modelName
      )
        continue;
      const rank = rankOf(sample.labels);
      const value = Number(sample.value);
      if (rank === undefined || !Number.isFinite(value)) continue;
      const load = ranks.get(rank) ?? { running: 0, waiting: 0, kvUsage: 0 };
      load[field] = value;
      ranks.set(rank, load);
    }
  };
  apply(RUNNING, "running");
  apply(WAITING, "waiting");
  apply(KV_USAGE, "kvUsage");

  const onlyRank = ranks.size === 1 ? (ranks.keys().next().value as number) : undefined;
  for (const [rank, lora] of loraInfo(byName.get(LORA_INFO)?.metrics ?? [], onlyRank)) {
    const load = ranks.get(rank);
    if (load !== undefined) load.lora = lora;
  }

  const info = byName.get("vllm:cache_config_info")?.metrics[0]?.labels;
  const result: EngineMetrics = { ranks };
  if (info?.block_size !== undefined && /^\d+$/.test(info.block_size))
    result.blockSize = Number(info.block_size);
  if (info?.num_gpu_blocks !== undefined && /^\d+$/.test(info.num_gpu_blocks))
    result.numGpuBlocks = Number(info.num_gpu_blocks);
  return result;
}
