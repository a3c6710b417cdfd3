// The simulator's optional CPU offload tier (control-plane/sim/cpu-tier.ts): blocks the GPU evicts
// move to a bounded CPU tier, are published the way vLLM's offloading connector publishes them
// (medium CPU, hash only), and a later request loads them back instead of computing them. A
// subscriber applying the events per medium sees exactly the engine's GPU cache and CPU tier.
import { describe, expect, it } from "vitest";
import { noneHash } from "../../control-plane/sim/block-hash.ts";
import { Engine } from "../../control-plane/sim/engine.ts";
import { encodeEventBatch, type KvEvent } from "../../control-plane/sim/kv-events.ts";
import { DEFAULT_LATENCY, stepDurationMs } from "../../control-plane/sim/latency.ts";
import { decodeBatch } from "../../control-plane/src/events/batch-decoder.ts";

function engine(numCpuBlocks: number): Engine {
  return new Engine({
    rank: 0,
    blockSize: 4,
    numGpuBlocks: 8,
    numCpuBlocks,
    maxNumSeqs: 8,
    maxNumBatchedTokens: 64,
    seed: 1,
    outputVocab: [100, 101, 102],
    hashRoot: noneHash(1),
  });
}

/** What a subscriber knows, per medium, from the events as the control plane decodes them. */
class Subscriber {
  readonly gpu = new Set<bigint>();
  readonly cpu = new Set<bigint>();
  readonly log: string[] = [];
  apply(events: KvEvent[]): void {
    const r = decodeBatch(encodeEventBatch(1, events, 0, "map"));
    if (!r.ok) throw new Error(r.error);
    expect(r.batch.errors).toEqual({});
    for (const ev of r.batch.events) {
      if (ev.type === "AllBlocksCleared") {
        this.gpu.clear();
        this.cpu.clear();
        continue;
      }
      const set = ev.medium === "CPU" ? this.cpu : this.gpu;
      this.log.push(`${ev.type === "BlockStored" ? "+" : "-"}${ev.medium}`);
      for (const h of ev.hashes) {
        if (ev.type === "BlockStored") set.add(h);
        else set.delete(h);
      }
      if (ev.type === "BlockStored" && ev.medium === "CPU") expect(ev.tokenIds).toEqual([]);
    }
  }
}

function run(e: Engine, sub: Subscriber): Array<ReturnType<Engine["schedule"]>> {
  const steps: Array<ReturnType<Engine["schedule"]>> = [];
  let t = 0;
  for (let s = e.schedule(); s; s = e.schedule()) {
    steps.push(s);
    t += s.durationMs;
    sub.apply(e.complete(s, t).events);
    expect(sub.gpu).toEqual(new Set(e.pool.cachedContents().keys()));
    expect(sub.cpu).toEqual(new Set(e.pool.cpu?.cachedHashes() ?? []));
  }
  return steps;
}

const promptA = Array.from({ length: 13 }, (_, i) => i + 1); // 3 full blocks
const promptB = Array.from({ length: 29 }, (_, i) => 200 + i); // needs all 8 GPU blocks

describe("simulated CPU offload tier", () => {
  it("moves GPU-evicted blocks to the CPU tier, publishing the copy before the GPU removal", () => {
    const e = engine(4);
    const sub = new Subscriber();
    e.add({ id: "a", promptTokens: promptA, maxTokens: 1 }, 0);
    run(e, sub);
    sub.log.length = 0;
    e.add({ id: "b", promptTokens: promptB, maxTokens: 1 }, 0);
    run(e, sub);
    expect(sub.cpu.size).toBe(3);
    // Per evicted block: its CPU copy, then its GPU removal; then B's own stores.
    expect(sub.log.slice(0, 6)).toEqual(["+CPU", "-GPU", "+CPU", "-GPU", "+CPU", "-GPU"]);
  });

  it("loads a prefix from the CPU tier: cached tokens, load time instead of prefill, GPU copy again", () => {
    const e = engine(4);
    const sub = new Subscriber();
    for (const [id, p] of [
      ["a", promptA],
      ["b", promptB],
    ] as const) {
      e.add({ id, promptTokens: p, maxTokens: 1 }, 0);
      run(e, sub);
    }
    const again = e.add({ id: "c", promptTokens: promptA, maxTokens: 1 }, 0);
    const [first] = run(e, sub);
    expect(again.cachedTokens).toBe(12);
    expect(first?.loadedTokens).toBe(12);
    expect(first?.prefillTokens).toBe(1);
    expect(first?.durationMs).toBeCloseTo(stepDurationMs(DEFAULT_LATENCY, first as never), 12);
    // Back on the GPU (the events say so too: run() checked the subscriber after every step).
    expect(e.probeCachedTokens(promptA, {})).toBe(12);
    // Without the tier the same request recomputes the prefix, which takes longer.
    const plain = engine(0);
    const sub0 = new Subscriber();
    for (const [id, p] of [
      ["a", promptA],
      ["b", promptB],
    ] as const) {
      plain.add({ id, promptTokens: p, maxTokens: 1 }, 0);
      run(plain, sub0);
    }
    plain.add({ id: "c", promptTokens: promptA, maxTokens: 1 }, 0);
    const [cold] = run(plain, sub0);
    expect(cold?.prefillTokens).toBe(13);
    expect(first?.durationMs).toBeLessThan(cold?.durationMs as number);
    expect(sub0.cpu.size).toBe(0);
  });

  it("bounds the tier: its least recently used block goes first, published as a CPU removal", () => {
    const e = engine(2);
    const sub = new Subscriber();
    for (const [id, p] of [
      ["a", promptA],
      ["b", promptB],
    ] as const) {
      e.add({ id, promptTokens: p, maxTokens: 1 }, 0);
      run(e, sub);
    }
    expect(sub.cpu.size).toBe(2);
    expect(sub.log).toContain("-CPU");
    // A reset clears both tiers (one AllBlocksCleared).
    expect(e.resetPrefixCache()).toBe(true);
    sub.apply(e.drainEvents());
    expect([sub.gpu.size, sub.cpu.size, e.pool.cpu?.size]).toEqual([0, 0, 0]);
  });
});
