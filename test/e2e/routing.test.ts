// End to end on loopback: clients (the official openai client and plain HTTP) → gateway
// (build/kvroute.wasm in the Node host) → simulated vLLM workers, with the control plane fed by
// their real ZMQ KV events.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chat, type E2E, MODEL, startE2E, synced, until } from "./harness.ts";

let e: E2E;
beforeAll(async () => {
  e = await startE2E({ workers: 2, ranks: 2 });
  await until(() => e.cp?.ready() === true, "control plane ready");
  await synced(e);
}, 60_000);
afterAll(async () => e?.close());

const system = (tag: string) =>
  `${tag}: you are a precise assistant for GPU fleet operators; answer in numbered steps. `.repeat(25);

describe("end to end", () => {
  it("sends a shared system prompt back to the rank that cached it; the engine reports the hit", async () => {
    const s = system("affinity");
    const first = await chat(e, s, "How do I drain a node?");
    expect(first.status).toBe(200);
    expect(first.cached).toBe(0);
    // The engine's KV events reach the control plane and come back to the gateway.
    await until(() => (e.cp?.index.chunks.size ?? 0) > 10, "KV events indexed");
    await synced(e);
    for (const q of [
      "How do I cordon it first?",
      "And how do I bring it back?",
      "What metrics should I watch?",
    ]) {
      const r = await chat(e, s, q);
      expect([r.worker, r.rank]).toEqual([first.worker, first.rank]);
      // Most of the prompt came from the cache: the system prompt's full blocks.
      expect(r.cached / r.promptTokens).toBeGreaterThan(0.8);
    }
  });

  it("spreads unrelated prompts over workers and ranks", async () => {
    // At once: the gateway's own unanswered requests spread them (one after another, the picks
    // among near-equal slots follow the gateway's order and can miss a slot under load).
    const all = await Promise.all(
      Array.from({ length: 24 }, (_, i) => chat(e, `${system(`unrelated ${i}`)}`, `q${i}`)),
    );
    for (const r of all) expect(r.status).toBe(200);
    const seen = new Set(all.map((r) => `${r.worker}/${r.rank}`));
    expect(seen.size).toBe(4);
  });

  it("works with the official openai client, streaming and not", async () => {
    const client = new OpenAI({ baseURL: `${e.url}/v1`, apiKey: "unused" });
    const s = system("openai");
    const { data, response } = await client.chat.completions
      .create({
        model: MODEL,
        messages: [
          { role: "system", content: s },
          { role: "user", content: "hello" },
        ],
        max_tokens: 4,
      })
      .withResponse();
    expect(data.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(response.headers.get("x-kvroute-sim-rank")).toMatch(/^[01]$/);

    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: "system", content: s },
        { role: "user", content: "stream please" },
      ],
      max_tokens: 6,
      stream: true,
      stream_options: { include_usage: true },
    });
    let chunks = 0;
    let usage: { prompt_tokens: number } | null | undefined = null;
    for await (const c of stream) {
      chunks++;
      if (c.usage) usage = c.usage;
    }
    expect(chunks).toBeGreaterThanOrEqual(6);
    expect(usage?.prompt_tokens).toBeGreaterThan(100);
  });

  it("passes the server-sent events through chunk by chunk", async () => {
    const res = await fetch(`${e.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, prompt: "Count to five:", max_tokens: 5, stream: true }),
    });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const text = await res.text();
    const events = text.split("\n\n").filter((x) => x.startsWith("data: "));
    expect(events.at(-1)).toBe("data: [DONE]");
    expect(events.length).toBeGreaterThanOrEqual(6);
  });
});
