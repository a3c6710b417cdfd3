// The chosen rank reaches the engine in the header each dialect reads (REFERENCE §1.2, §2, §3).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  chatBody,
  type FakeEngine,
  lastHit,
  post,
  QWEN,
  type Stack,
  startStack,
  synced,
  until,
} from "./harness.ts";

let stack: Stack;
// Engines: 0 vLLM internal (ranks 0-3), 1 vLLM hybrid (ranks 4-5 of 8), 2-3 vLLM external (one
// rank each), 4 SGLang (ranks 0-1), 5 Dynamo aggregated worker, 6-7 Dynamo prefill / decode.
beforeAll(async () => {
  stack = await startStack({
    engines: [[0, 1, 2, 3], [4, 5], [0], [1], [0, 1], [0, 1], [0], [0, 1], [0, 1]],
    pools: (e: FakeEngine[]) => [
      {
        name: "vi",
        models: ["vi"],
        tokenizer: QWEN,
        endpoints: [{ address: e[0]?.address, ranks: [0, 1, 2, 3] }],
      },
      {
        name: "vh",
        models: ["vh"],
        dpMode: "hybrid",
        endpoints: [{ address: e[1]?.address, ranks: [4, 5], startRank: 4 }],
      },
      {
        name: "ve",
        models: ["ve"],
        dpMode: "external",
        endpoints: [
          { address: e[2]?.address, ranks: [0] },
          { address: e[3]?.address, ranks: [1] },
        ],
      },
      {
        name: "sg",
        models: ["sg"],
        engine: "sglang",
        endpoints: [{ address: e[4]?.address, ranks: [0, 1] }],
      },
      {
        name: "sb",
        models: ["sb"],
        engine: "sglang",
        sglangBodyRank: true,
        endpoints: [{ address: e[8]?.address, ranks: [0, 1] }],
      },
      {
        name: "da",
        models: ["da"],
        engine: "dynamo",
        dynamoLegacyHeaders: true,
        endpoints: [{ address: e[5]?.address, ranks: [0, 1], workerId: "18446744073709551615" }],
      },
      {
        name: "dd",
        models: ["dd"],
        engine: "dynamo",
        tokenizer: QWEN,
        endpoints: [
          { address: e[6]?.address, ranks: [0], role: "prefill", workerId: "111" },
          { address: e[7]?.address, ranks: [0, 1], role: "decode", workerId: "222" },
        ],
      },
    ],
  });
  await until(() => stack.cp.ready(), "control plane ready");
  await synced(stack);
});
afterAll(async () => stack?.close());

async function routed(model: string) {
  const r = await post(stack, "/v1/chat/completions", chatBody("system", `question for ${model}`, model));
  expect(r.status).toBe(200);
  const hit = lastHit(stack);
  if (hit === undefined) throw new Error("no engine hit");
  const h = hit.headers;
  const pick = (names: string[]) =>
    Object.fromEntries(names.filter((n) => h[n] !== undefined).map((n) => [n, h[n]]));
  return {
    engine: stack.engines.indexOf(stack.engines.find((e) => e.address === hit.engine) as FakeEngine),
    destination: h["x-gateway-destination-endpoint"],
    engineAddress: hit.engine,
    headers: pick([
      "x-data-parallel-rank",
      "x-dynamo-worker-instance-id",
      "x-worker-instance-id",
      "x-dynamo-dp-rank",
      "x-dp-rank",
      "x-dynamo-prefill-instance-id",
      "x-prefill-instance-id",
      "x-dynamo-prefill-dp-rank",
      "x-prefill-dp-rank",
      "x-dynamo-routing-mode",
    ]),
  };
}

describe("rank headers per dialect", () => {
  it("vLLM internal LB: the global rank", async () => {
    const r = await routed("vi");
    expect(r.engine).toBe(0);
    expect(r.destination).toBe(r.engineAddress);
    expect(Object.keys(r.headers)).toEqual(["x-data-parallel-rank"]);
    expect(["0", "1", "2", "3"]).toContain(r.headers["x-data-parallel-rank"]);
  });

  it("vLLM hybrid LB: the local index (global rank − start rank)", async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 12; i++) seen.add(String((await routed("vh")).headers["x-data-parallel-rank"]));
    expect(seen).toEqual(new Set(["0", "1"]));
  });

  it("vLLM external LB: no rank header, the port is the rank", async () => {
    const engines = new Set<number>();
    for (let i = 0; i < 12; i++) {
      const r = await routed("ve");
      expect(r.headers).toEqual({});
      engines.add(r.engine);
    }
    expect(engines).toEqual(new Set([2, 3]));
  });

  it("SGLang: x-data-parallel-rank", async () => {
    const r = await routed("sg");
    expect(r.engine).toBe(4);
    expect(["0", "1"]).toContain(r.headers["x-data-parallel-rank"]);
  });

  it("SGLang with the body rank: routed_dp_rank written last, over a client's own value", async () => {
    for (const body of [
      JSON.stringify({ model: "sb", messages: [{ role: "user", content: "hi" }], routed_dp_rank: 1 }),
      JSON.stringify({ model: "sb", routed_dp_rank: 0, messages: [{ role: "user", content: "ho" }] }),
    ]) {
      const r = await post(stack, "/v1/chat/completions", body);
      expect(r.status, r.text).toBe(200);
      const hit = lastHit(stack);
      const received = JSON.parse(hit?.body ?? "{}") as { routed_dp_rank: number };
      expect(String(received.routed_dp_rank)).toBe(hit?.headers["x-data-parallel-rank"]);
      expect(Number(hit?.headers["content-length"])).toBe(Buffer.byteLength(hit?.body ?? ""));
      expect(hit?.body).toMatch(/"routed_dp_rank":\d+}$/);
    }
  });

  it("Dynamo aggregated: worker id, DP rank, routing mode, and the legacy aliases when asked", async () => {
    const r = await routed("da");
    expect(r.engine).toBe(5);
    const rank = r.headers["x-dynamo-dp-rank"];
    expect(r.headers).toEqual({
      "x-dynamo-worker-instance-id": "18446744073709551615",
      "x-worker-instance-id": "18446744073709551615",
      "x-dynamo-dp-rank": rank,
      "x-dp-rank": rank,
      "x-dynamo-routing-mode": "aggregated",
    });
  });

  it("Dynamo disaggregated: prefill worker and rank, decode worker and rank", async () => {
    const r = await routed("dd");
    expect(r.engine).toBe(7);
    expect(r.headers).toMatchObject({
      "x-dynamo-worker-instance-id": "222",
      "x-dynamo-prefill-instance-id": "111",
      "x-dynamo-prefill-dp-rank": "0",
      "x-dynamo-routing-mode": "disaggregated",
    });
    expect(["0", "1"]).toContain(r.headers["x-dynamo-dp-rank"]);
    expect(r.headers["x-worker-instance-id"]).toBeUndefined();
  });
});
