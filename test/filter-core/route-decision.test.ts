// The filter's routing decision, as it ships (build/kvroute.wasm in the Node host), on images from
// the control plane's encoders and bucket images from its real chunk index.
import { afterEach, describe, expect, it } from "vitest";
import { chat, QWEN, ShippedFilter, type ShippedFilterOptions } from "./shipped-filter.ts";

let open: ShippedFilter[] = [];
afterEach(() => {
  for (const f of open) f.close();
  open = [];
});
const fleet = (o: ShippedFilterOptions = {}) => {
  const f = new ShippedFilter(o);
  open.push(f);
  return f;
};

const longSystem = "You are a careful assistant who cites sources and keeps answers short. ".repeat(40);

describe("routing decision", () => {
  it("sends a prompt to the slot that holds its prefix", () => {
    const f = fleet();
    const body = chat(longSystem, "What is a KV cache?");
    f.hold(body, 2);
    f.publish();
    expect(f.route(body)).toMatchObject({ outcome: "prefix_hit", slot: 2 });
    // Same system prompt, another question: still the slot with the shared prefix.
    expect(f.route(chat(longSystem, "And a prefix cache?")).slot).toBe(2);
  });

  it("prefers the longest cached prefix", () => {
    const f = fleet();
    const body = chat(longSystem, "Tell me about data-parallel ranks.");
    const chunks = f.hold(body, 1, 5);
    f.hold(body, 3, chunks - 1);
    f.publish();
    expect(f.route(body)).toMatchObject({ outcome: "prefix_hit", slot: 3 });
  });

  it("leaves the cached slot when its queue outweighs the saving", () => {
    const f = fleet();
    const body = chat(longSystem, "q");
    f.hold(body, 2);
    f.load.scraped(2, { running: 40, waiting: 30, kvUsage: 0.9 }, 1);
    f.publish();
    const r = f.route(body);
    expect(r.slot).not.toBe(2);
    expect(r.slot).toBeGreaterThanOrEqual(0);
    expect(r.outcome).toBe("load_only");
  });

  it("holds a cached prefix against more queue while every candidate's engine shows one (saturated)", () => {
    const body = chat(longSystem, "q");
    // Slot 2 holds the prefix; the pool's slots 0..3 wait as given, the other pool's (4..6) not.
    const routedWith = (waiting: number[]) => {
      const f = fleet();
      f.hold(body, 2);
      for (const [s, w] of waiting.entries()) f.load.scraped(s, { running: 4, waiting: w, kvUsage: 0.5 }, 1);
      f.publish();
      return f.route(body).slot;
    };
    // Below saturation (idle slots beside it): the least extra queue at which the cached slot loses.
    let d = 1;
    while (d < 64 && routedWith([0, 0, d, 0]) === 2) d++;
    expect(d, "some queue outweighs the prefix").toBeLessThan(64);
    // The same extra queue over a queue everywhere: the prefix holds (SATURATED_MISS_SCALE) ...
    expect(routedWith([1, 1, 1 + d, 1])).toBe(2);
    // ... though not against any queue: twice that moves it.
    expect(routedWith([1, 1, 1 + 2 * d, 1])).not.toBe(2);
  });

  it("prices a queue blocked on admission as a wait for finishes, while another candidate admits at once", () => {
    // Slot 2 holds the prefix. Two scrapes: every slot runs 100; slot 2's queue goes from w + 1 to
    // w, with running flat (blocked: the engine admits only as others finish) or grown by one
    // (admitting as prefill allows). `others` is what the pool's other slots (0, 1, 3) wait.
    // `model`: the base model's name or an adapter's (the pool serves adapter "sql").
    const routedWith = (w: number, blocked: boolean, others = 0, model = "qwen3") => {
      const body = chat(longSystem.repeat(8), "q", model);
      const f = fleet({
        pools: [
          {
            name: "qwen",
            models: ["qwen3"],
            adapters: ["sql"],
            tokenizer: QWEN,
            endpoints: [{ address: "10.0.0.1:8000", ranks: [0, 1, 2, 3] }],
          },
        ],
      });
      f.hold(body, 2, Number.POSITIVE_INFINITY, undefined, model === "qwen3" ? undefined : model);
      // Every engine reports its adapters: "sql" runs everywhere, so its cost is alike on all.
      const lora = { maxLoras: 4, running: ["sql"], waiting: [] };
      const scrape = (running: number, waiting: number, t: number) => {
        for (const s of [0, 1, 3])
          f.load.scraped(s, { running: 100, waiting: others, kvUsage: 0.8, lora }, t);
        f.load.scraped(2, { running, waiting, kvUsage: 0.8, lora }, t);
        f.publish();
      };
      scrape(100, w + 1, 1);
      scrape(blocked ? 100 : 101, w, 2);
      return f.route(body).slot;
    };
    const leastMoving = (blocked: boolean, others = 0, model = "qwen3") => {
      let w = 1;
      while (w < 256 && routedWith(w, blocked, others, model) === 2) w++;
      return w;
    };
    const admitting = leastMoving(false);
    const blocked = leastMoving(true);
    expect(admitting, "some admitting queue outweighs the prefix").toBeLessThan(256);
    // BLOCKED_QUEUED_TOKENS (8,192) against QUEUED_TOKENS (512) a waiting request.
    expect(blocked).toBeLessThan(admitting / 4);
    // Saturated (every candidate waits): the blocked price is off, so the prefix holds against
    // what would move it from an admitting queue below saturation.
    const extra = Math.max(1, Math.floor(admitting / 2));
    expect(routedWith(1 + extra, true, 1)).toBe(2);
    // An adapter's request (the engines report their adapters): the adapter's costs price its
    // wait for a place, so a blocked queue moves it no sooner than an admitting one.
    const adapterAdmitting = leastMoving(false, 0, "sql");
    expect(adapterAdmitting, "the adapter's prefix holds against some queue").toBeGreaterThan(blocked);
    expect(leastMoving(true, 0, "sql")).toBe(adapterAdmitting);
  });

  it("spreads unrelated prompts by load and never picks unhealthy or removed slots", () => {
    const f = fleet();
    f.load.scraped(0, { running: 5, waiting: 2, kvUsage: 0.5 }, 1);
    f.load.scraped(1, { running: 1, waiting: 0, kvUsage: 0.1 }, 1);
    f.load.scraped(2, { running: 3, waiting: 1, kvUsage: 0.3 }, 1);
    f.load.failed(3);
    f.publish();
    expect(f.route(chat("s", "fresh question"))).toMatchObject({ outcome: "load_only", slot: 1 });
    f.slots.setEndpointRanks(f.cfg.pools[0] as never, f.cfg.pools[0]?.endpoints[0] as never, [0, 2, 3]);
    f.publish();
    expect(f.route(chat("s", "another question")).slot).toBe(2);
    f.load.failed(0);
    f.load.failed(2);
    f.publish();
    // No healthy slot: fail open (the default) passes the request on without a destination.
    expect(f.route(chat("s", "x"))).toMatchObject({ outcome: "fail_open", slot: -1 });
  });

  it("pins a client rank under `honor` and reports the valid range when the rank is not served", () => {
    const f = fleet({ routing: { rankHeaderPolicy: { mode: "honor" } } });
    const body = chat(longSystem, "pinned");
    f.hold(body, 2);
    f.publish();
    expect(f.route(body, { headers: [["x-data-parallel-rank", "1"]] })).toMatchObject({
      outcome: "pinned",
      slot: 1,
    });
    const bad = f.route(body, { headers: [["x-data-parallel-rank", "9"]] });
    expect(bad).toMatchObject({ status: 400, slot: -1 });
    expect(bad.body).toContain("valid ranks are 0 to 3");
  });

  it("maps models to pools: aliases, the default pool, or none", () => {
    const f = fleet();
    expect(f.route(chat("s", "u", "other")).forwarded?.get("x-gateway-destination-endpoint")).toBe(
      "10.0.0.2:8000",
    );
    expect(f.route(chat("s", "u", "nope"))).toMatchObject({ status: 404, slot: -1 });
    const g = fleet({ routing: { defaultPool: "other" } });
    expect(g.route(chat("s", "u", "nope")).forwarded?.get("x-gateway-destination-endpoint")).toBe(
      "10.0.0.2:8000",
    );
  });

  it("follows a pool's simpler policy: round robin cycles through healthy slots", () => {
    const f = fleet();
    const picks = Array.from({ length: 6 }, () => f.route(chat("s", "u", "other")).slot);
    expect(new Set(picks)).toEqual(new Set([4, 5, 6]));
    expect(picks.slice(0, 3)).toEqual(picks.slice(3));
  });

  it("picks a prefill slot by cache and a decode slot by load in a disaggregated pool", () => {
    const f = fleet({
      pools: [
        {
          name: "dis",
          models: ["qwen3"],
          engine: "dynamo",
          tokenizer: QWEN,
          endpoints: [
            { address: "10.0.1.1:8000", ranks: [0, 1], role: "prefill", workerId: "11" },
            { address: "10.0.1.2:8000", ranks: [0, 1], role: "decode", workerId: "22" },
          ],
        },
      ],
    });
    const body = chat(longSystem, "disaggregate me");
    f.hold(body, 1);
    f.load.scraped(2, { running: 9, waiting: 0, kvUsage: 0.8 }, 1);
    f.publish();
    expect(f.route(body)).toMatchObject({ outcome: "prefix_hit", prefillSlot: 1, slot: 3 });
  });

  it("breaks least-load ties with a sequence of its own on every worker thread", () => {
    // Four idle slots, equal counts: each pick is a tie. VMs drawing alike would send every
    // thread's traffic to the same slots in the same order. (kv-aware pools order near-equal
    // slots by the gateway's order instead: gateway-order.test.ts.)
    const f = fleet({
      threads: 2,
      pools: [
        {
          name: "qwen",
          models: ["qwen3"],
          policy: "least-load",
          endpoints: [{ address: "10.0.0.1:8000", ranks: [0, 1, 2, 3] }],
        },
      ],
    });
    const picks = (thread: number) =>
      Array.from({ length: 16 }, (_, i) => {
        const r = f.route(chat("s", `question ${i}`), { thread });
        f.finish(r);
        return r.slot;
      });
    const a = picks(0);
    const b = picks(1);
    expect(new Set(a).size).toBeGreaterThan(1);
    expect(b).not.toEqual(a);
  });

  it("answers malformed bodies without trapping", () => {
    const f = fleet();
    for (const junk of [
      "",
      "{",
      "[]",
      '{"model": 3}',
      '{"model":"qwen3","messages":[{"role":"user","content":',
      "\u0000\u0001",
    ]) {
      const r = f.route(junk);
      expect(f.host.threads[0]?.failed).toBe(false);
      expect(r.status === 0 || r.status === 404).toBe(true);
    }
  });
});
