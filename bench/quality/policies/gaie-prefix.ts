// GAIE's approximate prefix-cache scorer with its default scorer weights: the picker never sees
// KV events; it remembers which blocks of *text* it sent where.
// Upstream: github.com/kubernetes-sigs/gateway-api-inference-extension, the prefix plugin
// (pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go, v1.3.0 generation, and its
// successor under pkg/epp/framework/plugins/scheduling/scorer/prefix @ 567bd0be3990fe24448f429fd17f6c60cdd3f0fe),
// as read by the independent review (issue #15): with autoTune the block is the server's
// block size × 4 characters (16 × 4 = 64) and each server's LRU holds as many entries as that
// server has GPU blocks (vllm:cache_config_info num_gpu_blocks); the trailing partial block is
// hashed too. Older releases (plugin.go @ 00913f92 and before) dropped it and used a fixed
// 31250-entry LRU (GAIE_LRU_CAPACITY, kept for the record).
// - blocks: 64-byte blocks of json(messages), at most the first 256, the last one partial;
//   chained xxhash64 — each block hashed with the previous block's hash appended, the chain
//   seeded with the model name's hash, using the routing core's XXH64 through the Wasm loader;
// - per server an LRU of block hashes, capacity = its GPU block count;
// - prefix score = consecutive matched prefix blocks / blocks of the request;
// - queue score = (maxQ - q) / (maxQ - minQ) over the waiting-queue sizes (1 when all equal);
// - KV score = 1 - KV-cache utilisation;
// - total = 3 · prefix + 2 · queue + 2 · KV; the highest total wins (ties at random); the
//   chosen server's LRU then records every block of the request.
// Metrics are scraped every 50 ms (GAIE's default refresh interval).
import { mixSeed, Rng } from "../../../control-plane/sim/rng.ts";
import { xxh64 } from "../../../control-plane/src/core/kvroute-core.ts";
import { MODEL } from "../tokens.ts";
import { LruSet } from "./lru-set.ts";
import { type PolicyFactory, StaleLoads } from "./types.ts";

export const GAIE_BLOCK_CHARS = 64;
export const GAIE_MAX_BLOCKS = 256;
export const GAIE_LRU_CAPACITY = 31250;
export const GAIE_WEIGHTS = { prefix: 3, queue: 2, kvCache: 2 } as const;
const METRICS_REFRESH_MS = 50;

const utf8 = new TextEncoder();

export function gaieBlockHashes(text: string, model: string = MODEL): bigint[] {
  const bytes = utf8.encode(text);
  const out: bigint[] = [];
  let prev = xxh64(utf8.encode(model), 0n);
  const buf = new Uint8Array(GAIE_BLOCK_CHARS + 8);
  for (let at = 0; at < bytes.length && out.length < GAIE_MAX_BLOCKS; at += GAIE_BLOCK_CHARS) {
    // The last block may be partial: its bytes, then the previous hash, hashed as one input.
    const block = bytes.subarray(at, Math.min(at + GAIE_BLOCK_CHARS, bytes.length));
    const input = block.length === GAIE_BLOCK_CHARS ? buf : new Uint8Array(block.length + 8);
    input.set(block, 0);
    new DataView(input.buffer).setBigUint64(block.length, prev, true);
    prev = xxh64(input, 0n);
    out.push(prev);
  }
  return out;
}

export function prefixScore(blocks: readonly bigint[], lru: LruSet<bigint>): number {
  if (blocks.length === 0) return 0;
  let n = 0;
  while (n < blocks.length && lru.has(blocks[n] as bigint)) n++;
  return n / blocks.length;
}

export function queueScores(waiting: readonly number[]): number[] {
  const max = Math.max(...waiting);
  const min = Math.min(...waiting);
  return waiting.map((q) => (max === min ? 1 : (max - q) / (max - min)));
}

export function kvCacheScores(usage: readonly number[]): number[] {
  return usage.map((u) => 1 - u);
}

/** Index of the highest score; ties broken by `rng`. */
export function pickMax(scores: readonly number[], rng: Rng): number {
  const best = Math.max(...scores);
  const tied = scores.flatMap((s, i) => (s >= best - 1e-12 ? [i] : []));
  return tied[tied.length === 1 ? 0 : rng.int(tied.length)] as number;
}

export const gaiePrefixPolicy: PolicyFactory = {
  name: "gaie-approx",
  describe:
    "GAIE approximate prefix scorer (autoTune): 64-byte blocks of json(messages) incl. the trailing partial one, ≤256, " +
    "chained XXH64, per-server LRU sized to its GPU block count; " +
    "score 3·prefix + 2·queue + 2·KV, max wins; metrics every 50 ms",
  create(ctx) {
    const rng = new Rng(mixSeed(ctx.seed, 0x6a1e));
    const lrus = ctx.cluster.engines.map((e) => new LruSet<bigint>(e.config.numGpuBlocks));
    const metrics = new StaleLoads(METRICS_REFRESH_MS);
    return {
      tick: (now, loads) => metrics.tick(now, loads),
      choose(_view, request) {
        const blocks = gaieBlockHashes(request.messagesJson);
        const loads = metrics.loads;
        const queue = queueScores(lrus.map((_, r) => loads[r]?.waiting ?? 0));
        const kv = kvCacheScores(lrus.map((_, r) => loads[r]?.kvUsage ?? 0));
        const totals = lrus.map(
          (lru, r) =>
            GAIE_WEIGHTS.prefix * prefixScore(blocks, lru) +
            GAIE_WEIGHTS.queue * (queue[r] as number) +
            GAIE_WEIGHTS.kvCache * (kv[r] as number),
        );
        const rank = pickMax(totals, rng);
        const lru = lrus[rank] as LruSet<bigint>;
        for (const b of blocks) lru.touch(b);
        return rank;
      },
    };
  },
};
