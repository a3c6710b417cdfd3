// The simulator's LoRA serving as vLLM V1 does it: a step batches at most --max-loras adapters
// (a waiting request of another one is skipped, later ones go first), an adapter not in GPU memory
// is loaded by the step that first needs it, vllm:lora_requests_info shows the adapters of running
// and waiting requests, /v1/models lists adapters with their base as `parent`; and the flags.
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { noneHash } from "../../control-plane/sim/block-hash.ts";
import { configOf, type SimOptions } from "../../control-plane/sim/cli.ts";
import { Engine } from "../../control-plane/sim/engine.ts";
import { parseEngineMetrics } from "../../control-plane/src/load/engine-metrics.ts";
import { QWEN3, simConfig, withSim } from "./helpers.ts";

function engine(maxLoras: number, loadMs = 40): Engine {
  return new Engine({
    rank: 0,
    blockSize: 4,
    numGpuBlocks: 64,
    maxNumSeqs: 8,
    maxNumBatchedTokens: 256,
    seed: 1,
    outputVocab: [100, 101, 102],
    hashRoot: noneHash(1),
    lora: { maxLoras, loadMs },
  });
}

const prompt = (n: number) => Array.from({ length: 9 }, (_, i) => n * 100 + i);

describe("simulated LoRA scheduling", () => {
  it("batches at most max_loras adapters; another adapter's request waits while later ones go first", () => {
    const e = engine(1);
    e.add({ id: "a1", promptTokens: prompt(1), maxTokens: 3, loraName: "a" }, 0);
    e.add({ id: "b1", promptTokens: prompt(2), maxTokens: 3, loraName: "b" }, 0);
    e.add({ id: "a2", promptTokens: prompt(3), maxTokens: 3, loraName: "a" }, 0);
    const step = e.schedule();
    expect(step?.entries.map((x) => x.request.spec.id)).toEqual(["a1", "a2"]);
    expect(e.loraInfo()).toEqual({ maxLoras: 1, running: ["a"], waiting: ["b"] });
    // The step loads adapter a first.
    expect(step?.durationMs).toBeGreaterThan(40);
    let t = 0;
    for (let s = step; s; s = e.schedule()) {
      t += s.durationMs;
      e.complete(s, t);
    }
    expect(e.adapterLoads).toBe(2); // a, then b once a's requests finished
    expect(e.loadedAdapters).toEqual(["b"]);
    expect(e.loraInfo()).toEqual({ maxLoras: 1, running: [], waiting: [] });
  });

  it("a loaded adapter is not loaded again; base-model requests batch with any adapter", () => {
    const e = engine(2, 40);
    e.add({ id: "a1", promptTokens: prompt(1), maxTokens: 1, loraName: "a" }, 0);
    e.add({ id: "base", promptTokens: prompt(2), maxTokens: 1 }, 0);
    const first = e.schedule();
    expect(first?.entries.length).toBe(2);
    e.complete(first as NonNullable<typeof first>, first?.durationMs ?? 0);
    e.add({ id: "a2", promptTokens: prompt(3), maxTokens: 1, loraName: "a" }, 0);
    const second = e.schedule();
    expect(second?.durationMs).toBeLessThan(40);
    expect(e.adapterLoads).toBe(1);
  });

  it("without LoRA settings adapters are neither limited nor reported", () => {
    const e = new Engine({
      rank: 0,
      blockSize: 4,
      numGpuBlocks: 64,
      maxNumSeqs: 8,
      maxNumBatchedTokens: 256,
      seed: 1,
      outputVocab: [100],
      hashRoot: noneHash(1),
    });
    e.add({ id: "a", promptTokens: prompt(1), maxTokens: 1, loraName: "a" }, 0);
    e.add({ id: "b", promptTokens: prompt(2), maxTokens: 1, loraName: "b" }, 0);
    expect(e.schedule()?.entries.length).toBe(2);
    expect(e.loraInfo()).toBeNull();
  });
});

describe("simulated LoRA over HTTP", () => {
  it("/metrics has vllm:lora_requests_info per rank, /v1/models the adapters with their parent", async () => {
    await withSim(
      simConfig({ loraNames: ["sql", "chat"], lora: { maxLoras: 2, loadMs: 5 } }),
      async (sim) => {
        const base = `http://127.0.0.1:${sim.ports[0]}`;
        const models = (await (await fetch(`${base}/v1/models`)).json()) as {
          data: Array<{ id: string; parent: string | null; root: string }>;
        };
        expect(models.data.map((m) => [m.id, m.parent])).toEqual([
          ["qwen3", null],
          ["sql", "qwen3"],
          ["chat", "qwen3"],
        ]);
        // A request holds its adapter as running while it decodes.
        sim.ranks[1]?.rt.engine.add({ id: "x", promptTokens: prompt(1), maxTokens: 1, loraName: "chat" }, 0);
        const page = await (await fetch(`${base}/metrics`)).text();
        expect(page).toContain("# TYPE vllm:lora_requests_info gauge");
        expect(page).toMatch(
          /vllm:lora_requests_info\{max_lora="2",waiting_lora_adapters="",running_lora_adapters="",engine="0"\} \d+\.\d+/,
        );
        const m = parseEngineMetrics(page);
        expect(m.ranks.get(0)?.lora).toEqual({ maxLoras: 2, running: [], waiting: [] });
        expect(m.ranks.get(1)?.lora?.maxLoras).toBe(2);
        expect([...(m.ranks.get(1)?.lora?.running ?? []), ...(m.ranks.get(1)?.lora?.waiting ?? [])]).toEqual([
          "chat",
        ]);
      },
    );
  });

  it("an engine without LoRA publishes no adapter gauge", async () => {
    await withSim(simConfig(), async (sim) => {
      const page = await (await fetch(`http://127.0.0.1:${sim.ports[0]}/metrics`)).text();
      expect(page).not.toContain("lora_requests_info");
      expect(parseEngineMetrics(page).ranks.get(0)?.lora).toBeUndefined();
    });
  });
});

describe("LoRA flags", () => {
  const opts = (o: Partial<SimOptions>): SimOptions =>
    ({
      model: "m",
      host: "127.0.0.1",
      port: 0,
      dataParallelSize: 1,
      blockSize: 16,
      numGpuBlocks: 64,
      maxNumSeqs: 8,
      maxNumBatchedTokens: 512,
      eventEncoding: "array",
      kvEventsReplayForm: "topic",
      seed: 0,
      virtualRate: 1,
      timeScale: 1,
      lbRule: "current",
      lbStatsIntervalMs: 100,
      enablePromptTokensDetails: true,
      stepOverheadMs: 1,
      prefillTokenMs: 0.01,
      decodeSeqMs: 0.01,
      frontend: "vllm",
      ...o,
    }) as SimOptions;

  it("--enable-lora with --lora-modules name=path and --max-loras", () => {
    const c = configOf(
      opts({ enableLora: true, loraModules: ["sql=/a", "chat=/b/c"], maxLoras: 4, loraLoadMs: 9 }),
    );
    expect(c.loraNames).toEqual(["sql", "chat"]);
    expect(c.lora).toEqual({ maxLoras: 4, loadMs: 9 });
    expect(configOf(opts({ enableLora: true })).lora).toEqual({ maxLoras: 1, loadMs: 25 });
    expect(configOf(opts({})).lora).toBeNull();
  });

  it.each([
    [{ loraModules: ["sql=/a"] }, "--lora-modules needs --enable-lora"],
    [{ enableLora: true, loraModules: ["sql"] }, "expected name=path"],
    [{ enableLora: true, loraModules: ["=/a"] }, "expected name=path"],
    [{ enableLora: true, loraModules: ["sql=/a", "sql=/b"] }, "sql is served twice"],
    [{ enableLora: true, loraModules: ["m=/a"] }, "m is served twice"],
  ])("%j → %s", (o, message) => {
    expect(() => configOf(opts(o as Partial<SimOptions>))).toThrow(message);
  });

  it("the CLI refuses a bad --max-loras", async () => {
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "control-plane/bin/kvroute.ts",
        "sim",
        "--model",
        "m",
        "--tokenizer",
        QWEN3,
        "--enable-lora",
        "--max-loras",
        "0",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const code = await new Promise<number | null>((r) => child.on("exit", r));
    expect(code).not.toBe(0);
    expect(stderr).toMatch(/--max-loras.*must be at least 1/);
  });
});
