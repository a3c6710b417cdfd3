// Session affinity end to end on the simulator: clients → gateway (build/kvroute.wasm in the Node
// host) → simulated vLLM workers (two workers of two ranks, real KV events). A conversation keeps
// its (worker, rank) from turn to turn by its x-session-id alone — each turn here opens with a new
// system prompt, so no cached prefix draws it back — and when its worker stops answering the
// session moves to a live one and stays there.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chat, type E2E, startE2E, synced, until } from "./harness.ts";

const SESSIONS = 6;

let e: E2E;
beforeAll(async () => {
  e = await startE2E({ workers: 2, ranks: 2 });
  await until(() => e.cp?.ready() === true, "control plane ready");
  await synced(e);
}, 60_000);
afterAll(async () => e?.close());

const turn = (id: string, n: number) =>
  chat(e, `turn ${n} of ${id}: you are a careful assistant. `.repeat(8), "continue", {
    headers: { "x-session-id": id },
  });

describe("session affinity on the simulator", () => {
  it("keeps each conversation on its worker and rank across turns whose prompts share nothing", async () => {
    // The first turns at once, so the gateway's own requests spread them (one after another, each
    // would follow the gateway's order of equal slots while the load image stays the same).
    const ids = Array.from({ length: SESSIONS }, (_, i) => `conv-${i}`);
    const firsts = await Promise.all(ids.map((id) => turn(id, 0)));
    const where = new Map<string, string>();
    for (const [i, r] of firsts.entries()) {
      expect(r.status).toBe(200);
      where.set(ids[i] as string, `${r.worker}/${r.rank}`);
    }
    // A scrape taken during that burst would price its queues against the sessions' slots: the
    // next turns start once every engine shows idle and the gateway has that image.
    await until(
      () =>
        e.cp?.slots.present().every((s) => {
          const l = e.cp?.load.get(s.id);
          return l !== undefined && l.running === 0 && l.waiting === 0;
        }) === true,
      "the engines idle after the first turns",
    );
    await synced(e);
    for (let n = 1; n <= 2; n++)
      for (const [id, at] of where) {
        const r = await turn(id, n);
        expect(`${r.worker}/${r.rank}`, `${id} turn ${n}`).toBe(at);
      }
    expect(new Set(where.values()).size).toBeGreaterThan(1);
    expect(Number(e.gateway.host.counter("kvroute.session.kept") ?? 0)).toBe(2 * SESSIONS);
  });

  it("moves a conversation off a worker that stopped answering, and keeps it on the new one", async () => {
    const first = await turn("survivor", 0);
    const dead = first.worker;
    await e.stopWorker(dead);
    await until(
      () =>
        e.cp?.slots
          .present()
          .every((s) => !s.address.endsWith(`:${e.workers[dead]?.port}`) || !e.cp?.load.get(s.id).healthy) ===
        true,
      "the worker unhealthy",
    );
    await synced(e);
    const moved = await turn("survivor", 1);
    expect(moved.status).toBe(200);
    expect(moved.worker).toBe(1 - dead);
    for (let n = 2; n < 5; n++) {
      const r = await turn("survivor", n);
      expect([r.worker, r.rank]).toEqual([moved.worker, moved.rank]);
    }
    await e.startWorker(dead);
  }, 30_000);
});
