// Prefix affinity through the endpoint picker, end to end on loopback: simulated vLLM workers
// with real KV events feed the control plane, the picker routes a shared system prompt back to the
// rank that cached it, and the engine reports the hit — in both body modes. The inline gateway of
// the same control plane counts in the same in-flight view.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forward } from "./envoy-ext-proc.ts";
import { MODEL, type SimStack, startSimStack, storedBlocks } from "./sim-stack.ts";
import { eppSynced, header, until } from "./stack.ts";

/** The simulated engines' KV block size (test/sim/helpers.ts simConfig). */
const BLOCK_SIZE = 16;

let s: SimStack;
beforeAll(async () => {
  s = await startSimStack({ workers: 2, ranks: 2 });
  await until(() => s.cp.ready(), "control plane ready", 20_000);
  await eppSynced(s.cp);
}, 90_000);
afterAll(async () => s?.close());

const system = (tag: string) =>
  `${tag}: you are a precise assistant for GPU fleet operators; answer in numbered steps. `.repeat(25);

async function ask(sys: string, user: string, mode: "FULL_DUPLEX_STREAMED" | "BUFFERED") {
  const body = JSON.stringify({
    model: MODEL,
    messages: [
      { role: "system", content: sys },
      { role: "user", content: user },
    ],
    max_tokens: 4,
  });
  const r = await s.client.exchange(
    { path: "/v1/chat/completions", headers: [["content-type", "application/json"]], body },
    forward,
    { mode },
  );
  const h = new Map(r.response?.headers ?? []);
  return {
    status: r.response?.status,
    worker: r.served,
    rank: h.get("x-kvroute-sim-rank"),
    header: header(r.upstreamHeaders, "x-data-parallel-rank"),
    cached: Number(h.get("x-kvroute-sim-cached-tokens") ?? 0),
    prompt: Number(JSON.parse(r.response?.body.toString() ?? "{}").usage?.prompt_tokens ?? 0),
  };
}

for (const mode of ["FULL_DUPLEX_STREAMED", "BUFFERED"] as const) {
  describe(`prefix affinity through the picker (${mode})`, () => {
    it("sends a shared system prompt back to the rank that cached it; the engine reports the hit", async () => {
      const sys = system(`affinity ${mode}`);
      const before = storedBlocks(s.cp);
      const first = await ask(sys, "How do I drain a node?", mode);
      expect(first.status).toBe(200);
      expect(first.rank).toBe(first.header);
      // Every full block of the first prompt indexed (its events may come in several batches:
      // one new block is not the whole prefix, and a partial prefix may lose to load).
      const promptBlocks = Math.floor(first.prompt / BLOCK_SIZE);
      expect(promptBlocks).toBeGreaterThan(10);
      await until(() => storedBlocks(s.cp) - before >= promptBlocks, "the first prompt's blocks indexed");
      await eppSynced(s.cp);
      for (const q of ["How do I cordon it first?", "And how do I bring it back?"]) {
        const r = await ask(sys, q, mode);
        expect([r.worker, r.rank]).toEqual([first.worker, first.rank]);
        expect(r.cached / r.prompt).toBeGreaterThan(0.8);
      }
    });
  });
}
