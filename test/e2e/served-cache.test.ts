// Predicted vs served cache hits end to end: clients → gateway (build/kvroute.wasm in the Node
// host) → simulated vLLM workers with --enable-prompt-tokens-details, the control plane fed by
// their real KV events. The gateway predicts the cached prefix of the slot it picks; the filter
// reads what the engine served from the answer as it streams to the client; the control plane
// shows both per slot. On a true prefix hit they are the same prefix, to within a chunk and a block.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SimTokenizer } from "../../control-plane/sim/tokenize.ts";
import { SERVED_CACHED, SERVED_USAGE } from "../../control-plane/src/reports/report-codec.ts";
import { detokenizedLength } from "../../control-plane/src/tokens/detokenize.ts";
import {
  buildTokenBytesTable,
  type TokenBytesTable,
} from "../../control-plane/src/tokens/token-bytes-table.ts";
import { loadTokenizerFiles } from "../../control-plane/src/tokens/tokenizer-files.ts";
import { QWEN3 } from "../sim/helpers.ts";
import { type E2E, MODEL, startE2E, synced, until } from "./harness.ts";

/** The control plane's default chunk size (config schema `cache.chunkSize`) and vLLM's block. */
const CHUNK = 128;
const BLOCK = 16;

interface Decision {
  requestId: string;
  slotKey: string | null;
  promptBytes: number;
  cachedBytes: number;
  servedFlags?: number;
  servedCachedTokens?: number;
  served: number | null;
}

let e: E2E;
let table: TokenBytesTable;
const tok = SimTokenizer.load(QWEN3);
beforeAll(async () => {
  e = await startE2E({ workers: 1, ranks: 2 });
  await until(() => e.cp?.ready() === true, "control plane ready");
  await synced(e);
  const built = buildTokenBytesTable(loadTokenizerFiles(QWEN3).tokenizer);
  if (!built.ok) throw new Error(built.reason);
  table = built.table;
}, 60_000);
afterAll(async () => e?.close());

const system = "You are the on-call assistant for a GPU fleet; answer with exact kubectl commands. ".repeat(
  30,
);
const messages = (user: string) => [
  { role: "system", content: system },
  { role: "user", content: user },
];

/** Bytes of the rendered prompt's first n tokens: the byte stream the gateway hashes. */
function bytesOfTokens(user: string, n: number): number {
  const ids = tok.encodeChat(messages(user));
  const len = detokenizedLength(table, ids.slice(0, n));
  if (typeof len !== "number") throw new Error("prompt does not detokenize");
  return len;
}

async function ask(id: string, user: string, extra: Record<string, unknown> = {}) {
  const res = await fetch(`${e.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": id },
    body: JSON.stringify({ model: MODEL, messages: messages(user), max_tokens: 4, ...extra }),
  });
  const text = await res.text();
  expect(res.status).toBe(200);
  let usage:
    | { prompt_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null }
    | undefined;
  if (extra.stream === true) {
    for (const line of text.split("\n")) {
      if (!line.startsWith("data: {")) continue;
      const u = JSON.parse(line.slice(6)).usage;
      if (u) usage = u;
    }
  } else usage = JSON.parse(text).usage;
  return { usage, cachedHeader: Number(res.headers.get("x-kvroute-sim-cached-tokens") ?? -1) };
}

async function decision(id: string): Promise<Decision> {
  let d: Decision | undefined;
  await until(async () => {
    const status = (await (await fetch(`${e.cp?.url}/v1/status`)).json()) as { recentDecisions: Decision[] };
    d = status.recentDecisions.find((x) => x.requestId === id);
    return d !== undefined;
  }, `report of ${id}`);
  return d as Decision;
}

describe("predicted vs served, end to end on the simulator", () => {
  it("a true prefix hit: the engine served the prefix the gateway predicted", async () => {
    const cold = await ask("cold", "How do I drain a node?");
    expect(cold.cachedHeader).toBe(0);
    // vLLM's shape for 0 cached tokens: usage, details null.
    expect(cold.usage?.prompt_tokens_details ?? null).toBeNull();
    const c = await decision("cold");
    expect(c.servedFlags).toBe(SERVED_USAGE);
    expect(c.served).toBeNull(); // this engine has not shown details yet: unknown, not 0

    await until(() => (e.cp?.index.chunks.size ?? 0) > 10, "KV events indexed");
    await synced(e);
    const user = "And how do I cordon it first?";
    const hit = await ask("hit", user);
    const served = hit.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    expect(served).toBeGreaterThan(0);
    expect(served).toBe(hit.cachedHeader);
    const h = await decision("hit");
    expect(h.slotKey).toBe(c.slotKey);
    expect(h).toMatchObject({
      servedFlags: SERVED_USAGE | SERVED_CACHED,
      servedCachedTokens: served,
      served,
    });
    // The same prefix in two units: the gateway's whole chunks of bytes, the engine's whole
    // blocks of tokens (never the prompt's last one). They differ by less than a chunk plus a block.
    const servedBytes = bytesOfTokens(user, served);
    const blockBytes = bytesOfTokens(user, served + BLOCK) - servedBytes;
    console.log(
      `prefix hit: predicted ${h.cachedBytes} bytes (${h.promptBytes} in the prompt); served ${served} tokens = ${servedBytes} bytes`,
    );
    expect(h.cachedBytes % CHUNK).toBe(0);
    expect(Math.abs(h.cachedBytes - servedBytes)).toBeLessThan(CHUNK + blockBytes);
    expect(h.cachedBytes).toBeGreaterThan(system.length * 0.9);
  });

  it("reads a stream's final usage event with include_usage; without it the engine did not say", async () => {
    const withUsage = await ask("stream-usage", "What should I watch while draining?", {
      stream: true,
      stream_options: { include_usage: true },
    });
    const served = withUsage.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    expect(served).toBeGreaterThan(0);
    expect(await decision("stream-usage")).toMatchObject({ servedCachedTokens: served, served });

    await ask("stream-plain", "And after the drain?", { stream: true });
    const plain = await decision("stream-plain");
    expect(plain.servedFlags).toBe(0);
    expect(plain.served).toBeNull();
  });

  it("adds them up per slot in /metrics", async () => {
    const text = await (await fetch(`${e.cp?.url}/metrics`)).text();
    const h = await decision("hit");
    const sum = (name: string, served?: string) =>
      text
        .split("\n")
        .filter(
          (l) =>
            l.startsWith(`${name}{`) &&
            l.includes(`slot="${h.slotKey}"`) &&
            (served === undefined || l.includes(`served="${served}"`)),
        )
        .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    const hitServed = h.servedCachedTokens ?? 0;
    const streamed = (await decision("stream-usage")).servedCachedTokens ?? 0;
    expect(sum("kvroute_served_cached_tokens_total")).toBe(hitServed + streamed);
    expect(sum("kvroute_served_cache_requests_total", "known")).toBe(2);
    expect(sum("kvroute_served_cache_requests_total", "unknown")).toBe(2);
    expect(sum("kvroute_predicted_cached_tokens_total", "known")).toBeGreaterThan(0);
  });
});
