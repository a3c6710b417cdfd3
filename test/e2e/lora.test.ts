// LoRA adapters end to end: simulated vLLM workers serving adapters over one base model
// (--enable-lora, adapter-keyed block hashes, lora_name in KV events, vllm:lora_requests_info,
// /v1/models with `parent`), the control plane learning the adapters and the engines' loaded
// ones, and the gateway (build/kvroute.wasm) hashing an adapter's request with its name and
// preferring the slot that runs it; two gateways place a new adapter on the same slot.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../host/gateway.ts";
import { chat, type E2E, MODEL, type Routed, startE2E, synced, until } from "./harness.ts";

const ADAPTERS = ["sql-lora", "chat-lora", "legal-lora"];

let e: E2E;
beforeAll(async () => {
  e = await startE2E({
    workers: 2,
    ranks: 2,
    // Slow enough that a long answer keeps its adapter running across several scrapes.
    sim: { loraNames: ADAPTERS, lora: { maxLoras: 1, loadMs: 5 }, timeScale: 0.5 },
    // One adapter configured; the others come from the workers' /v1/models.
    pool: { adapters: ["sql-lora"] },
    load: { modelsIntervalMs: 200 },
    cache: { speculativeTtlMs: 100 },
  });
  await until(() => e.cp?.ready() === true, "control plane ready");
  await until(() => e.cp?.adapters.adapters("qwen").length === 3, "adapters discovered");
  await synced(e);
}, 60_000);
afterAll(async () => e?.close());

const system = (tag: string) =>
  `${tag}: you are a careful SQL reviewer for a payments company; answer with the query only. `.repeat(25);

interface Decision {
  requestId: string;
  cachedBytes: number;
  promptBytes: number;
}

/** The gateway's prediction for a request, as its report reached the control plane. */
async function predicted(id: string): Promise<Decision> {
  let d: Decision | undefined;
  await until(async () => {
    const status = (await (await fetch(`${e.cp?.url}/v1/status`)).json()) as { recentDecisions: Decision[] };
    d = status.recentDecisions.find((x) => x.requestId === id);
    return d !== undefined;
  }, `decision ${id} reported`);
  return d as Decision;
}

const where = (r: Routed) => `${r.worker}/${r.rank}`;

/** The slot running an adapter: its worker and rank as the e2e reports them, and its slot id. */
type BusySlot = { worker: number; rank: number; id: number };

describe("LoRA adapters end to end", () => {
  it("learns the adapters: configured first, then those /v1/models lists over the pool's model", () => {
    expect(e.cp?.adapters.adapters("qwen")).toEqual(["sql-lora", "chat-lora", "legal-lora"]);
  });

  it("an adapter's prompt finds its own blocks; the same prompt on the base model or another adapter does not", async () => {
    const s = system("adapter prefix");
    const before = e.cp?.index.chunks.size ?? 0;
    const first = await chat(e, s, "Find duplicate charges.", { model: "chat-lora" });
    expect(first.status).toBe(200);
    expect(first.cached).toBe(0);
    await until(() => (e.cp?.index.chunks.size ?? 0) > before + 10, "the adapter's blocks indexed");
    await synced(e);

    const again = await chat(e, s, "Find refunds over $100.", { model: "chat-lora", requestId: "lora-hit" });
    expect(where(again)).toBe(where(first));
    expect(again.cached / again.promptTokens).toBeGreaterThan(0.8);
    const hit = await predicted("lora-hit");
    expect(hit.cachedBytes / hit.promptBytes).toBeGreaterThan(0.8);

    // The base model's blocks of the same text have other hashes (vLLM keys adapter blocks by
    // name): neither the engine nor the gateway sees a hit, wherever it goes, and the index
    // gains the text's chunks a second time.
    const before2 = e.cp?.index.chunks.size ?? 0;
    const base = await chat(e, s, "Find refunds over $100.", { model: MODEL, requestId: "base-miss" });
    expect(base.status).toBe(200);
    expect(base.cached).toBe(0);
    expect((await predicted("base-miss")).cachedBytes).toBe(0);
    await until(() => (e.cp?.index.chunks.size ?? 0) > before2 + 10, "the base model's blocks indexed");
    await synced(e);
    // ... and the other way round: another adapter finds neither.
    const other = await chat(e, s, "Find refunds over $100.", {
      model: "legal-lora",
      requestId: "other-miss",
    });
    expect(other.status).toBe(200);
    expect(other.cached).toBe(0);
    expect((await predicted("other-miss")).cachedBytes).toBe(0);
  });

  it("an unknown adapter is an unknown model: 404, no routing", async () => {
    const r = await fetch(`${e.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "no-such-lora", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(r.status).toBe(404);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("model_not_found");
  });

  it("sends an adapter's requests to the slot running it and other adapters elsewhere (max_loras 1)", async () => {
    const cp = e.cp;
    if (cp === null) throw new Error("no control plane");
    const abort = new AbortController();
    const sentAt = Date.now();
    // Streamed, so the gateway sees its first byte and counts it as decoding, not as a prefill ahead.
    let longEnded = false;
    const long = fetch(`${e.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      signal: abort.signal,
      body: JSON.stringify({
        model: "sql-lora",
        messages: [{ role: "user", content: system("long answer") }],
        max_tokens: 3000,
        stream: true,
      }),
    })
      .then((r) => r.text())
      .catch(() => null)
      .finally(() => {
        longEnded = true;
      });
    try {
      let running: BusySlot | null = null;
      await until(() => {
        const slot = cp.slots.present().find((s) => cp.load.get(s.id).lora?.running.includes("sql-lora"));
        if (slot === undefined) return false;
        running = {
          worker: e.workers.findIndex((w) => slot.address.endsWith(`:${w.port}`)),
          rank: slot.globalRank,
          id: slot.id,
        };
        return true;
      }, "the engine reports sql-lora running");
      await synced(e);
      // Past the gateway's own memory of that route (speculativeTtlMs): the metric decides now.
      await until(() => Date.now() - sentAt > 400, "the gateway's recent route expired");
      const busy = running as unknown as BusySlot;
      for (let i = 0; i < 4; i++) {
        // The previous answer has left the busy slot's queue in the engine's metrics and the gateway
        // routes with that image: a scrape taken while it waited would price a queue there (on a
        // loaded CI machine it did, and the request rightly went to an idle slot).
        await until(() => cp.load.get(busy.id).waiting === 0, "the busy slot's queue drained in its metrics");
        await synced(e);
        const r = await chat(e, system(`unrelated ${i}`), "q", { model: "sql-lora" });
        expect(r.status).toBe(200);
        expect(longEnded, "the long answer must still be decoding").toBe(false);
        // The busy slot (one long decode) over three idle ones: the adapter is loaded there.
        const loads = cp.slots.present().map((sl) => ({ slot: sl.key, ...cp.load.get(sl.id) }));
        expect([r.worker, r.rank], JSON.stringify(loads)).toEqual([busy.worker, busy.rank]);
      }
      // Another adapter cannot join that slot's batch (max_loras 1): it goes elsewhere.
      const other = await chat(e, system("other adapter"), "q", { model: "legal-lora" });
      expect(other.status).toBe(200);
      expect([other.worker, other.rank], "legal-lora must avoid the full slot").not.toEqual([
        busy.worker,
        busy.rank,
      ]);
    } finally {
      abort.abort();
      await long;
    }
  });

  it("two gateways place an adapter no slot runs on the same slot (its home order, not each gateway's own)", async () => {
    const cp = e.cp;
    if (cp === null) throw new Error("no control plane");
    const b: Gateway = await e.addGateway("e2e-gateway-b");
    // Both gateways in every gateway's roster (kvr.gw): each then has its share of the slots, which
    // other requests prefer, and its own order of near-equal slots.
    const roster = (g: Gateway) => {
      const v = g.host.sharedData("kvr.gw");
      return v === null ? 0 : Buffer.from(v.value).readUInt16LE(6);
    };
    await until(() => roster(e.gateway) === 2 && roster(b) === 2, "both gateways in the roster");
    for (const [i, adapter] of ["chat-lora", "legal-lora", "sql-lora"].entries()) {
      // Idle engines in the metrics both gateways route with: no slot runs an adapter, all have room.
      await until(
        () =>
          cp.slots
            .present()
            .every((sl) => cp.load.get(sl.id).running === 0 && cp.load.get(sl.id).waiting === 0),
        "every slot idle",
      );
      await synced(e);
      await synced(e, b);
      const [viaA, viaB] = await Promise.all([
        chat(e, system(`novel a ${i}`), "q", { model: adapter }),
        chat(e, system(`novel b ${i}`), "q", { model: adapter, via: b }),
      ]);
      expect([viaA.status, viaB.status]).toEqual([200, 200]);
      expect(where(viaB), adapter).toBe(where(viaA));
    }
  });
});
