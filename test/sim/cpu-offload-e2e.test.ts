// The simulator's CPU offload tier end to end: a simulated vLLM worker (2 ranks, a small GPU cache
// and a CPU tier) moves evicted blocks to CPU and publishes them as vLLM's offloading connector
// does; the control plane indexes them by tier; the gateway running build/kvroute.wasm sends a
// prompt whose prefix is only in rank 0's CPU tier to rank 0 rather than to a rank without it,
// and a prompt on rank 0's CPU and rank 1's GPU to rank 1. The engine's cached-token counts agree.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type E2E, MODEL, startE2E, synced, until } from "../e2e/harness.ts";

let e: E2E;
beforeAll(async () => {
  // 96 GPU blocks of 16 tokens per rank (1,536 tokens): a few long prompts evict a prefix.
  e = await startE2E({
    workers: 1,
    ranks: 2,
    sim: { numGpuBlocks: 96, numCpuBlocks: 2048, maxModelLen: 1536 },
  });
  await until(() => e.cp?.ready() === true, "control plane ready");
  await synced(e);
}, 60_000);
afterAll(async () => e?.close());

const system = (tag: string) =>
  `${tag}: you answer from the operations handbook, briefly and exactly. `.repeat(45);

interface Served {
  status: number;
  rank: number;
  cached: number;
  promptTokens: number;
}

async function chat(url: string, sys: string, user: string, rank?: number): Promise<Served> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(rank === undefined ? {} : { "x-data-parallel-rank": String(rank) }),
    },
    body: JSON.stringify({
      model: MODEL,
      messages: [
        { role: "system", content: sys },
        { role: "user", content: user },
      ],
      max_tokens: 2,
    }),
  });
  const body = (await res.json()) as { usage?: { prompt_tokens?: number } };
  return {
    status: res.status,
    rank: Number(res.headers.get("x-kvroute-sim-rank") ?? -1),
    cached: Number(res.headers.get("x-kvroute-sim-cached-tokens") ?? -1),
    promptTokens: body.usage?.prompt_tokens ?? 0,
  };
}

const engineUrl = () => `http://127.0.0.1:${e.workers[0]?.port}`;
const cpuTier = (rank: number) => e.workers[0]?.sim?.ranks.find((r) => r.rank === rank)?.rt.engine.pool.cpu;
const slotStats = (rank: number) => {
  const slot = e.cp?.slots.present().find((s) => s.globalRank === rank);
  return slot === undefined ? undefined : e.cp?.index.slot(slot.key)?.stats;
};

/** The block hashes on a rank's GPU, from the simulator's cache dump. */
async function gpuBlocks(rank: number): Promise<Set<bigint>> {
  const dump = (await (await fetch(`${engineUrl()}/kvroute/sim/cache?rank=${rank}`)).json()) as Record<
    string,
    Array<{ hash: string }>
  >;
  return new Set((dump[String(rank)] ?? []).map((b) => BigInt(b.hash)));
}

const indexHolds = (rank: number, hashes: Iterable<bigint>) => {
  const slot = e.cp?.slots.present().find((s) => s.globalRank === rank);
  const held = new Set(slot === undefined ? [] : (e.cp?.index.slot(slot.key)?.blockHashes() ?? []));
  return [...hashes].every((h) => held.has(h));
};

/** Seeds `sys` on `rank` directly at the engine (its blocks, returned, are on that GPU). */
async function seed(rank: number, sys: string): Promise<bigint[]> {
  const before = await gpuBlocks(rank);
  const seeded = await chat(engineUrl(), sys, "seed", rank);
  expect([seeded.status, seeded.rank]).toEqual([200, rank]);
  const blocks = [...(await gpuBlocks(rank))].filter((h) => !before.has(h));
  expect(blocks.length).toBeGreaterThan(20);
  await until(() => indexHolds(rank, blocks), `rank ${rank}'s blocks indexed`);
  return blocks;
}

/** Seeds `sys` on `rank`, then pushes it out of that rank's GPU into its CPU tier. */
async function offloadOn(rank: number, sys: string): Promise<void> {
  const blocks = await seed(rank, sys);
  const before = slotStats(rank)?.lowerTierStores ?? 0;
  for (let i = 0; i < 3; i++) {
    const r = await chat(engineUrl(), system(`filler ${rank} ${i} ${sys.slice(0, 12)}`), "go", rank);
    expect(r.status).toBe(200);
  }
  // Gone from the GPU, all in the CPU tier, and the control plane saw the copies.
  const onGpu = await gpuBlocks(rank);
  expect(blocks.filter((h) => onGpu.has(h))).toEqual([]);
  const inCpu = new Set(cpuTier(rank)?.cachedHashes() ?? []);
  expect(blocks.every((h) => inCpu.has(h))).toBe(true);
  await until(
    () => (slotStats(rank)?.lowerTierStores ?? 0) >= before + blocks.length,
    `rank ${rank}'s CPU copies indexed`,
  );
}

/** No request running or in flight anywhere, and the gateway has that view. */
async function idle(): Promise<void> {
  const cp = e.cp;
  if (cp === null) throw new Error("no control plane");
  await until(
    () =>
      cp.slots.present().every((s) => {
        const l = cp.load.get(s.id);
        return l.running === 0 && l.waiting === 0 && l.inflight === 0;
      }),
    "idle engines",
  );
  await synced(e);
}

const prefixHits = () => Number(e.gateway.host.counter("kvroute.requests.prefix_hit") ?? 0);

describe("simulated CPU offload tier through the gateway", () => {
  it("a prefix in one rank's CPU tier beats no prefix; the engine loads it", async () => {
    const sys = system("cpu-tier");
    await offloadOn(0, sys);
    await idle();
    const hits = prefixHits();
    const r = await chat(e.url, sys, "What does the handbook say about paging?");
    expect(r.status).toBe(200);
    expect(r.rank).toBe(0);
    expect(prefixHits()).toBe(hits + 1);
    // The engine found the prefix (loaded from its CPU tier).
    expect(r.cached / r.promptTokens).toBeGreaterThan(0.8);
  }, 60_000);

  it("a prefix on another rank's GPU beats the CPU-tier copy", async () => {
    const sys = system("gpu-beats-cpu");
    await offloadOn(0, sys);
    await seed(1, sys);
    await idle();
    const r = await chat(e.url, sys, "And about escalation?");
    expect(r.status).toBe(200);
    expect(r.rank).toBe(1);
    expect(r.cached / r.promptTokens).toBeGreaterThan(0.8);
  }, 60_000);
});
