// The filter in the Node host, synced from a real control plane: prefix affinity, spreading by
// load, and the filter's stats.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatBody, lastHit as lastHitOf, post, type Stack, startStack, synced, until } from "./harness.ts";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    engines: [
      [0, 1, 2, 3],
      [0, 1, 2, 3],
    ],
  });
  await until(() => stack.cp.ready(), "control plane ready");
  await synced(stack);
});
afterAll(async () => stack?.close());

const longSystem = (tag: string) =>
  `${tag}: you are a meticulous assistant who cites sources and answers briefly. `.repeat(30);
const lastHit = () => lastHitOf(stack);
const slotOf = (hit: ReturnType<typeof lastHit>) => `${hit?.engine}#${hit?.headers["x-data-parallel-rank"]}`;

describe("the filter in the Node host", () => {
  it("syncs the control plane's cache into shared data", () => {
    const keys = stack.gateway.host.sharedDataKeys();
    expect(keys).toEqual(
      expect.arrayContaining([
        "kvr.cfg",
        "kvr.slots",
        "kvr.load",
        "kvr.b.0",
        "kvr.b.255",
        "kvr.sync",
        "kvr.lease",
      ]),
    );
  });

  it("routes a chat to an engine with a destination and a rank header", async () => {
    const r = await post(stack, "/v1/chat/completions", chatBody("You are helpful.", "Hi"));
    expect(r.status).toBe(200);
    const hit = lastHit();
    expect(hit?.headers["x-gateway-destination-endpoint"]).toBe(hit?.engine);
    expect(hit?.headers["x-data-parallel-rank"]).toMatch(/^[0-3]$/);
  });

  it("sends a shared prefix back to the slot it went to: speculative routes reach every gateway", async () => {
    const system = longSystem("affinity");
    await post(stack, "/v1/chat/completions", chatBody(system, "first question"));
    const first = slotOf(lastHit());
    // The report carries the speculative route to the control plane; the next sync brings it back.
    await until(() => stack.cp.index.chunks.size > 0, "speculative chunks indexed");
    await synced(stack);
    const before = stack.gateway.host.counter("kvroute.requests.prefix_hit") ?? 0;
    for (const q of ["second question", "third, different question", "and a fourth"]) {
      await post(stack, "/v1/chat/completions", chatBody(system, q));
      expect(slotOf(lastHit())).toBe(first);
    }
    expect(Number(stack.gateway.host.counter("kvroute.requests.prefix_hit") ?? 0) - Number(before)).toBe(3);
  });

  it("records each decision's time in microseconds and its cached ratio", () => {
    const decision = stack.gateway.host.histogram("kvroute.decision_us");
    const ratio = stack.gateway.host.histogram("kvroute.cached_ratio_permille");
    expect(decision?.count).toBeGreaterThan(0);
    // Microseconds from a nanosecond clock, not a millisecond clock scaled up: a millisecond
    // clock gives only multiples of 1000 (no wall-clock bound here: the machine may be busy).
    expect(decision?.values.some((v) => v > 0)).toBe(true);
    expect(decision?.values.some((v) => v % 1000n !== 0n)).toBe(true);
    expect(ratio?.values.some((v) => v > 0)).toBe(true);
  });

  it("sends unrelated prompts to the least-loaded slots, spreading among equals", async () => {
    const busy = stack.engines[0];
    const idle = stack.engines[1];
    if (busy === undefined || idle === undefined) throw new Error("two engines");
    const busySlots = stack.cp.slots.present().filter((sl) => sl.address === busy.address);
    /** running requests of a slot as this gateway's shared-data load image says */
    const runningSeen = (slot: number) => {
      const v = stack.gateway.host.sharedData("kvr.load");
      if (v === null) return -1;
      const b = Buffer.from(v.value);
      const stride = b.readUInt16LE(8);
      return slot < b.readUInt16LE(6) ? b.readUInt16LE(12 + slot * stride + 2) : -1;
    };
    // Busy enough to outweigh the idle ranks' lagging fleet in-flight counts: a finished request
    // still counts as queued until the next report and sync reach the gateway (issue #15 item 2).
    for (const r of [0, 1, 2, 3]) busy.running[r] = 200;
    try {
      await until(
        () => busySlots.every((sl) => runningSeen(sl.id) === 200),
        "busy engine's load at the gateway",
      );
      // Each VM decodes the load image on its own tick: wait until every worker thread has
      // ticked twice since, so none decides on the image from before (a race under load).
      const ticked = stack.gateway.host.threads.map((t) => t.ticksDone);
      await until(
        () => stack.gateway.host.threads.every((t, i) => t.ticksDone >= (ticked[i] ?? 0) + 2),
        "every worker thread's view of the busy load",
      );
      // At once: the gateway's own unanswered requests spread them over the idle ranks (one after
      // another, each would follow the gateway's order of equal slots, one rank per load image).
      const before = new Map(stack.engines.map((e) => [e, e.hits.length]));
      await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          post(stack, "/v1/chat/completions", chatBody(`unrelated prompt ${i} ${"x".repeat(i)}`, `q${i}`)),
        ),
      );
      const hits = stack.engines.flatMap((e) => e.hits.slice(before.get(e)).map((h) => ({ engine: e, h })));
      expect(hits).toHaveLength(24);
      for (const { engine } of hits) expect(engine.address).toBe(idle.address);
      expect(
        new Set(hits.map(({ h }) => String(h.headers["x-data-parallel-rank"]))).size,
      ).toBeGreaterThanOrEqual(2);
    } finally {
      for (const r of [0, 1, 2, 3]) busy.running[r] = 0;
      await until(() => busySlots.every((sl) => runningSeen(sl.id) === 0), "load back to idle");
    }
  });

  it("leaves non-inference paths untouched but still strips client routing headers", async () => {
    const res = await fetch(`${stack.gateway.url}/v1/models`, {
      headers: { "x-gateway-destination-endpoint": "169.254.169.254:80" },
    });
    expect(res.status).toBe(503); // no destination and no default cluster: the route's own answer
    expect(stack.gateway.accessLog.at(-1)?.upstream).not.toBe("169.254.169.254:80");
  });
});

describe("the gateway's own speculative routes", () => {
  it("sends a burst of same-prefix requests to one slot before the control plane knows anything", async () => {
    // Reports every minute: nothing this gateway routes reaches the control plane in this test.
    const s = await startStack({
      engines: [
        [0, 1, 2, 3],
        [0, 1, 2, 3],
      ],
      pluginConfig: { reportMs: 60_000 },
    });
    try {
      await until(() => s.cp.ready(), "control plane ready");
      await synced(s);
      const system = longSystem("burst");
      await post(s, "/v1/chat/completions", chatBody(system, "q0"));
      const first = `${lastHitOf(s)?.engine}#${lastHitOf(s)?.headers["x-data-parallel-rank"]}`;
      for (let i = 1; i < 6; i++) {
        await post(s, "/v1/chat/completions", chatBody(system, `q${i}`));
        expect(`${lastHitOf(s)?.engine}#${lastHitOf(s)?.headers["x-data-parallel-rank"]}`).toBe(first);
      }
      expect(Number(s.gateway.host.counter("kvroute.requests.speculative_hit") ?? 0)).toBe(5);
      expect(s.cp.index.chunks.size).toBe(0);
    } finally {
      await s.close();
    }
  });

  it("forgets a speculative route once its TTL has passed", async () => {
    const ttlMs = 1000;
    const s = await startStack({
      engines: [
        [0, 1, 2, 3],
        [0, 1, 2, 3],
      ],
      pluginConfig: { reportMs: 60_000 },
      cache: { speculativeTtlMs: ttlMs },
    });
    try {
      await until(() => s.cp.ready(), "control plane ready");
      await synced(s);
      const hits = () => Number(s.gateway.host.counter("kvroute.requests.speculative_hit") ?? 0);
      const system = longSystem("expiry");
      await post(s, "/v1/chat/completions", chatBody(system, "q0"));
      await post(s, "/v1/chat/completions", chatBody(system, "q1"));
      expect(hits()).toBe(1);
      // Every routed request renews the entry; the host clock decides when it has lapsed.
      const renewed = Date.now();
      await until(() => Date.now() > renewed + ttlMs + 5, "the TTL to pass", ttlMs * 10);
      const loadOnly = Number(s.gateway.host.counter("kvroute.requests.load_only") ?? 0);
      await post(s, "/v1/chat/completions", chatBody(system, "q2"));
      expect(hits()).toBe(1);
      expect(Number(s.gateway.host.counter("kvroute.requests.load_only") ?? 0)).toBe(loadOnly + 1);
      expect(s.cp.index.chunks.size).toBe(0);
    } finally {
      await s.close();
    }
  });
});
