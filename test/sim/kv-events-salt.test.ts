// cache_salt end to end: a simulated vLLM worker publishes a salted request's blocks the way vLLM
// does (the salt in the first block's extra_keys), the control plane indexes them, and the
// gateway running build/kvroute.wasm routes by them. A request with the same salt is a prefix hit
// on the rank holding the salted blocks; the same prompt unsalted, or with another salt, is not —
// and the engine agrees (it reports no cached tokens for them).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type E2E, MODEL, startE2E, synced, until } from "../e2e/harness.ts";

let e: E2E;
beforeAll(async () => {
  e = await startE2E({ workers: 1, ranks: 2 });
  await until(() => e.cp?.ready() === true, "control plane ready");
  await synced(e);
}, 60_000);
afterAll(async () => e?.close());

// Long enough (~2.7k tokens) that what the cache saves outweighs a few requests' worth of load:
// the gateway's in-flight counts can lag a request that has already answered.
const system = "You answer questions about one tenant's private handbook, briefly and exactly. ".repeat(180);

interface Served {
  status: number;
  rank: number;
  cached: number;
  promptTokens: number;
}

/** A chat with an optional raw `cache_salt` JSON value, sent to `url` (gateway or engine). */
async function chat(url: string, user: string, saltJson: string | null, rank?: number): Promise<Served> {
  const messages = JSON.stringify([
    { role: "system", content: system },
    { role: "user", content: user },
  ]);
  const salt = saltJson === null ? "" : `,"cache_salt":${saltJson}`;
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(rank === undefined ? {} : { "x-data-parallel-rank": String(rank) }),
    },
    body: `{"model":"${MODEL}","messages":${messages},"max_tokens":2${salt}}`,
  });
  const body = (await res.json()) as { usage?: { prompt_tokens?: number } };
  return {
    status: res.status,
    rank: Number(res.headers.get("x-kvroute-sim-rank") ?? -1),
    cached: Number(res.headers.get("x-kvroute-sim-cached-tokens") ?? -1),
    promptTokens: body.usage?.prompt_tokens ?? 0,
  };
}

/** No request running or in flight anywhere, and the gateway has that view: the choice between
 * ranks then rests on the cache alone (a stale in-flight count weighs more than a short prompt). */
async function idle(): Promise<void> {
  const cp = e.cp;
  if (cp === null) throw new Error("no control plane");
  await until(
    () =>
      cp.slots.present().every((s) => {
        const l = cp.load.get(s.id);
        return l.running === 0 && l.waiting === 0 && l.inflight === 0;
      }),
    "idle engines",
  );
  await synced(e);
}

const hits = () =>
  ["prefix_hit", "speculative_hit"].map((n) => Number(e.gateway.host.counter(`kvroute.requests.${n}`) ?? 0));

describe("cache_salt through events, index and filter", () => {
  it("salted blocks are hit by the same salt only", async () => {
    const engineUrl = `http://127.0.0.1:${e.workers[0]?.port}`;
    const cp = e.cp;
    if (cp === null) throw new Error("no control plane");
    // Seed rank 1 directly at the engine, so no gateway speculation is involved: whatever the
    // gateway later knows about these blocks comes from the KV events alone.
    const seeded = await chat(engineUrl, "What is the leave policy?", '"tenant-a"', 1);
    expect([seeded.status, seeded.rank, seeded.cached]).toEqual([200, 1, 0]);
    const slot = cp.slots.present().find((s) => s.globalRank === 1);
    if (slot === undefined) throw new Error("no slot for rank 1");
    const engineBlocks = async () => {
      const dump = (await (await fetch(`${engineUrl}/kvroute/sim/cache?rank=1`)).json()) as Record<
        string,
        Array<{ hash: string }>
      >;
      return (dump["1"] ?? []).map((b) => BigInt(b.hash));
    };
    const want = await engineBlocks();
    expect(want.length).toBeGreaterThan(10);
    await until(() => {
      const held = new Set(cp.index.slot(slot.key)?.blockHashes() ?? []);
      return want.every((h) => held.has(h));
    }, "the salted blocks indexed");
    await idle();

    // Same salt, same system prompt: the index knows rank 1 holds it.
    const [hit0] = hits();
    const again = await chat(e.url, "And the expense policy?", '"tenant-a"');
    expect(hits()[0]).toBe((hit0 as number) + 1);
    expect(again.rank).toBe(1);
    expect(again.cached / again.promptTokens).toBeGreaterThan(0.8);

    // The same prompt unsalted, with another salt, or with a near miss of it: no hit anywhere,
    // in the gateway's view or the engine's.
    for (const other of [null, '"tenant-b"', '"Tenant-a"', '"tenant-a "', '"tenant-"']) {
      await idle();
      const before = hits();
      const r = await chat(e.url, "And the expense policy?", other);
      expect(r.status).toBe(200);
      expect(hits()).toEqual(before);
      expect(r.cached).toBe(0);
    }

    // A JSON escape spells the same salt: both the filter and the engine decode it.
    await idle();
    const [p, s] = hits();
    const escaped = await chat(e.url, "And the travel policy?", '"tenant\\u002da"');
    expect((hits()[0] as number) + (hits()[1] as number)).toBe((p as number) + (s as number) + 1);
    expect(escaped.rank).toBe(1);
    expect(escaped.cached / escaped.promptTokens).toBeGreaterThan(0.8);
  }, 60_000);
});
