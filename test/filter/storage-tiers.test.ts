// Storage tiers end to end: engines publish KV events in vLLM ≥ 0.26's form over real ZMQ sockets
// (a GPU store, the offloading connector's CPU copy naming the blocks by hash, the GPU eviction
// that leaves the CPU copy), a real control plane indexes them, and the gateway running
// build/kvroute.wasm routes by them: a CPU-tier hit beats no hit, a GPU hit beats the CPU one.
import { Tokenizer } from "@huggingface/tokenizers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Slot } from "../../control-plane/src/model/slot-table.ts";
import { ChatTemplateRenderer } from "../../control-plane/src/tokens/render-chat-template.ts";
import { loadTokenizerFiles } from "../../control-plane/src/tokens/tokenizer-files.ts";
import { TestEngine } from "../events/harness.ts";
import { encode, F64 } from "../events/msgspec.ts";
import {
  chatBody,
  counter,
  type FakeEngine,
  lastHit,
  post,
  QWEN,
  type Stack,
  startStack,
  synced,
  until,
} from "./harness.ts";

const BLOCK = 16;
let stack: Stack;
const publishers: TestEngine[] = [];
const seqs = [0, 0, 0];
let tokenizer: Tokenizer;
let jinja: ChatTemplateRenderer;

beforeAll(async () => {
  const files = loadTokenizerFiles(QWEN);
  tokenizer = new Tokenizer(files.tokenizer, files.config);
  jinja = new ChatTemplateRenderer(files.config);
  for (let i = 0; i < 3; i++) {
    const p = new TestEngine("kv");
    await p.bind();
    await p.serveReplay({ withTopic: true });
    publishers.push(p);
  }
  const portOf = (endpoint: string) => endpoint.slice(endpoint.lastIndexOf(":") + 1);
  stack = await startStack({
    engines: [[0], [0], [0]],
    pools: (engines: FakeEngine[]) => [
      {
        name: "qwen",
        models: ["qwen3"],
        tokenizer: QWEN,
        endpoints: engines.map((e, i) => {
          const p = publishers[i] as TestEngine;
          return {
            address: e.address,
            ranks: [0],
            kvEvents: {
              endpoint: `tcp://*:${portOf(p.endpoint)}`,
              replayEndpoint: `tcp://*:${portOf(p.replayAt)}`,
              topic: "kv",
            },
          };
        }),
      },
    ],
    // Speculative routes last 100 ms, so a decision rests on the engines' events.
    cache: { speculativeTtlMs: 100 },
  });
  await until(() => stack.cp.ready(), "control plane ready");
  await synced(stack);
}, 60_000);

afterAll(async () => {
  await stack?.close();
  for (const p of publishers) await p.close();
});

const slotOf = (i: number): Slot => {
  const address = stack.engines[i]?.address;
  const s = stack.cp.slots.present().find((x) => x.address === address);
  if (s === undefined) throw new Error(`no slot for engine ${i}`);
  return s;
};
const statsOf = (i: number) => stack.cp.index.slot(slotOf(i).key)?.stats;

/** The prompt's full blocks as the engine would store them: token ids, block hashes from `base`. */
function blocksOf(system: string, user: string, base: number) {
  const text = jinja.render([
    { role: "system", content: system },
    { role: "user", content: user },
  ]);
  const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
  const n = Math.floor(ids.length / BLOCK);
  return { hashes: Array.from({ length: n }, (_, k) => base + k), tokens: ids.slice(0, n * BLOCK) };
}

/** One vLLM ≥ 0.26 batch (a map of tagged map events) from engine i. */
async function publish(i: number, events: unknown[]): Promise<void> {
  const seq = seqs[i] ?? 0;
  const payload = encode({
    ts: new F64(1_700_000_000 + seq),
    events: events as never,
    data_parallel_rank: 0,
  });
  await (publishers[i] as TestEngine).publish(seq, payload);
  seqs[i] = seq + 1;
}

const gpuStore = (b: { hashes: number[]; tokens: number[] }) => ({
  type: "BlockStored",
  block_hashes: b.hashes,
  parent_block_hash: null,
  token_ids: b.tokens,
  block_size: BLOCK,
  lora_id: null,
  medium: "GPU",
  lora_name: null,
});
// vLLM's OffloadingConnector.take_events: the CPU copy names the blocks only.
const cpuCopy = (b: { hashes: number[] }) => ({
  type: "BlockStored",
  block_hashes: b.hashes,
  parent_block_hash: null,
  token_ids: [],
  block_size: 0,
  lora_id: null,
  medium: "CPU",
  lora_name: null,
});
const gpuEvicted = (b: { hashes: number[] }) => ({
  type: "BlockRemoved",
  block_hashes: b.hashes,
  medium: "GPU",
});

/** Engine i ends up with the prompt's blocks on CPU only: stored on GPU, copied, evicted from GPU. */
async function offloaded(i: number, b: { hashes: number[]; tokens: number[] }): Promise<void> {
  await publish(i, [gpuStore(b), cpuCopy(b), gpuEvicted(b)]);
}

const system = (tag: string) =>
  `${tag}: you answer from a long, shared policy handbook, exactly. `.repeat(30);

async function routedTo(body: string): Promise<string | undefined> {
  const r = await post(stack, "/v1/chat/completions", body);
  expect(r.status).toBe(200);
  return lastHit(stack)?.engine;
}

describe("storage tiers from KV events to the gateway's decision", () => {
  it("routes to a CPU-tier hit rather than to no hit", async () => {
    const s = system("cpu-only");
    const b = blocksOf(s, "What does chapter two say?", 1000);
    expect(b.hashes.length).toBeGreaterThan(10);
    const before = statsOf(0)?.lowerTierStores ?? 0;
    await offloaded(0, b);
    await until(
      () =>
        (statsOf(0)?.lowerTierStores ?? 0) >= before + b.hashes.length &&
        (statsOf(0)?.removedBlocks ?? 0) > 0,
      "engine 0's CPU copies indexed and its GPU copies removed",
    );
    await synced(stack);
    const hits = counter(stack, "kvroute.requests.prefix_hit");
    expect(await routedTo(chatBody(s, "What does chapter two say?"))).toBe(stack.engines[0]?.address);
    expect(counter(stack, "kvroute.requests.prefix_hit")).toBe(hits + 1);
  });

  it("routes to a GPU hit rather than to the CPU-tier one", async () => {
    // ~3000 tokens: a GPU copy is worth 15 % more (tier weights 1 and 0.85), 450 tokens — more
    // than the gateway's order of near-equal slots can outweigh (128 tokens).
    const s = system("gpu-beats-cpu").repeat(7);
    const user = "And chapter three?";
    const cpuBefore = statsOf(0)?.lowerTierStores ?? 0;
    await offloaded(0, blocksOf(s, user, 5000));
    const before = statsOf(1)?.storedBlocks ?? 0;
    const onGpu = blocksOf(s, user, 9000);
    await publish(1, [gpuStore(onGpu)]);
    await until(
      () => (statsOf(1)?.storedBlocks ?? 0) >= before + onGpu.hashes.length,
      "engine 1's GPU blocks indexed",
    );
    await until(
      () => (statsOf(0)?.lowerTierStores ?? 0) >= cpuBefore + onGpu.hashes.length,
      "engine 0's CPU copies",
    );
    await synced(stack);
    expect(await routedTo(chatBody(s, user))).toBe(stack.engines[1]?.address);
  });

  it("forgets the prefix once the CPU copy is evicted too", async () => {
    const s = system("evicted");
    const user = "Chapter four?";
    const b = blocksOf(s, user, 20000);
    await offloaded(2, b);
    await until(() => (statsOf(2)?.lowerTierStores ?? 0) >= b.hashes.length, "engine 2's CPU copies");
    await publish(2, [{ type: "BlockRemoved", block_hashes: b.hashes, medium: "CPU" }]);
    await until(() => (statsOf(2)?.blocks ?? -1) === 0, "engine 2's blocks all gone");
    await synced(stack);
    const hits = counter(stack, "kvroute.requests.prefix_hit");
    await routedTo(chatBody(s, user));
    expect(counter(stack, "kvroute.requests.prefix_hit")).toBe(hits);
  });
});
