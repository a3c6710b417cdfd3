import { describe, expect, it } from "vitest";
import { type ClusterConfig, runOne } from "../../bench/quality/harness.ts";
import {
  ActiveSequences,
  allWorkersBusy,
  dynamoDefaultPolicy,
  dynamoLogit,
  pickLowestLogit,
  potentialDecodeBlocks,
  potentialPrefillBlocks,
} from "../../bench/quality/policies/dynamo-default.ts";
import type { BenchRequest } from "../../bench/quality/workloads/types.ts";
import { Rng } from "../../control-plane/sim/rng.ts";

describe("Dynamo default selector terms (scheduler.rs @ db19bd2, sequence.rs @ 581ee33)", () => {
  it.each([
    // active tokens, isl, overlap blocks, block size → potential prefill blocks
    [0, 160, 0, 16, 10],
    [32, 160, 4, 16, (32 + 96) / 16],
    [0, 160, 10, 16, 0], // fully cached: nothing new to prefill
    [48, 170, 10, 16, (48 + 10) / 16], // the partial tail is always new
  ])(
    "active %d + isl %d − %d cached blocks (bs %d) → %d prefill blocks",
    (active, isl, overlap, bs, want) => {
      expect(potentialPrefillBlocks(active, isl, overlap, bs)).toBeCloseTo(want, 12);
    },
  );

  it.each([
    [0, 10, 10],
    [25, 0, 25],
    [25, 3, 28],
  ])("active blocks %d + new blocks %d → %d decode blocks", (active, fresh, want) => {
    expect(potentialDecodeBlocks(active, fresh)).toBe(want);
  });

  it("logit = overlap weight · prefill blocks + decode blocks", () => {
    expect(dynamoLogit(8, 5, 1)).toBe(13);
    expect(dynamoLogit(8, 5, 2)).toBe(21);
    expect(dynamoLogit(8, 5, 0)).toBe(5);
  });
});

describe("Dynamo ActiveSequences", () => {
  it("counts distinct prompt blocks of active requests; a request's new blocks are the ones not active", () => {
    const s = new ActiveSequences();
    s.add("a", [1, 2, 3], 48);
    s.add("b", [1, 2, 4], 16);
    expect(s.activeBlocks).toBe(4);
    expect(s.newBlocks([1, 2, 3, 5, 6])).toBe(2);
    expect(s.newBlocks([])).toBe(0);
    s.free("a");
    expect(s.activeBlocks).toBe(3); // 1 and 2 still held by b
    expect(s.newBlocks([3])).toBe(1);
  });

  it("drops a request's prefill tokens at its first token, once, and at free", () => {
    const s = new ActiveSequences();
    s.add("a", [1], 100);
    s.add("b", [2], 30);
    expect(s.activeTokens).toBe(130);
    s.markPrefillCompleted("a");
    s.markPrefillCompleted("a"); // the second notice changes nothing
    expect(s.activeTokens).toBe(30);
    expect(s.activeBlocks).toBe(2); // blocks stay active until the request ends
    s.free("b");
    expect(s.activeTokens).toBe(0);
    s.free("a");
    expect(s.activeBlocks).toBe(0);
    s.free("unknown"); // freeing an unknown request is harmless
    expect(s.activeTokens).toBe(0);
  });
});

describe("Dynamo temperature-0 pick", () => {
  it("takes the lowest logit", () => {
    expect(pickLowestLogit([5, 3, 7, 3.5], [0, 0, 0, 0], new Rng(1))).toBe(1);
  });

  it("breaks a tie by the smaller tree", () => {
    for (let seed = 0; seed < 20; seed++)
      expect(pickLowestLogit([3, 3, 9], [50, 10, 0], new Rng(seed))).toBe(1);
  });

  it("breaks a tie of equal trees at random, never to a worse logit", () => {
    const picks = new Set(
      Array.from({ length: 64 }, (_, i) => pickLowestLogit([3, 3, 9, 3], [7, 7, 0, 7], new Rng(i))),
    );
    expect(picks).toEqual(new Set([0, 1, 3]));
  });

  it("among tied logits, picks at random among the ranks with the smallest tree only", () => {
    const picks = new Set(
      Array.from({ length: 64 }, (_, i) => pickLowestLogit([2, 2, 2], [4, 1, 1], new Rng(i))),
    );
    expect(picks).toEqual(new Set([1, 2]));
  });
});

describe("Dynamo router queue (queue.rs @ db19bd2) through the harness", () => {
  it.each([
    // active prefill tokens per rank, threshold, max batched → all busy
    [[40, 40], 1, 32, true],
    [[40, 32], 1, 32, false], // a rank at exactly the threshold has room
    [[0, 500], 4, 64, false],
    [[257, 300], 4, 64, true],
  ])("active %j, threshold %d × %d → busy %s", (active, threshold, max, want) => {
    expect(allWorkersBusy(active, threshold, max)).toBe(want);
  });

  it("holds requests while every rank is busy, releases them at first tokens, counts TTFT from first arrival", () => {
    // 4.0 × 16 batched tokens = 64: one 100-token prompt makes a rank busy, so of six
    // simultaneous prompts on two ranks four wait in the router's queue.
    const cluster: ClusterConfig = {
      workers: 1,
      ranksPerWorker: 2,
      blockSize: 16,
      numGpuBlocks: 400,
      maxNumSeqs: 64,
      maxNumBatchedTokens: 16,
      statsIntervalMs: 100,
      kvEventDelayMs: 0,
      tickMs: 10,
      maxVirtualMs: 600_000,
    };
    const request = (i: number): BenchRequest => ({
      id: `r${i}`,
      messages: [],
      maxTokens: 4,
      tokens: Array.from({ length: 100 }, (_, k) => 1000 * (i + 1) + k),
      body: new Uint8Array(),
      messagesJson: "",
      routingText: "",
    });
    const out = runOne(
      { arrivals: Array.from({ length: 6 }, (_, i) => ({ atMs: 0, request: request(i) })) },
      dynamoDefaultPolicy,
      cluster,
      1,
      [7, 8, 9],
    );
    expect(out.unfinished).toBe(0);
    expect(out.results).toHaveLength(6);
    expect(out.counters.queued).toBe(4);
    for (const r of out.results) expect(r.arrivalMs).toBe(0);
    // The two admitted first: their first tokens come before any held request's.
    const ttft = out.results.map((r) => r.ttftMs).sort((a, b) => a - b);
    expect(ttft[2]).toBeGreaterThan(ttft[1] as number);
  });
});
