// Overload shedding and priority in the shipped filter (build/kvroute.wasm in the Node host), on a
// cache the test writes: a pool of four slots whose load image carries the waiting queue and KV
// usage each case needs. Saturated slots leave a standard or sheddable request's candidates; when
// none is left the request is answered 429 with Retry-After; critical requests are never shed, and
// only trusted clients may send critical. Every value that is almost a priority is tried.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chat, type Routed, ShippedFilter } from "../filter-core/shipped-filter.ts";

const PRIORITY = "x-kvroute-priority";
const TRUSTED = "10.1.2.3";
const UNTRUSTED = "11.0.0.1";
const SECRET_HEADER = "x-kvroute-pin-secret";
const SECRET = "s3cret-Priority-0123456789";

const pool = (shedding: Record<string, unknown> | undefined) => ({
  name: "qwen",
  models: ["qwen3"],
  endpoints: [{ address: "10.0.0.1:8000", ranks: [0, 1, 2, 3] }],
  ...(shedding === undefined ? {} : { shedding }),
});

const SHEDDING = {
  enabled: true,
  retryAfterSeconds: 7,
  standard: { maxQueued: 4, maxKvUsage: 0.9 },
  sheddable: { maxQueued: 1, maxKvUsage: 0.5 },
};

function filter(
  shedding: Record<string, unknown> | undefined,
  routing: Record<string, unknown> = { rankHeaderPolicy: { trustedCidrs: ["10.1.0.0/16"] } },
): ShippedFilter {
  return new ShippedFilter({ pools: [pool(shedding)], routing });
}

/** Every slot's scraped load (waiting, KV usage), or per slot from `each`. */
function setLoad(
  f: ShippedFilter,
  waiting: number,
  kvUsage: number,
  each: Record<number, [number, number]> = {},
) {
  for (const s of f.slots.all()) {
    const [w, kv] = each[s.id] ?? [waiting, kvUsage];
    f.load.scraped(s.id, { running: 0, waiting: w, kvUsage: kv }, f.clock.now);
  }
  f.publishLoad();
  f.tick();
}

const counter = (f: ShippedFilter, name: string) => Number(f.host.counter(name) ?? 0);

/** Routes one request and ends it at once (so the gateway's own queue stays empty). */
function once(f: ShippedFilter, headers: Array<[string, string]> = [], source = UNTRUSTED): Routed {
  const r = f.route(chat("s", "hello"), { headers, source });
  f.finish(r);
  return r;
}

function expectShed(r: Routed, retryAfter = "7"): void {
  expect(r.forwarded).toBeNull();
  expect(r.status).toBe(429);
  expect(r.outcome).toBe("shed");
  expect(r.replyHeaders?.get("retry-after")).toBe(retryAfter);
  expect(r.replyHeaders?.get("content-type")).toBe("application/json");
  expect(JSON.parse(r.body).error.code).toBe("overloaded");
}

function expectRouted(r: Routed): void {
  expect(r.status).toBe(0);
  expect(r.forwarded).not.toBeNull();
  expect(r.slot).toBeGreaterThanOrEqual(0);
  // kvroute's own header never reaches the engine.
  expect(r.forwarded?.get(PRIORITY)).toBeUndefined();
}

describe("shedding off (the default)", () => {
  let f: ShippedFilter;
  beforeAll(() => {
    f = filter(undefined);
  });
  afterAll(() => f?.close());

  it("never answers 429, however full every slot is, at any priority", () => {
    setLoad(f, 5000, 1);
    for (const p of [[], [[PRIORITY, "sheddable"]], [[PRIORITY, "standard"]]] as Array<
      Array<[string, string]>
    >)
      expectRouted(once(f, p));
    expect(counter(f, "kvroute.requests.shed")).toBe(0);
  });

  it("still strips the priority header", () => {
    setLoad(f, 0, 0);
    expectRouted(once(f, [[PRIORITY, "critical"]], TRUSTED));
    expectRouted(once(f, [[PRIORITY, "nonsense"]]));
  });
});

describe("shedding on", () => {
  let f: ShippedFilter;
  beforeAll(() => {
    f = filter(SHEDDING);
  });
  afterAll(() => f?.close());

  it("all slots saturated: 429 with Retry-After for standard, counted per pool and priority", () => {
    setLoad(f, 10, 0);
    const shed = counter(f, "kvroute.requests.shed");
    const byPool = counter(f, "kvroute.shed.qwen.standard");
    expectShed(once(f));
    expectShed(once(f, [[PRIORITY, "standard"]]));
    expect(counter(f, "kvroute.requests.shed")).toBe(shed + 2);
    expect(counter(f, "kvroute.shed.qwen.standard")).toBe(byPool + 2);
  });

  it("all slots saturated: a trusted critical request is routed", () => {
    setLoad(f, 10, 0.99);
    expectRouted(once(f, [[PRIORITY, "critical"]], TRUSTED));
  });

  it("one slot not saturated by its queue: every request goes there", () => {
    setLoad(f, 10, 0, { 2: [0, 0] });
    for (let i = 0; i < 6; i++) {
      const r = once(f);
      expectRouted(r);
      expect(r.slot).toBe(2);
    }
  });

  it("one slot not saturated by KV (the cost model does not see KV): every request goes there", () => {
    setLoad(f, 0, 0.95, { 1: [0, 0.2] });
    for (let i = 0; i < 6; i++) expect(once(f).slot).toBe(1);
  });

  it("sheddable is shed before standard (queue and KV)", () => {
    setLoad(f, 2, 0);
    expectShed(once(f, [[PRIORITY, "sheddable"]]));
    expect(counter(f, "kvroute.shed.qwen.sheddable")).toBeGreaterThan(0);
    expectRouted(once(f, [[PRIORITY, "standard"]]));
    setLoad(f, 0, 0.7);
    expectShed(once(f, [[PRIORITY, "sheddable"]]));
    expectRouted(once(f));
  });

  it("thresholds are the configuration's: at the threshold is not over it", () => {
    setLoad(f, 4, 0.9);
    expectRouted(once(f));
    setLoad(f, 5, 0.9);
    expectShed(once(f));
    setLoad(f, 4, 0.901);
    expectShed(once(f));
    setLoad(f, 1, 0.5);
    expectRouted(once(f, [[PRIORITY, "sheddable"]]));
  });

  it("the gateway's own unanswered requests count toward a slot's queue", () => {
    setLoad(f, 4, 0);
    const open: Routed[] = [];
    // Each unanswered request takes its slot past 4 queued; the fifth finds all four saturated.
    for (let i = 0; i < 4; i++) {
      const r = f.route(chat("s", `q${i}`), { source: UNTRUSTED });
      expectRouted(r);
      open.push(r);
    }
    expect(new Set(open.map((r) => r.slot)).size).toBe(4);
    expectShed(once(f));
    for (const r of open) f.finish(r);
    expectRouted(once(f));
  });

  it("a shed request is reported with outcome shed, its priority and a slot of its pool", () => {
    setLoad(f, 10, 0);
    const r = f.route(chat("s", "report me"), {
      headers: [
        [PRIORITY, "sheddable"],
        ["x-request-id", "shed-1"],
      ],
    });
    expectShed(r);
    f.finish(r);
    const reported = () => f.reports.flatMap((rep) => rep.finished).find((e) => e.requestId === "shed-1");
    // The leader's lease, the report interval and the drain handshake take a few ticks (virtual time).
    for (let i = 0; i < 50 && reported() === undefined; i++) f.tick();
    const entry = reported();
    expect(entry).toMatchObject({ status: 429, outcome: 6, priority: 1, promptBytes: 0 });
    expect(f.slots.get(entry?.slot ?? -1)?.pool).toBe("qwen");
  });
});

describe("who may send critical", () => {
  let f: ShippedFilter;
  beforeAll(() => {
    f = filter(SHEDDING);
    setLoad(f, 10, 0);
  });
  afterAll(() => f?.close());

  /** "routed" or "shed", with the counter that moved. */
  function claim(headers: Array<[string, string]>, source: string): string {
    const untrusted = counter(f, "kvroute.priority.untrusted");
    const invalid = counter(f, "kvroute.priority.invalid");
    const r = once(f, headers, source);
    const moved =
      counter(f, "kvroute.priority.untrusted") > untrusted
        ? "+untrusted"
        : counter(f, "kvroute.priority.invalid") > invalid
          ? "+invalid"
          : "";
    if (r.forwarded !== null) {
      expect(r.forwarded.get(PRIORITY)).toBeUndefined();
      return `routed${moved}`;
    }
    expectShed(r);
    return `shed${moved}`;
  }

  it.each([
    ["trusted, critical", [[PRIORITY, "critical"]], TRUSTED, "routed"],
    ["header name in another case", [["X-KVRoute-Priority", "critical"]], TRUSTED, "routed"],
    [
      "repeated, agreeing",
      [
        [PRIORITY, "critical"],
        [PRIORITY, "critical"],
      ],
      TRUSTED,
      "routed",
    ],
    ["untrusted source, valid value", [[PRIORITY, "critical"]], UNTRUSTED, "shed+untrusted"],
    ["just outside the /16", [[PRIORITY, "critical"]], "10.2.0.1", "shed+untrusted"],
    [
      "an X-Forwarded-For naming a trusted address",
      [
        [PRIORITY, "critical"],
        ["x-forwarded-for", TRUSTED],
      ],
      UNTRUSTED,
      "shed+untrusted",
    ],
    ["Critical", [[PRIORITY, "Critical"]], TRUSTED, "shed+invalid"],
    ["CRITICAL", [[PRIORITY, "CRITICAL"]], TRUSTED, "shed+invalid"],
    ["trailing space", [[PRIORITY, "critical "]], TRUSTED, "shed+invalid"],
    ["leading space", [[PRIORITY, " critical"]], TRUSTED, "shed+invalid"],
    ["a prefix", [[PRIORITY, "critica"]], TRUSTED, "shed+invalid"],
    ["a suffix", [[PRIORITY, "criticals"]], TRUSTED, "shed+invalid"],
    ["a list in one value", [[PRIORITY, "critical,critical"]], TRUSTED, "shed+invalid"],
    ["an integer", [[PRIORITY, "10"]], TRUSTED, "shed+invalid"],
    ["empty", [[PRIORITY, ""]], TRUSTED, "shed+invalid"],
    [
      "repeated, disagreeing",
      [
        [PRIORITY, "critical"],
        [PRIORITY, "standard"],
      ],
      TRUSTED,
      "shed+invalid",
    ],
    [
      "repeated, disagreeing the other way",
      [
        [PRIORITY, "sheddable"],
        [PRIORITY, "critical"],
      ],
      TRUSTED,
      "shed+invalid",
    ],
  ] as Array<[string, Array<[string, string]>, string, string]>)(
    "%s → %s",
    (_what, headers, source, want) => {
      expect(claim(headers, source)).toBe(want);
    },
  );
});

describe("critical and the shared-secret header", () => {
  let f: ShippedFilter;
  beforeAll(() => {
    f = filter(SHEDDING, { rankHeaderPolicy: { secretHeader: { name: SECRET_HEADER, value: SECRET } } });
    setLoad(f, 10, 0);
  });
  afterAll(() => f?.close());

  it("routes critical with exactly the secret, and the secret does not travel upstream", () => {
    const r = once(
      f,
      [
        [PRIORITY, "critical"],
        [SECRET_HEADER, SECRET],
      ],
      UNTRUSTED,
    );
    expectRouted(r);
    expect(r.forwarded?.get(SECRET_HEADER)).toBeUndefined();
  });

  it.each([
    ["absent", []],
    ["a prefix", [[SECRET_HEADER, SECRET.slice(0, -1)]]],
    ["another case", [[SECRET_HEADER, SECRET.toUpperCase()]]],
    [
      "repeated",
      [
        [SECRET_HEADER, SECRET],
        [SECRET_HEADER, SECRET],
      ],
    ],
  ] as Array<[string, Array<[string, string]>]>)("downgrades critical with the secret %s", (_what, extra) => {
    const untrusted = counter(f, "kvroute.priority.untrusted");
    expectShed(once(f, [[PRIORITY, "critical"], ...extra], UNTRUSTED));
    expect(counter(f, "kvroute.priority.untrusted")).toBe(untrusted + 1);
  });
});

describe("no trust configured", () => {
  let f: ShippedFilter;
  beforeAll(() => {
    f = filter(SHEDDING, {});
    setLoad(f, 10, 0);
  });
  afterAll(() => f?.close());

  it("nobody may send critical (unlike a pin under honor, which then trusts everyone)", () => {
    expectShed(once(f, [[PRIORITY, "critical"]], TRUSTED));
    expectShed(once(f, [[PRIORITY, "critical"]], "127.0.0.1"));
    expect(counter(f, "kvroute.priority.untrusted")).toBe(2);
  });
});

describe("a configured priority header", () => {
  let f: ShippedFilter;
  beforeAll(() => {
    f = filter(SHEDDING, { priorityHeader: "X-Tier", rankHeaderPolicy: { trustedCidrs: ["10.1.0.0/16"] } });
    setLoad(f, 10, 0);
  });
  afterAll(() => f?.close());

  it("is the one read and stripped; the default name is then an ordinary header", () => {
    const r = once(f, [["x-tier", "critical"]], TRUSTED);
    expectRouted(r);
    expect(r.forwarded?.get("x-tier")).toBeUndefined();
    expectShed(once(f, [[PRIORITY, "critical"]], TRUSTED));
  });
});
