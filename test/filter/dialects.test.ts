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
// Engines: 0 vLLM internal (ranks 0-3), 1 vLLM hybrid (start rank 4; it reports ranks 5-6 only,
// rank 4 is missing), 2-3 vLLM external (one rank each), 4 SGLang (ranks 0-1), 5 Dynamo aggregated
// worker, 6-7 Dynamo prefill (ranks 2-3) / decode (ranks 0-1), 8 SGLang with the body rank, 9
// Dynamo aggregated with a tokenizer (cache salts).
beforeAll(async () => {
  stack = await startStack({
    engines: [[0, 1, 2, 3], [5, 6], [0], [1], [0, 1], [0, 1], [2, 3], [0, 1], [0, 1], [0, 1]],
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
        // Round robin visits both ranks in order (kv-aware would follow the gateway's order of
        // equal slots, which can keep to one rank while the load image stays the same).
        policy: "round-robin",
        // Ranks discovered from /metrics: the header is rank − startRank, not rank − lowest seen.
        endpoints: [{ address: e[1]?.address, ranks: "auto", startRank: 4 }],
      },
      {
        name: "ve",
        models: ["ve"],
        dpMode: "external",
        policy: "round-robin",
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
        // Both prefill ranks in turn (see vh); the decode rank is least-load's, ties at random.
        policy: "round-robin",
        tokenizer: QWEN,
        endpoints: [
          { address: e[6]?.address, ranks: [2, 3], role: "prefill", workerId: "111" },
          { address: e[7]?.address, ranks: [0, 1], role: "decode", workerId: "222" },
        ],
      },
      {
        name: "dt",
        models: ["dt"],
        engine: "dynamo",
        tokenizer: QWEN,
        endpoints: [{ address: e[9]?.address, ranks: [0, 1], workerId: "333" }],
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

  it("vLLM hybrid LB: the local index (global rank − start rank), also when the start rank is not seen", async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 12; i++) seen.add(String((await routed("vh")).headers["x-data-parallel-rank"]));
    expect(seen).toEqual(new Set(["1", "2"]));
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

  it("Dynamo disaggregated: prefill worker and rank, decode worker and rank, never swapped", async () => {
    // Prefill ranks (2, 3) and decode ranks (0, 1) differ, so a prefill rank written as the
    // decode rank (or the other way round) shows.
    const decode = new Set<string>();
    const prefill = new Set<string>();
    for (let i = 0; i < 16; i++) {
      const r = await routed("dd");
      expect(r.engine).toBe(7);
      expect(r.headers).toMatchObject({
        "x-dynamo-worker-instance-id": "222",
        "x-dynamo-prefill-instance-id": "111",
        "x-dynamo-routing-mode": "disaggregated",
      });
      expect(r.headers["x-worker-instance-id"]).toBeUndefined();
      decode.add(String(r.headers["x-dynamo-dp-rank"]));
      prefill.add(String(r.headers["x-dynamo-prefill-dp-rank"]));
    }
    expect(decode).toEqual(new Set(["0", "1"]));
    expect(prefill).toEqual(new Set(["2", "3"]));
  });
});

describe("client routing headers never reach an engine", () => {
  // Each header kvroute may set, sent by the client with a value kvroute would never write.
  const CLIENT: Record<string, string> = {
    "x-gateway-destination-endpoint": "203.0.113.9:80",
    "x-dynamo-worker-instance-id": "999",
    "x-worker-instance-id": "999",
    "x-dynamo-prefill-instance-id": "998",
    "x-prefill-instance-id": "998",
    "x-dynamo-prefill-dp-rank": "7",
    "x-prefill-dp-rank": "7",
    "x-dynamo-routing-mode": "bogus",
    "x-dynamo-dp-rank": "7",
    "x-dp-rank": "7",
    "x-data-parallel-rank": "7",
  };

  it.each(Object.keys(CLIENT))("%s, in every dialect", async (name) => {
    for (const model of ["vi", "ve", "sg", "da", "dd"]) {
      const r = await post(stack, "/v1/chat/completions", chatBody("system", "q", model), {
        [name]: CLIENT[name] as string,
      });
      expect(r.status, `${model} ${name}`).toBe(200);
      const got = lastHit(stack)?.headers[name];
      expect(got === undefined || got !== CLIENT[name], `${model} ${name}: ${got}`).toBe(true);
    }
    // Aggregated Dynamo: kvroute writes no prefill headers, so none may arrive at all.
    await post(stack, "/v1/chat/completions", chatBody("system", "q", "da"), {
      [name]: CLIENT[name] as string,
    });
    const h = lastHit(stack)?.headers ?? {};
    expect(h["x-dynamo-prefill-instance-id"]).toBeUndefined();
    expect(h["x-prefill-dp-rank"]).toBeUndefined();
    expect(h["x-dynamo-routing-mode"]).toBe("aggregated");
  });
});

describe("Dynamo cache salt: x-tenant-id", () => {
  // A short prefix: worth less than one queued request of unknown size (QUEUED_TOKENS), so a
  // finished request still in the fleet count (it lags by a report) must not be charged to it.
  const system = `${"You are the tenant-salted assistant of a test. ".repeat(12)}`;
  const hit = async (model: string, headers: Record<string, string>, salt?: string) => {
    const before = Number(stack.gateway.host.counter("kvroute.requests.load_only") ?? 0);
    const body = JSON.parse(chatBody(system, "same question", model)) as Record<string, unknown>;
    if (salt !== undefined) body.cache_salt = salt;
    const r = await post(stack, "/v1/chat/completions", JSON.stringify(body), headers);
    expect(r.status).toBe(200);
    expect(lastHit(stack)?.headers["x-tenant-id"]).toBe(headers["x-tenant-id"]);
    // Routed on a cached (or speculatively cached) prefix, or by load alone?
    return Number(stack.gateway.host.counter("kvroute.requests.load_only") ?? 0) === before;
  };

  it("salts a Dynamo pool's prefix hashes with the header, which wins over the body's cache_salt", async () => {
    expect(await hit("dt", { "x-tenant-id": "tenant-a" })).toBe(false);
    expect(await hit("dt", { "x-tenant-id": "tenant-a" })).toBe(true);
    // Another tenant shares nothing with tenant-a, nor with the unsalted prompt.
    expect(await hit("dt", { "x-tenant-id": "tenant-b" })).toBe(false);
    expect(await hit("dt", {})).toBe(false);
    // Header and body salt: Dynamo's frontend takes the header, so tenant-b's prefix is the one.
    expect(await hit("dt", { "x-tenant-id": "tenant-b" }, "tenant-c")).toBe(true);
    // The body salt alone still salts (tenant-a recorded above under the same salt).
    expect(await hit("dt", {}, "tenant-a")).toBe(true);
    // An empty header is no salt: the unsalted prefix.
    expect(await hit("dt", { "x-tenant-id": "" })).toBe(true);
  });

  it("leaves other engines' hashes alone: vLLM does not read x-tenant-id", async () => {
    expect(await hit("vi", { "x-tenant-id": "tenant-a" })).toBe(false);
    expect(await hit("vi", { "x-tenant-id": "tenant-b" })).toBe(true);
  });
});
