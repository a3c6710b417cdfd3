// LoRA adapters through the endpoint picker (the embedded filter): an adapter's prompt goes back
// to the rank holding the adapter's blocks and the engine reports the hit; the same prompt on the
// base model is predicted uncached — the picker hashes an adapter's request with its name.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forward } from "./envoy-ext-proc.ts";
import { MODEL, type SimStack, startSimStack, storedBlocks } from "./sim-stack.ts";
import { eppSynced, until } from "./stack.ts";

let s: SimStack;
beforeAll(async () => {
  s = await startSimStack({
    workers: 2,
    ranks: 2,
    sim: { loraNames: ["sql-lora"], lora: { maxLoras: 1, loadMs: 5 } },
    pool: { adapters: ["sql-lora"] },
  });
  await until(() => s.cp.ready(), "control plane ready", 20_000);
  await eppSynced(s.cp);
}, 90_000);
afterAll(async () => s?.close());

const system = "you are a careful SQL reviewer for a payments company; answer with the query only. ".repeat(
  25,
);

async function ask(model: string, user: string, id: string) {
  const body = JSON.stringify({
    model,
    messages: [
      { role: "system", content: system },
      { role: "user", content: user },
    ],
    max_tokens: 4,
  });
  const r = await s.client.exchange(
    {
      path: "/v1/chat/completions",
      headers: [
        ["content-type", "application/json"],
        ["x-request-id", id],
      ],
      body,
    },
    forward,
    { mode: "FULL_DUPLEX_STREAMED" },
  );
  const h = new Map(r.response?.headers ?? []);
  return {
    status: r.response?.status,
    where: `${r.served}/${h.get("x-kvroute-sim-rank")}`,
    cached: Number(h.get("x-kvroute-sim-cached-tokens") ?? 0),
    prompt: Number(JSON.parse(r.response?.body.toString() ?? "{}").usage?.prompt_tokens ?? 0),
  };
}

async function predictedBytes(id: string): Promise<number> {
  let d: { cachedBytes: number } | undefined;
  await until(async () => {
    const st = (await (await fetch(`${s.cp.url}/v1/status`)).json()) as {
      recentDecisions: Array<{ requestId: string; cachedBytes: number }>;
    };
    d = st.recentDecisions.find((x) => x.requestId === id);
    return d !== undefined;
  }, `decision ${id}`);
  return (d as { cachedBytes: number }).cachedBytes;
}

describe("LoRA adapters through the picker", () => {
  it("finds an adapter's prefix by its name, and not for the base model", async () => {
    const before = storedBlocks(s.cp);
    const first = await ask("sql-lora", "Find duplicate charges.", "epp-lora-1");
    expect(first.status).toBe(200);
    // Every full block of the first prompt indexed, not just one: the engine's events can come in
    // several batches, and a partial prefix may lose to load (as in affinity.test.ts).
    const promptBlocks = Math.floor(first.prompt / 16);
    expect(promptBlocks).toBeGreaterThan(10);
    await until(() => storedBlocks(s.cp) - before >= promptBlocks, "the adapter's blocks indexed");
    await eppSynced(s.cp);
    const again = await ask("sql-lora", "Find refunds.", "epp-lora-2");
    expect(again.where).toBe(first.where);
    expect(again.cached / again.prompt).toBeGreaterThan(0.8);
    expect(await predictedBytes("epp-lora-2")).toBeGreaterThan(1000);
    const base = await ask(MODEL, "Find refunds.", "epp-base");
    expect(base.status).toBe(200);
    expect(base.cached).toBe(0);
    expect(await predictedBytes("epp-base")).toBe(0);
  });
});
