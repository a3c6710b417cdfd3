// `kvroute sim`: flags mirror `vllm serve` where vLLM has them (names, meaning, defaults), plus
// the simulator's own (time scale, latency model, event encoding, Dynamo frontend). Parsed and
// validated once into a SimConfig / DynamoConfig; every invalid combination is a clear error.
import { type Command, InvalidArgumentError, Option } from "commander";
import type { BalancerRule } from "./balancer.ts";
import { type DynamoConfig, type DynamoWorkerSpec, startDynamo } from "./dynamo-frontend.ts";
import type { EventEncoding } from "./kv-events.ts";
import { parseKvEventsConfig } from "./kv-events-config.ts";
import type { ReplayForm } from "./kv-publisher.ts";
import { DEFAULT_LATENCY, LATENCY_PROFILES, type LatencyModel, latencyProfile } from "./latency.ts";
import type { DpTopology } from "./rank-header.ts";
import { ENGINE_DEFAULTS, type SimConfig, startSim } from "./server.ts";
import { createSimCluster } from "./virtual-cluster.ts";
import { sharedPrefixWorkload } from "./workloads.ts";

function int(min: number) {
  return (v: string): number => {
    if (!/^[0-9]+$/.test(v)) throw new InvalidArgumentError("must be a non-negative integer");
    const n = Number(v);
    if (n < min) throw new InvalidArgumentError(`must be at least ${min}`);
    return n;
  };
}

function positiveFloat(v: string): number {
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n) || n <= 0)
    throw new InvalidArgumentError("must be a positive number");
  return n;
}

function nonNegativeFloat(v: string): number {
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError("must be a number ≥ 0");
  return n;
}

function workerSpec(v: string, prev: DynamoWorkerSpec[] = []): DynamoWorkerSpec[] {
  const m = /^([0-9]+)(?::(aggregated|agg|prefill|decode))?$/.exec(v);
  if (!m) throw new InvalidArgumentError("expected <instance-id>[:aggregated|prefill|decode]");
  const role = m[2] === undefined || m[2] === "agg" ? "aggregated" : (m[2] as DynamoWorkerSpec["role"]);
  return [...prev, { instanceId: m[1] as string, role }];
}

export interface SimOptions {
  model: string;
  host: string;
  port: number;
  dataParallelSize: number;
  dataParallelSizeLocal?: number;
  dataParallelStartRank?: number;
  dataParallelRank?: number;
  dataParallelHybridLb?: boolean;
  dataParallelExternalLb?: boolean;
  blockSize: number;
  numGpuBlocks?: number;
  numGpuBlocksOverride?: number;
  cpuOffloadBlocks?: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  maxModelLen?: number;
  kvEventsConfig?: string;
  eventEncoding: EventEncoding;
  kvEventsReplayForm: ReplayForm;
  tokenizer?: string;
  seed: number;
  virtualRequests?: number;
  virtualRate: number;
  timeScale: number;
  lbRule: BalancerRule;
  lbStatsIntervalMs: number;
  enablePromptTokensDetails: boolean;
  loraModules?: string[];
  enableLora?: boolean;
  maxLoras?: number;
  loraLoadMs?: number;
  /** A named cost model (latency.ts LATENCY_PROFILES); the three flags below override its terms. */
  latencyProfile?: string;
  stepOverheadMs?: number;
  prefillTokenMs?: number;
  decodeSeqMs?: number;
  frontend: "vllm" | "dynamo";
  dynamoWorker?: DynamoWorkerSpec[];
}

/** Derives the DP topology from vLLM's flags, with vLLM's constraints. */
export function topologyOf(o: SimOptions): DpTopology {
  const size = o.dataParallelSize;
  if (o.dataParallelHybridLb && o.dataParallelExternalLb) {
    throw new Error("--data-parallel-hybrid-lb and --data-parallel-external-lb are mutually exclusive");
  }
  if (o.dataParallelExternalLb) {
    if (o.dataParallelRank !== undefined) {
      if (o.dataParallelRank >= size)
        throw new Error(`--data-parallel-rank must be < --data-parallel-size (${size})`);
      return { mode: "external", size, sizeLocal: 1, startRank: o.dataParallelRank };
    }
    const sizeLocal = o.dataParallelSizeLocal ?? size;
    const startRank = o.dataParallelStartRank ?? 0;
    if (startRank + sizeLocal > size) {
      throw new Error("--data-parallel-start-rank + --data-parallel-size-local exceeds --data-parallel-size");
    }
    return { mode: "external", size, sizeLocal, startRank };
  }
  if (o.dataParallelRank !== undefined)
    throw new Error("--data-parallel-rank requires --data-parallel-external-lb");
  if (o.dataParallelHybridLb) {
    if (o.dataParallelSizeLocal === undefined)
      throw new Error("--data-parallel-hybrid-lb requires --data-parallel-size-local");
    const startRank = o.dataParallelStartRank ?? 0;
    if (startRank + o.dataParallelSizeLocal > size) {
      throw new Error("--data-parallel-start-rank + --data-parallel-size-local exceeds --data-parallel-size");
    }
    return { mode: "hybrid", size, sizeLocal: o.dataParallelSizeLocal, startRank };
  }
  // Internal LB: the simulator runs every rank behind this one API server (vLLM's headless
  // nodes would hold the others; one process stands in for all of them here).
  if ((o.dataParallelStartRank ?? 0) !== 0) {
    throw new Error(
      "--data-parallel-start-rank needs --data-parallel-hybrid-lb or --data-parallel-external-lb",
    );
  }
  if (o.dataParallelSizeLocal !== undefined && o.dataParallelSizeLocal > size) {
    throw new Error("--data-parallel-size-local exceeds --data-parallel-size");
  }
  return { mode: "internal", size, sizeLocal: size, startRank: 0 };
}

/** vLLM's --max-loras default; the load time is the simulator's (an adapter already in CPU memory). */
export const LORA_DEFAULTS = { maxLoras: 1, loadMs: 25 } as const;

/** The adapters' served names, with vLLM's rules: name=path pairs, LoRA enabled, no repeats. */
function loraNamesOf(o: SimOptions): string[] {
  const modules = o.loraModules ?? [];
  if (modules.length > 0 && !o.enableLora) throw new Error("--lora-modules needs --enable-lora");
  const names = modules.map((m) => {
    const eq = m.indexOf("=");
    if (eq <= 0 || eq === m.length - 1) throw new Error(`--lora-modules ${m}: expected name=path`);
    return m.slice(0, eq);
  });
  const dup = names.find((n, i) => names.indexOf(n) !== i || n === o.model);
  if (dup !== undefined) throw new Error(`--lora-modules: ${dup} is served twice`);
  return names;
}

export function configOf(o: SimOptions): SimConfig {
  const numGpuBlocks = o.numGpuBlocks ?? o.numGpuBlocksOverride ?? ENGINE_DEFAULTS.numGpuBlocks;
  const capacity = numGpuBlocks * o.blockSize;
  const maxModelLen = o.maxModelLen ?? Math.min(ENGINE_DEFAULTS.maxModelLen, capacity);
  if (maxModelLen > capacity) {
    throw new Error(
      `--max-model-len ${maxModelLen} needs ${Math.ceil(maxModelLen / o.blockSize)} KV blocks, more than --num-gpu-blocks ${numGpuBlocks}`,
    );
  }
  const kvEvents = o.kvEventsConfig === undefined ? null : parseKvEventsConfig(o.kvEventsConfig);
  return {
    model: o.model,
    host: o.host,
    port: o.port,
    topology: topologyOf(o),
    tokenizerDir: o.tokenizer ?? "",
    timeScale: o.timeScale,
    kvEvents,
    eventEncoding: o.eventEncoding,
    replayForm: o.kvEventsReplayForm,
    balancerRule: o.lbRule,
    statsIntervalMs: o.lbStatsIntervalMs,
    promptTokensDetails: o.enablePromptTokensDetails,
    loraNames: loraNamesOf(o),
    lora: o.enableLora
      ? { maxLoras: o.maxLoras ?? LORA_DEFAULTS.maxLoras, loadMs: o.loraLoadMs ?? LORA_DEFAULTS.loadMs }
      : null,
    blockSize: o.blockSize,
    numGpuBlocks,
    numCpuBlocks: o.cpuOffloadBlocks ?? 0,
    maxNumSeqs: o.maxNumSeqs,
    maxNumBatchedTokens: o.maxNumBatchedTokens,
    maxModelLen,
    seed: o.seed,
    // The profile names the whole cost model; the flags override its three main terms, the
    // context terms (KV read, prefill attention) keep the profile's (docs/simulator.md, "Cost model").
    latency: latencyOf(o),
  };
}

export function dynamoConfigOf(o: SimOptions): DynamoConfig {
  const base = configOf({ ...o, dataParallelHybridLb: false, dataParallelExternalLb: false });
  return {
    ...base,
    dataParallelSize: o.dataParallelSize,
    workers: o.dynamoWorker ?? [
      { instanceId: "1", role: "aggregated" },
      { instanceId: "2", role: "aggregated" },
    ],
  };
}

export function registerSimCommand(program: Command): void {
  const cmd = program
    .command("sim")
    .description("Run simulated vLLM engines with data parallelism (or a Dynamo frontend over them)");
  serverOptions(cmd);
  dataParallelOptions(cmd);
  engineOptions(cmd);
  kvEventOptions(cmd);
  runOptions(cmd);
  apiOptions(cmd);
  loraOptions(cmd);
  latencyOptions(cmd);
  frontendOptions(cmd);
  virtualOptions(cmd);
  cmd.action(async (o: SimOptions, command: Command) => {
    try {
      await run(o);
    } catch (err) {
      command.error(`kvroute sim: ${(err as Error).message}`, { exitCode: 1 });
    }
  });
}

/** What is served and where. */
function serverOptions(cmd: Command): Command {
  return cmd
    .requiredOption("--model <name>", "model name served (as vLLM's --model / served name)")
    .option(
      "--tokenizer <dir>",
      "directory with tokenizer.json and tokenizer_config.json (required to serve)",
    )
    .option("--host <host>", "address to listen on", "0.0.0.0")
    .option("--port <port>", "HTTP port (external LB: rank r of this node on port + r)", int(0), 8000);
}

/** The DP deployment: ranks, this node's share, and vLLM's three load-balancing modes. */
function dataParallelOptions(cmd: Command): Command {
  return cmd
    .option("--data-parallel-size <n>", "DP ranks in the deployment", int(1), 1)
    .option("--data-parallel-size-local <n>", "DP ranks on this node", int(1))
    .option("--data-parallel-start-rank <n>", "global rank of this node's first rank", int(0))
    .option("--data-parallel-rank <n>", "external LB: the single rank this server runs", int(0))
    .option(
      "--data-parallel-hybrid-lb",
      "one API server per node over its local ranks (header = local index)",
    )
    .option("--data-parallel-external-lb", "one API server per rank; the port selects the rank");
}

/** Each rank's engine: KV cache, CPU offload tier, batch limits. */
function engineOptions(cmd: Command): Command {
  return cmd
    .option("--block-size <n>", "tokens per KV block", int(1), ENGINE_DEFAULTS.blockSize)
    .option("--num-gpu-blocks <n>", "KV blocks per rank (vLLM: --num-gpu-blocks-override)", int(1))
    .option("--num-gpu-blocks-override <n>", "alias of --num-gpu-blocks", int(1))
    .option(
      "--cpu-offload-blocks <n>",
      "CPU offload tier per rank, in KV blocks: GPU-evicted blocks move there and are published with medium CPU (vLLM's offloading connector; off by default)",
      int(1),
    )
    .option("--max-num-seqs <n>", "max running requests per rank", int(1), ENGINE_DEFAULTS.maxNumSeqs)
    .option(
      "--max-num-batched-tokens <n>",
      "token budget per step",
      int(1),
      ENGINE_DEFAULTS.maxNumBatchedTokens,
    )
    .option("--max-model-len <n>", "max prompt + output tokens (default: min(8192, cache size))", int(1));
}

/** KV events: vLLM's KVEventsConfig and the wire forms of its versions. */
function kvEventOptions(cmd: Command): Command {
  return cmd
    .option(
      "--kv-events-config <json>",
      "vLLM KVEventsConfig JSON, e.g. '{\"enable_kv_cache_events\":true,...}'",
    )
    .addOption(
      new Option("--event-encoding <form>", "KV event encoding: array (vLLM < 0.26) or map (0.26+)")
        .choices(["array", "map"])
        .default("array"),
    )
    .addOption(
      new Option("--kv-events-replay-form <form>", "replay reply frames: with topic (0.26+) or legacy")
        .choices(["topic", "legacy"])
        .default("topic"),
    );
}

/** Determinism and speed. */
function runOptions(cmd: Command): Command {
  return cmd
    .option("--seed <n>", "seed for generated text and hashes", int(0), 0)
    .option("--time-scale <x>", "real seconds per simulated second (0.01 = 100× faster)", positiveFloat, 1);
}

/** vLLM's internal DP balancer and the API's usage details. */
function apiOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option("--lb-rule <rule>", "vLLM internal DP balancer generation")
        .choices(["current", "legacy"])
        .default("current"),
    )
    .option(
      "--lb-stats-interval-ms <ms>",
      "staleness of the balancer's stats (vLLM: 100)",
      nonNegativeFloat,
      100,
    )
    .option("--no-enable-prompt-tokens-details", "omit usage.prompt_tokens_details (vLLM's default)");
}

/** LoRA adapters. */
function loraOptions(cmd: Command): Command {
  return cmd
    .option("--enable-lora", "serve LoRA adapters (vLLM --enable-lora)")
    .option("--lora-modules <name=path...>", "LoRA adapters served under their own model names")
    .option(
      "--max-loras <n>",
      "adapters in one batch and in GPU memory (vLLM --max-loras)",
      int(1),
      LORA_DEFAULTS.maxLoras,
    )
    .option(
      "--lora-load-ms <ms>",
      "simulator: time to load an adapter into GPU memory, charged to the step that needs it",
      nonNegativeFloat,
      LORA_DEFAULTS.loadMs,
    );
}

function latencyOf(o: SimOptions): LatencyModel {
  const base = latencyProfile(o.latencyProfile ?? "h100-derived");
  return {
    ...base,
    stepOverheadMs: o.stepOverheadMs ?? base.stepOverheadMs,
    prefillPerTokenMs: o.prefillTokenMs ?? base.prefillPerTokenMs,
    decodePerSeqMs: o.decodeSeqMs ?? base.decodePerSeqMs,
  };
}

/** The step-time (cost) model. */
function latencyOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option("--latency-profile <name>", "latency model: a named cost model (docs/simulator.md)")
        .choices(Object.keys(LATENCY_PROFILES))
        .default("h100-derived"),
    )
    .option(
      "--step-overhead-ms <ms>",
      `latency model: fixed cost per step (h100-derived: ${DEFAULT_LATENCY.stepOverheadMs})`,
      nonNegativeFloat,
    )
    .option(
      "--prefill-token-ms <ms>",
      `latency model: cost per uncached prompt token (h100-derived: ${DEFAULT_LATENCY.prefillPerTokenMs})`,
      nonNegativeFloat,
    )
    .option(
      "--decode-seq-ms <ms>",
      `latency model: cost per decoding sequence (h100-derived: ${DEFAULT_LATENCY.decodePerSeqMs})`,
      nonNegativeFloat,
    );
}

/** vLLM API servers, or a Dynamo frontend over the workers. */
function frontendOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option("--frontend <kind>", "API front: vllm, or a Dynamo frontend")
        .choices(["vllm", "dynamo"])
        .default("vllm"),
    )
    .option(
      "--dynamo-worker <id[:role]>",
      "Dynamo worker (repeat): instance id and aggregated|prefill|decode",
      workerSpec,
    );
}

/** No servers: a workload in virtual time. */
function virtualOptions(cmd: Command): Command {
  return cmd
    .option(
      "--virtual-requests <n>",
      "no servers: run a shared-prefix workload of n requests in virtual time",
      int(1),
    )
    .option("--virtual-rate <rps>", "arrival rate of the virtual workload (requests/s)", positiveFloat, 80);
}

async function run(o: SimOptions): Promise<void> {
  if (o.virtualRequests !== undefined) {
    process.stdout.write(`${JSON.stringify(runVirtual(o))}\n`);
    return;
  }
  if (o.tokenizer === undefined) throw new Error("--tokenizer <dir> is required to serve requests");
  let close: () => Promise<void>;
  if (o.frontend === "dynamo") {
    const cfg = dynamoConfigOf(o);
    const d = await startDynamo(cfg);
    close = d.close;
    const ws = d.workers.map((w) => `${w.spec.instanceId}:${w.spec.role}`).join(", ");
    process.stdout.write(
      `kvroute sim: Dynamo frontend on http://${o.host}:${d.port} (workers ${ws}; DP ${o.dataParallelSize} each)\n`,
    );
    process.stdout.write(`${JSON.stringify({ ready: true, ports: [d.port] })}\n`);
  } else {
    const cfg = configOf(o);
    const sim = await startSim(cfg);
    close = sim.close;
    sim.fronts.forEach((f, i) => {
      const ranks = f.opts.engines.map((rt) => rt.engine.rank).join(",");
      process.stdout.write(
        `kvroute sim: ${cfg.topology.mode} LB, ranks [${ranks}] on http://${o.host}:${sim.ports[i]}\n`,
      );
    });
    process.stdout.write(`${JSON.stringify({ ready: true, ports: sim.ports })}\n`);
  }
  const stop = () => {
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

/** `--virtual-requests`: SGLang's generated-shared-prefix workload through the virtual-time
 * cluster with vLLM's own balancer, summarised; the engine flags apply as when serving. */
export function runVirtual(o: SimOptions): Record<string, number> {
  const cfg = configOf({ ...o, dataParallelHybridLb: false, dataParallelExternalLb: false });
  const t0 = performance.now();
  const work = sharedPrefixWorkload({
    requests: o.virtualRequests ?? 0,
    ratePerSecond: o.virtualRate,
    seed: o.seed,
  });
  const cluster = createSimCluster({
    dataParallelSize: o.dataParallelSize,
    numGpuBlocks: cfg.numGpuBlocks,
    blockSize: cfg.blockSize,
    maxNumSeqs: cfg.maxNumSeqs,
    maxNumBatchedTokens: cfg.maxNumBatchedTokens,
    maxModelLen: cfg.maxModelLen,
    latency: cfg.latency,
    seed: cfg.seed,
    balancerRule: cfg.balancerRule,
    statsIntervalMs: cfg.statsIntervalMs,
  });
  for (const w of work) cluster.submit(w.request, w.atMs);
  const res = cluster.runUntilIdle();
  const pct = (xs: number[], p: number) =>
    xs[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? Number.NaN;
  const ttft = res.map((r) => r.ttftMs).sort((a, b) => a - b);
  const e2e = res.map((r) => r.e2eMs).sort((a, b) => a - b);
  const prompt = res.reduce((a, r) => a + r.promptTokens, 0);
  const cached = res.reduce((a, r) => a + r.cachedTokens, 0);
  return {
    requests: res.length,
    wallSeconds: (performance.now() - t0) / 1000,
    virtualSeconds: cluster.nowMs / 1000,
    ttftP50Ms: pct(ttft, 0.5),
    ttftP90Ms: pct(ttft, 0.9),
    ttftP99Ms: pct(ttft, 0.99),
    e2eP50Ms: pct(e2e, 0.5),
    cachedTokenFraction: prompt === 0 ? 0 : cached / prompt,
    outputTokensPerSecond: res.reduce((a, r) => a + r.outputTokens, 0) / (cluster.nowMs / 1000),
    preemptions: res.reduce((a, r) => a + r.preemptions, 0),
  };
}
