// One path, held to it: the endpoint picker and the inline filter (the Node host running the same
// build/kvroute.wasm, synced from the same control plane) decide the same for the same request
// on the same cache. A recorded trace — the demo's multi-turn chats over long shared system
// prompts, real Qwen3 tokenizer, real KV events from simulated vLLM workers — is replayed one
// request at a time: the control plane publishes, both data planes reach that version, the inline
// filter decides (its request is answered locally, never sent upstream), then the same request
// goes through the picker for real and to the engine it names. Destination and rank must match
// on every request, and the trace must exercise the prefix cache (most prompt tokens cached).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoRounds } from "../../control-plane/src/cli/demo-workload.ts";
import { type FilterChainSink, HeaderMap } from "../../host/index.ts";
import { readBoard } from "../filter/board.ts";
import { forward } from "./envoy-ext-proc.ts";
import { bothSynced, MODEL, type SimStack, startSimStack, storedBlocks } from "./sim-stack.ts";
import { header, until } from "./stack.ts";

let s: SimStack;
beforeAll(async () => {
  // One seed for both: an idle cluster's ties are broken alike (each thread's own seed otherwise).
  s = await startSimStack({ workers: 2, ranks: 2, manualPublish: true, seed: 7 });
  await until(
    () => {
      s.cp.publish();
      return s.cp.ready();
    },
    "control plane ready",
    20_000,
  );
  await bothSynced(s);
}, 90_000);
afterAll(async () => s?.close());

type Decision = { destination: string; rank: string | undefined };

/** No VM of `host` counts a request of its own any more (every section of its board lists no slot). */
function nothingQueued(host: {
  sharedData(key: string): { value: Uint8Array; cas: number } | null;
}): boolean {
  return (readBoard(host)?.sections ?? []).every((s) => s.entries.length === 0);
}

/** The inline filter's decision: the request headers it passes to the router. */
function inlineDecision(body: string): Decision {
  let passed: HeaderMap | null = null;
  let local = "";
  const sink: FilterChainSink = {
    requestHeaders: (h) => {
      passed = h;
    },
    requestData: () => {},
    requestTrailers: () => {},
    abortUpstream: () => {},
    responseHeaders: (h) => {
      if (passed === null) local = h.get(":status") ?? "?";
    },
    responseData: () => {},
    responseTrailers: () => {},
    resetDownstream: () => {},
    done: () => {},
  };
  const host = s.gateway;
  const stream = host.newStream(host.pickThread(), sink);
  const bytes = Buffer.from(body);
  stream.decodeHeaders(
    new HeaderMap([
      [":method", "POST"],
      [":path", "/v1/chat/completions"],
      [":authority", "gateway"],
      ["content-type", "application/json"],
      ["content-length", String(bytes.length)],
    ]),
    false,
  );
  stream.decodeData(bytes, true);
  const h = passed as HeaderMap | null;
  if (h === null) throw new Error(`the inline filter answered ${local} itself`);
  // The router would send it on; answer it here so the filter's stream ends (on_log) as usual.
  stream.encodeHeaders(new HeaderMap([[":status", "200"]]), true);
  return {
    destination: h.get("x-gateway-destination-endpoint") ?? "",
    rank: h.get("x-data-parallel-rank"),
  };
}

describe("the picker and the inline filter decide the same", () => {
  it("on every request of a recorded multi-turn trace", async () => {
    const trace = demoRounds(3, 3).flat();
    expect(trace.length).toBe(36);
    let cached = 0;
    let prompt = 0;
    const destinations = new Set<string>();
    let blocks = storedBlocks(s.cp);
    for (const [i, messages] of trace.entries()) {
      const body = JSON.stringify({ model: MODEL, messages, max_tokens: 4 });
      // The picker's previous stream may end (on_log) after its answer reached us: until it has,
      // it still counts as decoding at its slot, and the two data planes would not see the same.
      const picker = s.cp.epp?.filter.host;
      if (picker !== undefined) await until(() => nothingQueued(picker), "the picker's last request ended");
      // …and until its reports say so: the fleet count of unseen requests is another gateway's
      // load to the inline filter (the picker subtracts its own share), so both must read 0.
      await until(
        () => s.cp.slots.all().every((x) => s.cp.load.get(x.id).inflight === 0),
        "the picker's reports show no request in flight",
      );
      const version = await bothSynced(s);
      const inline = inlineDecision(body);
      const r = await s.client.exchange(
        { path: "/v1/chat/completions", headers: [["content-type", "application/json"]], body },
        forward,
      );
      const picked: Decision = {
        destination: r.destination?.split(",")[0] ?? "",
        rank: header(r.upstreamHeaders, "x-data-parallel-rank"),
      };
      expect(picked, `request ${i} at version ${version}`).toEqual(inline);
      destinations.add(`${picked.destination}#${picked.rank}`);
      const h = new Map(r.response?.headers ?? []);
      cached += Number(h.get("x-kvroute-sim-cached-tokens") ?? 0);
      prompt += Number(JSON.parse(r.response?.body.toString() ?? "{}").usage?.prompt_tokens ?? 0);
      // The engine's KV events for this request reach the index before the next step, so the
      // trace exercises the prefix cache rather than load alone.
      await until(() => storedBlocks(s.cp) > blocks, "the engine's KV events indexed");
      blocks = storedBlocks(s.cp);
    }
    // Both data planes saw the same cache, and the cache mattered.
    expect(destinations.size).toBeGreaterThan(1);
    expect(cached / prompt).toBeGreaterThan(0.5);
  }, 120_000);
});
