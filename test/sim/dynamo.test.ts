// The Dynamo frontend mode: direct routing by x-dynamo-* headers (and legacy aliases) over
// simulated workers with DP ranks, aggregated and disaggregated.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DIRECT_MODE_ERROR,
  parseRustUint,
  type RunningDynamo,
  startDynamo,
} from "../../control-plane/sim/dynamo-frontend.ts";
import { onFreePortBase, post, simConfig } from "./helpers.ts";

let d: RunningDynamo;
const body = {
  model: "qwen3",
  prompt: "Dynamo routes this prompt exactly where the headers say. ".repeat(6),
  max_tokens: 3,
};

beforeAll(async () => {
  const base = simConfig();
  d = await startDynamo({
    ...base,
    dataParallelSize: 2,
    workers: [
      { instanceId: "7001", role: "aggregated" },
      { instanceId: "18446744073709551615", role: "aggregated" },
      { instanceId: "9001", role: "prefill" },
      { instanceId: "9002", role: "decode" },
    ],
  });
});

afterAll(async () => {
  await d.close();
});

const routing = (h: Headers) => JSON.parse(h.get("x-kvroute-sim-dynamo-routing") ?? "null");

describe("Dynamo frontend (direct routing)", () => {
  it("routes by x-dynamo-worker-instance-id and x-dynamo-dp-rank", async () => {
    const r = await post(d.port, "/v1/completions", body, {
      "x-dynamo-worker-instance-id": "18446744073709551615",
      "x-dynamo-dp-rank": "1",
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-kvroute-sim-worker")).toBe("18446744073709551615");
    expect(r.headers.get("x-kvroute-sim-rank")).toBe("1");
    expect(routing(r.headers)).toEqual({
      mode: "aggregated",
      workerId: "18446744073709551615",
      dpRank: 1,
      prefillWorkerId: null,
      prefillDpRank: null,
    });
    const again = await post(d.port, "/v1/completions", body, {
      "x-dynamo-worker-instance-id": "18446744073709551615",
      "x-dynamo-dp-rank": "1",
    });
    expect(Number(again.headers.get("x-kvroute-sim-cached-tokens"))).toBeGreaterThan(0);
    const elsewhere = await post(d.port, "/v1/completions", body, {
      "x-dynamo-worker-instance-id": "7001",
      "x-dynamo-dp-rank": "1",
    });
    expect(elsewhere.headers.get("x-kvroute-sim-cached-tokens")).toBe("0");
  });

  it("accepts the legacy aliases and x-data-parallel-rank; the current name wins", async () => {
    const legacy = await post(d.port, "/v1/completions", body, {
      "x-worker-instance-id": "7001",
      "x-dp-rank": "1",
    });
    expect(routing(legacy.headers)).toMatchObject({ workerId: "7001", dpRank: 1 });
    const dpr = await post(d.port, "/v1/completions", body, {
      "x-worker-instance-id": "7001",
      "x-data-parallel-rank": "0",
    });
    expect(routing(dpr.headers)).toMatchObject({ workerId: "7001", dpRank: 0 });
    const both = await post(d.port, "/v1/completions", body, {
      "x-dynamo-worker-instance-id": "7001",
      "x-worker-instance-id": "18446744073709551615",
      "x-dynamo-dp-rank": "0",
      "x-dp-rank": "1",
    });
    expect(routing(both.headers)).toMatchObject({ workerId: "7001", dpRank: 0 });
  });

  it("disaggregated: prefill on the prefill worker's rank, decode on the decode worker's", async () => {
    const r = await post(
      d.port,
      "/v1/chat/completions",
      { messages: [{ role: "user", content: "hi" }], max_tokens: 4 },
      {
        "x-dynamo-worker-instance-id": "9002",
        "x-dynamo-dp-rank": "0",
        "x-dynamo-prefill-instance-id": "9001",
        "x-dynamo-prefill-dp-rank": "1",
        "x-dynamo-routing-mode": "disaggregated",
      },
    );
    expect(r.status).toBe(200);
    expect(routing(r.headers)).toEqual({
      mode: "disaggregated",
      workerId: "9002",
      dpRank: 0,
      prefillWorkerId: "9001",
      prefillDpRank: 1,
    });
    expect(r.headers.get("x-kvroute-sim-prefill-rank")).toBe("1");
    expect(r.json.usage.completion_tokens).toBe(4);
    const prefillEngine = d.workers[2]?.ranks[1]?.rt.engine;
    const decodeEngine = d.workers[3]?.ranks[0]?.rt.engine;
    expect(prefillEngine?.counters.promptTokens).toBe(r.json.usage.prompt_tokens);
    expect(decodeEngine?.counters.generationTokens).toBe(4);
    // The sentinel 4294967295 means "no prefill rank": the prefill worker picks one itself.
    const s = await post(d.port, "/v1/completions", body, {
      "x-dynamo-worker-instance-id": "9002",
      "x-prefill-instance-id": "9001",
      "x-prefill-dp-rank": "4294967295",
    });
    expect(s.status).toBe(200);
    expect(routing(s.headers).prefillDpRank).toBeLessThan(2);
  });

  it("answers an error without a decode worker header, records everything it received", async () => {
    await fetch(`http://127.0.0.1:${d.port}/kvroute/sim/received`, { method: "DELETE" });
    const missing = await post(d.port, "/v1/completions", body, { "x-dynamo-dp-rank": "0" });
    expect(missing.status).toBe(500);
    expect(missing.json.error.message).toBe(DIRECT_MODE_ERROR);
    // An unparseable current header is not replaced by its alias (Rust: get().or_else()).
    const bad = await post(d.port, "/v1/completions", body, {
      "x-dynamo-worker-instance-id": "w7001",
      "x-worker-instance-id": "7001",
    });
    expect(bad.json.error.message).toBe(DIRECT_MODE_ERROR);
    const unknown = await post(d.port, "/v1/completions", body, { "x-dynamo-worker-instance-id": "5" });
    expect(unknown.json.error.message).toMatch(/not found/);
    const range = await post(d.port, "/v1/completions", body, {
      "x-dynamo-worker-instance-id": "7001",
      "x-dynamo-dp-rank": "2",
    });
    expect(range.json.error.message).toMatch(/out of range/);
    const noPrefill = await post(d.port, "/v1/completions", body, { "x-dynamo-worker-instance-id": "9002" });
    expect(noPrefill.json.error.message).toMatch(/prefill worker ID required/);
    const log = await (await fetch(`http://127.0.0.1:${d.port}/kvroute/sim/received`)).json();
    expect(log).toHaveLength(5);
    expect(log[0]).toEqual({
      path: "/v1/completions",
      headers: { "x-dynamo-dp-rank": "0" },
      decision: null,
      error: DIRECT_MODE_ERROR,
    });
    expect(log[1].headers).toEqual({
      "x-dynamo-worker-instance-id": "w7001",
      "x-worker-instance-id": "7001",
    });
  });

  it("x-tenant-id salts the cache like cache_salt", async () => {
    const h = { "x-dynamo-worker-instance-id": "7001", "x-dynamo-dp-rank": "0" };
    const b = { ...body, prompt: `${body.prompt} tenant test` };
    await post(d.port, "/v1/completions", b, h);
    const warm = await post(d.port, "/v1/completions", b, h);
    expect(Number(warm.headers.get("x-kvroute-sim-cached-tokens"))).toBeGreaterThan(0);
    const salted = await post(d.port, "/v1/completions", b, { ...h, "x-tenant-id": "t1" });
    expect(salted.headers.get("x-kvroute-sim-cached-tokens")).toBe("0");
  });

  it("publishes each worker's KV events on port + worker index × DP + rank", async () => {
    // The publishers bind (a wildcard host), so each of the four ports is really theirs.
    let base = 0;
    const dyn = await onFreePortBase((b) => {
      base = b;
      return startDynamo({
        ...simConfig(),
        dataParallelSize: 2,
        workers: [
          { instanceId: "1", role: "aggregated" },
          { instanceId: "2", role: "aggregated" },
        ],
        kvEvents: {
          enableKvCacheEvents: true,
          publisher: "zmq",
          endpoint: `tcp://*:${b}`,
          replayEndpoint: null,
          bufferSteps: 10,
          hwm: 10,
          maxQueueSize: 10,
          topic: "",
        },
      });
    });
    try {
      const eps = dyn.workers.flatMap((w) => w.ranks.map((r) => [r.rank, r.publisher?.endpoint]));
      expect(eps).toEqual([
        [0, `tcp://*:${base}`],
        [1, `tcp://*:${base + 1}`],
        [0, `tcp://*:${base + 2}`],
        [1, `tcp://*:${base + 3}`],
      ]);
    } finally {
      await dyn.close();
    }
  });

  it("exposes each worker's engines in /metrics with a worker_id label", async () => {
    const text = await (await fetch(`http://127.0.0.1:${d.port}/metrics`)).text();
    expect(text).toMatch(
      /^vllm:num_requests_running\{worker_id="9002",engine="1",model_name="qwen3"\} 0\.0$/m,
    );
    expect(text).toMatch(
      /^vllm:prefix_cache_hits_total\{worker_id="18446744073709551615",engine="1",model_name="qwen3"\} [1-9]/m,
    );
  });

  it("parses ids like Rust's u64/u32", () => {
    expect(parseRustUint("+7", 64)).toBe(7n);
    expect(parseRustUint("18446744073709551616", 64)).toBeNull();
    expect(parseRustUint("4294967296", 32)).toBeNull();
    expect(parseRustUint("-1", 32)).toBeNull();
    expect(parseRustUint(" 1", 32)).toBeNull();
  });
});
