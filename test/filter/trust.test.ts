// The `honor` policy's trust checks in the real filter: who may pin a rank (trusted CIDRs from
// source.address, the shared-secret header) and what a pin is (exactly one agreeing, valid value).
// Every check that keeps someone out is tried with the value that is almost right.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counter, type Passage, passThrough, type Stack, startStack, synced, until } from "./harness.ts";

const SECRET = "s3cret-Pin-Value-0123456789";
const SECRET_HEADER = "x-kvroute-pin-secret";

async function honorStack(policy: Record<string, unknown>): Promise<Stack> {
  const s = await startStack({
    engines: [[0, 1, 2, 3]],
    routing: { rankHeaderPolicy: { mode: "honor", ...policy } },
  });
  await until(() => s.cp.ready(), "control plane ready");
  await synced(s);
  return s;
}

const header = (p: Passage, name: string) => p.forwarded?.find(([k]) => k === name)?.[1];

/** "pinned" (the client's rank reached the engine through a pin), "untrusted", or the 4xx status. */
function pinOutcome(s: Stack, source: string, extra: Array<[string, string]>, rank = "2"): string | number {
  const pinned = counter(s, "kvroute.requests.pinned");
  const untrusted = counter(s, "kvroute.requests.untrusted_pin");
  const p = passThrough(s, { source, headers: [["x-data-parallel-rank", rank], ...extra] });
  if (p.forwarded === null) return p.status;
  // Whatever happened, the pin secret never travels upstream.
  expect(header(p, SECRET_HEADER)).toBeUndefined();
  if (counter(s, "kvroute.requests.pinned") === pinned + 1) {
    expect(header(p, "x-data-parallel-rank")).toBe(rank);
    return "pinned";
  }
  expect(counter(s, "kvroute.requests.untrusted_pin")).toBe(untrusted + 1);
  return "untrusted";
}

describe("honor: trusted CIDRs (source.address)", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await honorStack({
      trustedCidrs: [
        "10.0.4.0/23",
        "192.168.7.0/24",
        "2001:db8:abcd:1000::/52",
        "2001:db8::10/127",
        "::ffff:172.16.0.0/108",
      ],
    });
  });
  afterAll(async () => s?.close());

  it.each([
    // [client address, trusted?] — each inside next to its near miss outside.
    ["10.0.4.0", true],
    ["10.0.5.255", true],
    ["10.0.6.0", false], // just past the /23
    ["10.0.3.255", false], // just before it
    ["192.168.7.200", true],
    ["192.168.6.1", false], // inside the /23 around it, outside the /24
    ["::ffff:10.0.4.9", true], // an IPv4 client on a dual-stack socket is that IPv4 client
    ["::ffff:10.0.6.1", false],
    ["::a00:409", false], // ::10.0.4.9 "IPv4-compatible" is an IPv6 address, not 10.0.4.9
    ["2001:db8:abcd:1fff:ffff::1", true],
    ["2001:db8:abcd:1000::", true],
    ["2001:db8:abcd:2000::1", false], // the next /52
    ["2001:db8:abcd:fff:ffff::1", false], // the previous one
    ["2001:db8::10", true],
    ["2001:db8::11", true],
    ["2001:db8::12", false], // /127 holds ::10 and ::11 only
    ["2001:db8::f", false],
    ["172.31.255.255", true], // ::ffff:172.16.0.0/108 is 172.16.0.0/12
    ["172.32.0.1", false],
    ["11.0.4.9", false],
  ] as const)("%s → trusted %s", (source, trusted) => {
    expect(pinOutcome(s, source, [])).toBe(trusted ? "pinned" : "untrusted");
  });

  it("an X-Forwarded-For header in the request changes nothing here: only source.address counts", () => {
    expect(pinOutcome(s, "11.0.0.1", [["x-forwarded-for", "10.0.4.1"]])).toBe("untrusted");
  });
});

describe("honor: the shared-secret header (and a CIDR)", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await honorStack({
      trustedCidrs: ["127.0.0.0/8"],
      secretHeader: { name: SECRET_HEADER, value: SECRET },
    });
  });
  afterAll(async () => s?.close());

  it("pins with exactly the secret, from a trusted address", () => {
    expect(pinOutcome(s, "127.0.0.1", [[SECRET_HEADER, SECRET]])).toBe("pinned");
    // Header names are case-insensitive (Envoy lower-cases them); values are not.
    expect(pinOutcome(s, "127.0.0.1", [["X-KVRoute-Pin-Secret", SECRET]])).toBe("pinned");
  });

  it.each([
    ["absent", []],
    ["empty", [[SECRET_HEADER, ""]]],
    ["a prefix", [[SECRET_HEADER, SECRET.slice(0, -1)]]],
    ["a suffix added", [[SECRET_HEADER, `${SECRET}x`]]],
    ["the last character changed", [[SECRET_HEADER, `${SECRET.slice(0, -1)}8`]]],
    ["another case", [[SECRET_HEADER, SECRET.toUpperCase()]]],
    [
      "repeated: right, then wrong",
      [
        [SECRET_HEADER, SECRET],
        [SECRET_HEADER, "wrong-wrong-wrong-wrong"],
      ],
    ],
    [
      "repeated: wrong, then right",
      [
        [SECRET_HEADER, "wrong-wrong-wrong-wrong"],
        [SECRET_HEADER, SECRET],
      ],
    ],
    [
      "repeated: right twice",
      [
        [SECRET_HEADER, SECRET],
        [SECRET_HEADER, SECRET],
      ],
    ],
    ["in another header", [["x-kvroute-pin-secret2", SECRET]]],
  ] as const)("does not pin with the secret %s", (_what, extra) => {
    expect(
      pinOutcome(
        s,
        "127.0.0.1",
        extra.map(([k, v]) => [k, v] as [string, string]),
      ),
    ).toBe("untrusted");
  });

  it("does not pin with the right secret from outside the trusted CIDRs", () => {
    expect(pinOutcome(s, "10.9.9.9", [[SECRET_HEADER, SECRET]])).toBe("untrusted");
  });

  it("never forwards the secret: no rank header, a non-inference path, a 400", () => {
    const plain = passThrough(s, { headers: [[SECRET_HEADER, SECRET]] });
    expect(plain.forwarded).not.toBeNull();
    expect(header(plain, SECRET_HEADER)).toBeUndefined();
    const models = passThrough(s, {
      method: "GET",
      path: "/v1/models",
      body: "",
      headers: [[SECRET_HEADER, SECRET]],
    });
    expect(models.forwarded).not.toBeNull();
    expect(header(models, SECRET_HEADER)).toBeUndefined();
    expect(
      passThrough(s, {
        headers: [
          [SECRET_HEADER, SECRET],
          ["x-data-parallel-rank", "x"],
        ],
      }).status,
    ).toBe(400);
  });
});

describe("honor: one agreeing value per request", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await honorStack({});
  });
  afterAll(async () => s?.close());

  const pin = (h: Array<[string, string]>) => passThrough(s, { headers: h });

  it("answers 400 to rank headers that repeat or disagree, whichever comes first", () => {
    for (const h of [
      [
        ["x-data-parallel-rank", "1"],
        ["x-data-parallel-rank", "3"],
      ],
      [
        ["x-data-parallel-rank", "3"],
        ["x-data-parallel-rank", "1"],
      ],
      [
        ["x-data-parallel-rank", "1"],
        ["x-dp-rank", "3"],
      ],
      [
        ["x-dynamo-dp-rank", "2"],
        ["x-data-parallel-rank", "1"],
      ],
      [
        ["x-data-parallel-rank", "1"],
        ["x-data-parallel-rank", "01"],
      ],
      [
        ["x-data-parallel-rank", "1"],
        ["x-dp-rank", ""],
      ],
    ] as Array<Array<[string, string]>>) {
      const r = pin(h);
      expect(r.status, JSON.stringify(h)).toBe(400);
      expect(JSON.parse(r.body)).toMatchObject({ error: { code: "invalid_rank_header" } });
    }
  });

  it("pins a value that every rank header agrees on", () => {
    for (const h of [
      [
        ["x-data-parallel-rank", "2"],
        ["x-dynamo-dp-rank", "2"],
      ],
      [
        ["x-dp-rank", "3"],
        ["x-dp-rank", "3"],
      ],
    ] as Array<Array<[string, string]>>) {
      const before = counter(s, "kvroute.requests.pinned");
      const r = pin(h);
      expect(header(r, "x-data-parallel-rank")).toBe(h[0]?.[1]);
      expect(header(r, "x-dynamo-dp-rank")).toBeUndefined();
      expect(header(r, "x-dp-rank")).toBeUndefined();
      expect(counter(s, "kvroute.requests.pinned")).toBe(before + 1);
    }
  });

  it("strips prefill rank headers without pinning on them", () => {
    const before = counter(s, "kvroute.requests.pinned");
    const r = pin([
      ["x-dynamo-prefill-dp-rank", "3"],
      ["x-prefill-dp-rank", "zzz"],
    ]);
    expect(r.forwarded).not.toBeNull();
    expect(header(r, "x-dynamo-prefill-dp-rank")).toBeUndefined();
    expect(header(r, "x-prefill-dp-rank")).toBeUndefined();
    expect(counter(s, "kvroute.requests.pinned")).toBe(before);
  });
});
