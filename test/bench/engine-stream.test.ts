// The scaling bench's engine stream (bench/lib/engine-stream.ts): events in vLLM's shapes and
// cadence — a batch per engine step, a prompt in one BlockStored, decode-filled and evicted blocks
// one event each — at the rates asked.
import { describe, expect, it } from "vitest";
import { EngineStream } from "../../bench/lib/engine-stream.ts";
import type { KvEvent } from "../../control-plane/sim/kv-events.ts";

const options = {
  rank: 3,
  blockTokens: 4,
  kvBlocks: 1000,
  requestsPerS: 20,
  promptBlocks: 10,
  decodeBlocksPerS: 50,
  outputBlocks: 6,
  stepMs: 20,
  fillBlocksPerS: 4000,
  tokensOf: (chain: number, block: number) => [chain, block, 7, 9],
};

type Stored = Extract<KvEvent, { type: "BlockStored" }>;
const stored = (e: KvEvent): e is Stored => e.type === "BlockStored";

/** Calls every 5 ms (the bench's publication step) from `from` for `ms`; the batches returned. */
function run(s: EngineStream, from: number, ms: number): KvEvent[][] {
  const out: KvEvent[][] = [];
  for (let t = from + 5; t <= from + ms; t += 5) {
    const b = s.step(5, t);
    if (b !== null) out.push(b);
  }
  return out;
}

/** Calls until the cache is full; the batches and the time reached. */
function fillUp(s: EngineStream): { batches: KvEvent[][]; at: number } {
  const batches: KvEvent[][] = [];
  let t = 0;
  while (!s.full && t < 60_000) {
    t += 5;
    const b = s.step(5, t);
    if (b !== null) batches.push(b);
  }
  return { batches, at: t };
}

describe("EngineStream: a rank's KV events as a vLLM engine publishes them", () => {
  it("fills its cache with prompts first, then publishes a batch per engine step at the rates asked", () => {
    const s = new EngineStream(options);
    const fill = fillUp(s);
    expect(s.full).toBe(true);
    const fillStored = fill.batches.flat().filter(stored);
    expect(fillStored.every((e) => e.blockHashes.length === 10 && e.parentBlockHash === null)).toBe(true);
    expect(fillStored.length).toBe(100); // 1,000 blocks of 10-block prompts, then full

    const batches = run(s, fill.at, 10_000);
    // One batch per 20 ms step: 500 steps, less the first few before any request decodes.
    expect(batches.length).toBeGreaterThanOrEqual(495);
    expect(batches.length).toBeLessThanOrEqual(500);
    const events = batches.flat();
    const prompts = events.filter((e) => stored(e) && e.blockHashes.length === 10);
    const decoded = events.filter((e): e is Stored => stored(e) && e.blockHashes.length === 1);
    const removed = events.filter((e) => e.type === "BlockRemoved");
    expect(prompts.length).toBe(200); // 20 requests/s for 10 s
    expect(decoded.length).toBeGreaterThanOrEqual(495); // 50 blocks/s once a request decodes
    expect(decoded.length).toBeLessThanOrEqual(500);
    // Every evicted block goes on its own; the cache stays at its size.
    expect(removed.every((e) => e.type === "BlockRemoved" && e.blockHashes.length === 1)).toBe(true);
    expect(removed.length).toBe(prompts.length * 10 + decoded.length);
  });

  it("chains each decoded block to the last block of its request, at most outputBlocks of them", () => {
    const s = new EngineStream(options);
    const events = run(s, fillUp(s).at, 10_000).flat();
    const lastOf = new Map<bigint, { chain: number; n: number }>();
    for (const e of events) {
      if (!stored(e)) continue;
      const chain = e.tokenIds[0] as number;
      if (e.blockHashes.length === 10) {
        lastOf.set(e.blockHashes[9] as bigint, { chain, n: 0 });
        continue;
      }
      const parent = lastOf.get(e.parentBlockHash as bigint);
      expect(parent?.chain).toBe(chain);
      lastOf.delete(e.parentBlockHash as bigint);
      const n = (parent?.n ?? 0) + 1;
      expect(n).toBeLessThanOrEqual(6);
      // The block's tokens are its request's next block.
      expect(e.tokenIds[1]).toBe(10 + n - 1);
      lastOf.set(e.blockHashes[0] as bigint, { chain, n });
    }
  });

  it("refuses a step, block or prompt size of zero", () => {
    expect(() => new EngineStream({ ...options, stepMs: 0 })).toThrow(RangeError);
    expect(() => new EngineStream({ ...options, promptBlocks: 0 })).toThrow(RangeError);
  });
});
