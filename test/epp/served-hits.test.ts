// Served hits in EPP mode: the embedded filter reads the engine's
// usage.prompt_tokens_details.cached_tokens from the response as the gateway streams it through
// the picker, and reports them next to its prediction, as the inline filter does — the same
// /v1/status fields and the same kvroute_predicted_cached_tokens_total /
// kvroute_served_cached_tokens_total series (docs/operations.md), in both body modes.
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatBody, type EppStack, eppSynced, JSON_HEADERS, startEppStack, until, upstream } from "./stack.ts";

interface Decision {
  requestId: string;
  slotKey: string | null;
  cachedBytes: number;
  servedFlags?: number;
  servedCachedTokens?: number;
}

const CACHED = 384;
let s: EppStack;
beforeAll(async () => {
  // External DP (one rank per engine): the destination is a list the gateway can walk.
  s = await startEppStack({
    engines: [[0], [1]],
    pools: (e) => [
      {
        name: "qwen",
        models: ["qwen3"],
        dpMode: "external",
        endpoints: [0, 1].map((i) => ({ address: e[i]?.address, ranks: [i] })),
      },
    ],
  });
  // The engine answers like vLLM with prompt-token details on: JSON, or SSE events for a
  // streamed request (stream_options.include_usage puts the usage in the last event).
  for (const e of s.engines)
    e.reply = (res: ServerResponse, hit) => {
      if (JSON.parse(hit.body).stream === true) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        for (let i = 0; i < 20; i++)
          res.write(`data: {"choices":[{"index":0,"delta":{"content":"t${i}"}}]}\n\n`);
        const usage = {
          prompt_tokens: 500,
          completion_tokens: 20,
          prompt_tokens_details: { cached_tokens: CACHED },
        };
        res.end(`data: ${JSON.stringify({ choices: [], usage })}\n\ndata: [DONE]\n\n`);
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: "chatcmpl-1",
          object: "chat.completion",
          choices: [{ index: 0, message: { role: "assistant", content: "hi" } }],
          usage: {
            prompt_tokens: 500,
            completion_tokens: 1,
            total_tokens: 501,
            prompt_tokens_details: { cached_tokens: CACHED },
          },
        }),
      );
    };
  await until(() => s.cp.ready(), "control plane ready");
  await eppSynced(s.cp);
}, 60_000);
afterAll(async () => s?.close());

async function reported(id: string): Promise<Decision> {
  let d: Decision | undefined;
  await until(async () => {
    const st = (await (await fetch(`${s.cp.url}/v1/status`)).json()) as { recentDecisions: Decision[] };
    d = st.recentDecisions.find((x) => x.requestId === id);
    return d !== undefined;
  }, `report of ${id}`);
  return d as Decision;
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${s.cp.url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) if (line.startsWith(`${name}{`)) sum += Number(line.split(" ").at(-1));
  return sum;
}

describe("served cached tokens through the picker", () => {
  for (const [mode, stream] of [
    ["FULL_DUPLEX_STREAMED", false],
    ["BUFFERED", false],
    ["FULL_DUPLEX_STREAMED", true],
  ] as const) {
    it(`${mode}${stream ? ", SSE" : ""}: the engine's cached_tokens reach the report and the served-hit metrics`, async () => {
      const before = await metric("kvroute_served_cached_tokens_total");
      const id = randomUUID();
      const r = await s.client.exchange(
        {
          path: "/v1/chat/completions",
          headers: [...JSON_HEADERS, ["x-request-id", id]],
          body: chatBody(
            "served hits",
            `q ${id}`,
            "qwen3",
            stream ? { stream, stream_options: { include_usage: true } } : {},
          ),
        },
        upstream,
        { mode },
      );
      expect(r.response?.status).toBe(200);
      const d = await reported(id);
      expect(d.servedCachedTokens).toBe(CACHED);
      await until(
        async () => (await metric("kvroute_served_cached_tokens_total")) === before + CACHED,
        "metric",
      );
    });
  }

  it("a request the gateway served from the next endpoint of the list reports its served tokens on that slot", async () => {
    const before = await metric("kvroute_served_cached_tokens_total");
    const id = randomUUID();
    // The best endpoint refuses the connection: the gateway retries the next one.
    const refuseFirst = (h: Array<[string, string]>, b: Buffer) => {
      const list = h.find(([k]) => k === "x-gateway-destination-endpoint")?.[1]?.split(",") ?? [];
      return upstream(
        h.map(([k, v]) => (k === "x-gateway-destination-endpoint" ? [k, list.slice(1).join(",")] : [k, v])),
        b,
      );
    };
    const r = await s.client.exchange(
      {
        path: "/v1/chat/completions",
        headers: [...JSON_HEADERS, ["x-request-id", id]],
        body: chatBody("served elsewhere", `q ${id}`),
      },
      refuseFirst,
    );
    expect(r.served).toBe(r.destination?.split(",")[1]);
    const d = await reported(id);
    expect(d.servedCachedTokens).toBe(CACHED);
    expect(d.slotKey).toContain(r.served);
    await until(
      async () => (await metric("kvroute_served_cached_tokens_total")) === before + CACHED,
      "metric",
    );
  });
});
