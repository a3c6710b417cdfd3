// Through the endpoint picker, each engine gets the rank headers the filter writes for its
// dialect (they come from the filter itself): vLLM internal and external LB, SGLang with the body
// rank (and content-length rewritten to the new body), Dynamo aggregated and disaggregated.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ExchangeResult } from "./envoy-ext-proc.ts";
import {
  chatBody,
  type EppStack,
  eppSynced,
  header,
  JSON_HEADERS,
  QWEN,
  startEppStack,
  until,
  upstream,
} from "./stack.ts";

let s: EppStack;
// Engines: 0 vLLM internal (ranks 0-3), 1-2 vLLM external (one rank each), 3 SGLang with body
// rank (0-1), 4 Dynamo aggregated, 5-6 Dynamo prefill / decode.
beforeAll(async () => {
  s = await startEppStack({
    engines: [[0, 1, 2, 3], [0], [1], [0, 1], [0, 1], [0], [0, 1]],
    pools: (e) => [
      {
        name: "vi",
        models: ["vi"],
        tokenizer: QWEN,
        endpoints: [{ address: e[0]?.address, ranks: [0, 1, 2, 3] }],
      },
      {
        name: "ve",
        models: ["ve"],
        dpMode: "external",
        endpoints: [
          { address: e[1]?.address, ranks: [0] },
          { address: e[2]?.address, ranks: [1] },
        ],
      },
      {
        name: "sb",
        models: ["sb"],
        engine: "sglang",
        sglangBodyRank: true,
        endpoints: [{ address: e[3]?.address, ranks: [0, 1] }],
      },
      {
        name: "da",
        models: ["da"],
        engine: "dynamo",
        endpoints: [{ address: e[4]?.address, ranks: [0, 1], workerId: "18446744073709551615" }],
      },
      {
        name: "dd",
        models: ["dd"],
        engine: "dynamo",
        tokenizer: QWEN,
        endpoints: [
          { address: e[5]?.address, ranks: [0], role: "prefill", workerId: "111" },
          { address: e[6]?.address, ranks: [0, 1], role: "decode", workerId: "222" },
        ],
      },
    ],
  });
  await until(() => s.cp.ready(), "control plane ready");
  await eppSynced(s.cp);
}, 60_000);
afterAll(async () => s?.close());

const RANK_HEADERS = [
  "x-data-parallel-rank",
  "x-dynamo-worker-instance-id",
  "x-worker-instance-id",
  "x-dynamo-dp-rank",
  "x-dp-rank",
  "x-dynamo-prefill-instance-id",
  "x-dynamo-prefill-dp-rank",
  "x-dynamo-routing-mode",
];

function rankHeaders(r: ExchangeResult): Record<string, string> {
  return Object.fromEntries(
    RANK_HEADERS.flatMap((n) => {
      const v = header(r.upstreamHeaders, n);
      return v === undefined ? [] : [[n, v]];
    }),
  );
}

for (const mode of ["FULL_DUPLEX_STREAMED", "BUFFERED"] as const) {
  const route = (model: string, body = chatBody("system", `question for ${model}`, model)) =>
    s.client.exchange({ path: "/v1/chat/completions", headers: JSON_HEADERS, body }, upstream, { mode });

  describe(`rank headers through the picker (${mode})`, () => {
    it("vLLM internal LB: the global rank", async () => {
      const r = await route("vi");
      expect(r.destination).toBe(s.engines[0]?.address);
      expect(Object.keys(rankHeaders(r))).toEqual(["x-data-parallel-rank"]);
      expect(["0", "1", "2", "3"]).toContain(rankHeaders(r)["x-data-parallel-rank"]);
    });

    it("vLLM external LB: no rank header, the port is the rank; the other rank's port is the fallback", async () => {
      for (let i = 0; i < 4; i++) {
        const r = await route("ve");
        expect(rankHeaders(r)).toEqual({});
        expect([s.engines[1]?.address, s.engines[2]?.address]).toContain(r.served);
        expect(r.destination?.split(",")).toEqual([
          r.served,
          r.served === s.engines[1]?.address ? s.engines[2]?.address : s.engines[1]?.address,
        ]);
      }
    });

    it("SGLang with the body rank: routed_dp_rank written last, content-length follows the new body", async () => {
      const body = JSON.stringify({
        model: "sb",
        messages: [{ role: "user", content: "hi" }],
        routed_dp_rank: 1,
      });
      const r = await route("sb", body);
      const rank = rankHeaders(r)["x-data-parallel-rank"];
      expect(["0", "1"]).toContain(rank);
      const sent = r.upstreamBody.toString();
      expect(sent.endsWith(`,"routed_dp_rank":${rank}}`)).toBe(true);
      expect(JSON.parse(sent).routed_dp_rank).toBe(Number(rank));
      expect(header(r.upstreamHeaders, "content-length")).toBe(String(r.upstreamBody.length));
      const hit = s.engines[3]?.hits.at(-1);
      expect(hit?.body).toBe(sent);
    });

    it("Dynamo aggregated: worker id, dp rank, routing mode", async () => {
      const r = await route("da");
      const h = rankHeaders(r);
      expect(h["x-dynamo-worker-instance-id"]).toBe("18446744073709551615");
      expect(["0", "1"]).toContain(h["x-dynamo-dp-rank"]);
      expect(h["x-dynamo-routing-mode"]).toBe("aggregated");
      expect(h["x-dynamo-prefill-instance-id"]).toBeUndefined();
      // The headers name the worker: no fallback could take them.
      expect(r.destination).toBe(s.engines[4]?.address);
    });

    it("Dynamo disaggregated: prefill worker and rank, decode worker and rank; the decode worker is the destination", async () => {
      const r = await route("dd");
      const h = rankHeaders(r);
      expect(h["x-dynamo-worker-instance-id"]).toBe("222");
      expect(h["x-dynamo-prefill-instance-id"]).toBe("111");
      expect(h["x-dynamo-prefill-dp-rank"]).toBe("0");
      expect(h["x-dynamo-routing-mode"]).toBe("disaggregated");
      expect(r.destination).toBe(s.engines[6]?.address);
    });

    it("client rank and routing headers never reach the engine (the filter's stripping)", async () => {
      const r = await s.client.exchange(
        {
          path: "/v1/chat/completions",
          headers: [
            ...JSON_HEADERS,
            ["x-dynamo-prefill-instance-id", "999"],
            ["x-dynamo-routing-mode", "disaggregated"],
            ["x-dp-rank", "3"],
          ],
          body: chatBody("s", "q", "da"),
        },
        upstream,
        { mode },
      );
      const h = rankHeaders(r);
      expect(h["x-dynamo-prefill-instance-id"]).toBeUndefined();
      expect(h["x-dynamo-routing-mode"]).toBe("aggregated");
      expect(h["x-dp-rank"]).toBeUndefined();
    });
  });
}
