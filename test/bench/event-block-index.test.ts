import { describe, expect, it } from "vitest";
import { EventBlockIndex } from "../../bench/quality/policies/event-block-index.ts";
import { chainBlockKeys, ROOT_KEY } from "../../bench/quality/policies/token-blocks.ts";
import type { KvEvent } from "../../control-plane/sim/kv-events.ts";
import { createSimCluster } from "../../control-plane/sim/virtual-cluster.ts";

const ids = (n: number, from = 1) => Array.from({ length: n }, (_, i) => from + i);
const stored = (hashes: bigint[], parent: bigint | null, tokens: number[]): KvEvent => ({
  type: "BlockStored",
  blockHashes: hashes,
  parentBlockHash: parent,
  tokenIds: tokens,
  blockSize: 4,
  loraName: null,
  extraKeys: null,
});

describe("chained block keys", () => {
  it("continue a chain from any key: a prompt's keys equal its blocks' keys chained from their parents", () => {
    const t = ids(12);
    const whole = chainBlockKeys(t, 4);
    expect(whole).toHaveLength(3);
    expect(chainBlockKeys(t.slice(4), 4, whole[0])).toEqual(whole.slice(1));
    expect(chainBlockKeys(t.slice(0, 11), 4)).toEqual(whole.slice(0, 2)); // partial block dropped
    expect(chainBlockKeys(t, 4, ROOT_KEY + 1)[0]).not.toBe(whole[0]); // another parent, another key
    expect(chainBlockKeys([2, 1, 3, 4], 4)[0]).not.toBe(whole[0]); // order matters
  });
});

describe("event block index", () => {
  it("learns blocks from BlockStored chains, only after the delay", () => {
    const idx = new EventBlockIndex(2, 4, 50);
    const t = ids(12);
    idx.receive(1, [stored([10n, 11n], null, t.slice(0, 8))], 100);
    idx.receive(1, [stored([12n], 11n, t.slice(8, 12))], 120);
    const keys = chainBlockKeys(t, 4);
    idx.advance(149);
    expect(idx.prefixDepths(keys, 149)).toEqual([0, 0]);
    idx.advance(150);
    expect(idx.prefixDepths(keys, 150)).toEqual([0, 2]);
    idx.advance(170);
    expect(idx.prefixDepths(keys, 170)).toEqual([0, 3]);
    expect(idx.sizes).toEqual([0, 3]);
  });

  it("removes blocks on BlockRemoved and everything of a rank on AllBlocksCleared", () => {
    const idx = new EventBlockIndex(2, 4, 0);
    const t = ids(8);
    idx.receive(0, [stored([1n, 2n], null, t)], 0);
    idx.receive(1, [stored([1n, 2n], null, t)], 0);
    idx.receive(0, [{ type: "BlockRemoved", blockHashes: [2n, 99n] }], 1); // unknown hash ignored
    idx.receive(1, [{ type: "AllBlocksCleared" }], 2);
    const keys = chainBlockKeys(t, 4);
    idx.advance(1);
    expect(idx.prefixDepths(keys, 1)).toEqual([1, 2]);
    idx.advance(2);
    expect(idx.prefixDepths(keys, 2)).toEqual([1, 0]);
    expect(idx.sizes).toEqual([1, 0]);
  });

  it("a gap stops the run: a rank holding blocks 0 and 2 but not 1 matches one block", () => {
    const idx = new EventBlockIndex(1, 4, 0);
    const t = ids(12);
    idx.receive(0, [stored([1n, 2n, 3n], null, t)], 0);
    idx.receive(0, [{ type: "BlockRemoved", blockHashes: [2n] }], 0);
    idx.advance(0);
    expect(idx.prefixDepths(chainBlockKeys(t, 4), 0)).toEqual([1]);
  });

  it("skips a BlockStored whose parent it never saw (it cannot chain the keys)", () => {
    const idx = new EventBlockIndex(1, 4, 0);
    idx.receive(0, [stored([5n], 4n, ids(4, 5))], 0);
    idx.advance(0);
    expect(idx.sizes).toEqual([0]);
  });

  it("speculative entries count only when asked for, until they lapse; events never remove them", () => {
    const idx = new EventBlockIndex(2, 4, 0);
    const keys = chainBlockKeys(ids(8), 4);
    idx.speculate(0, keys, 1000);
    expect(idx.prefixDepths(keys, 10)).toEqual([0, 0]);
    expect(idx.prefixDepths(keys, 10, true)).toEqual([2, 0]);
    idx.receive(0, [{ type: "AllBlocksCleared" }], 20);
    idx.advance(20);
    expect(idx.prefixDepths(keys, 999, true)).toEqual([2, 0]);
    expect(idx.prefixDepths(keys, 1000, true)).toEqual([0, 0]);
  });

  it("mirrors a simulated engine's cache exactly from its own events", () => {
    const bs = 16;
    const idx = new EventBlockIndex(2, bs, 0);
    const c = createSimCluster({
      dataParallelSize: 2,
      numGpuBlocks: 40,
      blockSize: bs,
      seed: 3,
      onKvEvents: (rank, events, at) => idx.receive(rank, events, at),
    });
    const prompts = [ids(300), ids(300, 2), [...ids(200), ...ids(100, 900)]];
    for (const [i, p] of prompts.entries()) c.submit({ tokens: p, maxTokens: 20, rank: i % 2 }, i * 5);
    c.runUntilIdle();
    idx.advance(c.nowMs);
    for (const p of prompts) {
      const keys = chainBlockKeys(p, bs);
      const depths = idx.prefixDepths(keys, c.nowMs);
      for (let r = 0; r < 2; r++) {
        const truth = c.cachedContents(r).size > 0 ? c.engines[r]?.probeCachedTokens(p, {}) : 0;
        // The engine caps a hit at prompt − 1 tokens; the index reports whole held blocks.
        expect(Math.min(depths[r] as number, Math.floor((p.length - 1) / bs)) * bs).toBe(truth);
      }
    }
    expect(idx.sizes).toEqual([c.cachedContents(0).size, c.cachedContents(1).size]);
  });
});
