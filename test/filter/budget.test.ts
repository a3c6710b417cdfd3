// Shared data has no delete: whatever clients send, the gateway's key space and bytes stay
// within the budget the cache geometry sets (DESIGN §3).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUCKET_HEADER_BYTES, BUCKET_ROW_BYTES } from "../../control-plane/src/index/bucket-image.ts";
import { readBoard } from "./board.ts";
import { chatBody, post, type Stack, startStack, synced, until } from "./harness.ts";

const BUCKETS = 256;
const WAYS = 16;
/** cache.fullWays' default with full buckets keeping their newest (cache.fullKeep's default): all WAYS rows. */
const FULL_WAYS = WAYS;
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ engines: [[0, 1, 2, 3]], threads: 2, buckets: BUCKETS });
  await until(() => stack.cp.ready(), "control plane ready");
  await synced(stack);
});
afterAll(async () => stack?.close());

function sharedBytes(): { keys: string[]; bytes: number } {
  const host = stack.gateway.host;
  const keys = host.sharedDataKeys();
  let bytes = 0;
  for (const k of keys) bytes += k.length + (host.sharedData(k)?.value.length ?? 0);
  return { keys, bytes };
}

describe("shared-data budget", () => {
  it("stays within the bucket geometry after 10^6 distinct prompts' chunks reach the index", async () => {
    let keyBytes = 0;
    for (let b = 0; b < BUCKETS; b++) keyBytes += `kvr.b.${b}`.length;
    const bucketBudget = keyBytes + BUCKETS * (BUCKET_HEADER_BYTES + WAYS * BUCKET_ROW_BYTES);
    const before = sharedBytes();
    // Ten chunks for each of 100k distinct prompts → 10^6 distinct chunk hashes, as speculative
    // routes from gateways would write them (the same path KV events take into the index).
    const now = Date.now();
    let h = 0x9e3779b97f4a7c15n;
    for (let p = 0; p < 100_000; p++) {
      for (let d = 1; d <= 10; d++) {
        h = (h * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
        stack.cp.index.chunks.speculate(h, d, p % 4, now, now + 60_000);
      }
    }
    expect(stack.cp.index.chunks.size).toBe(1_000_000);
    await synced(stack);
    const after = sharedBytes();
    // No new keys: buckets are overwritten in place, never added.
    expect(new Set(after.keys)).toEqual(new Set(before.keys));
    // (The filter's own key, the board kvr.gwb, is bounded separately; see below.)
    const bucketBytes = after.keys
      .filter((k) => k.startsWith("kvr.b."))
      .reduce((n, k) => n + k.length + (stack.gateway.host.sharedData(k)?.value.length ?? 0), 0);
    expect(bucketBytes).toBeLessThanOrEqual(bucketBudget);
    // Every bucket indexes ~4000 chunks, so it is full and shows its fullWays rows: the churn
    // reached the gateway.
    const sample = stack.gateway.host.sharedData("kvr.b.7")?.value;
    expect(sample === undefined ? 0 : Buffer.from(sample).readUInt16LE(2)).toBe(FULL_WAYS);
    expect(after.bytes).toBeLessThan(bucketBudget + 64 * 1024);
  }, 120_000);

  it("keeps its speculative routes in the VMs and its board bounded however many distinct prompts the gateway routes", async () => {
    const before = new Set(stack.gateway.host.sharedDataKeys());
    for (let i = 0; i < 2000; i++)
      await post(stack, "/v1/chat/completions", chatBody(`distinct system prompt ${i} `.repeat(12), `q${i}`));
    await synced(stack);
    // Speculative routes live in each VM (a fixed table) and travel on the board's fixed ring: no
    // key is added but the board itself, whose size is its fixed part plus one section per VM.
    const added = stack.gateway.host.sharedDataKeys().filter((k) => !before.has(k));
    expect(added.filter((k) => k !== "kvr.gwb")).toEqual([]);
    const board = readBoard(stack.gateway.host);
    expect(board?.routeSeq).toBeGreaterThan(2000n);
    const threads = board?.sections.length ?? 0;
    expect(stack.gateway.host.sharedData("kvr.gwb")?.value.length).toBeLessThanOrEqual(
      40 + 256 * 4 + 128 * 24 + 6 * 256 + threads * (16 + 18 * 256),
    );
  }, 180_000);
});
