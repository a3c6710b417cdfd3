// Clients that misbehave: forged destinations, hostile rank headers under each policy,
// malformed, truncated and oversized bodies, unknown models. Nothing traps; every answer is a
// clear error or a documented safe route.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatBody, lastHit, post, type Stack, startStack, synced, until } from "./harness.ts";

// " 3" is not here: HTTP strips optional whitespace around field values (RFC 9110 §5.5), in
// Envoy as in every client, so it arrives as "3".
const HOSTILE_RANKS = ["-1", "+3", "1_0", "3.0", "", "99999999999", "1,2", "0x1", "01", "4294967296"];

async function stackWith(
  routing: Record<string, unknown>,
  pluginConfig: Record<string, unknown> = {},
): Promise<Stack> {
  const s = await startStack({ engines: [[0, 1, 2, 3]], routing, pluginConfig });
  await until(() => s.cp.ready(), "control plane ready");
  await synced(s);
  return s;
}

function noTraps(s: Stack) {
  expect(s.gateway.host.logs().filter((l) => /abort|unreachable|trap|RuntimeError/i.test(l))).toEqual([]);
  expect(s.gateway.host.threads.every((t) => !t.failed)).toBe(true);
}

describe("rank header policy: ignore (default)", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await stackWith({});
  });
  afterAll(async () => s?.close());

  it("never lets a client choose the upstream (SSRF) or the rank", async () => {
    for (const value of ["169.254.169.254:80", "127.0.0.1:1", "evil.example:443"]) {
      const r = await post(s, "/v1/chat/completions", chatBody("s", "u"), {
        "x-gateway-destination-endpoint": value,
        "x-data-parallel-rank": "3",
        "x-dynamo-worker-instance-id": "7",
      });
      expect(r.status).toBe(200);
      const hit = lastHit(s);
      expect(hit?.headers["x-gateway-destination-endpoint"]).toBe(s.engines[0]?.address);
      expect(hit?.headers["x-dynamo-worker-instance-id"]).toBeUndefined();
    }
    // A client rank is stripped and replaced by the filter's choice, so over many requests
    // every rank is used, not only the one the client asked for.
    const ranks = new Set<string>();
    for (let i = 0; i < 24; i++) {
      await post(s, "/v1/chat/completions", chatBody("s", `u${i}`), { "x-data-parallel-rank": "3" });
      ranks.add(String(lastHit(s)?.headers["x-data-parallel-rank"]));
    }
    expect(ranks.size).toBeGreaterThan(1);
    noTraps(s);
  });

  it("answers an unknown model with 404 JSON and routes malformed bodies by load", async () => {
    const unknown = await post(s, "/v1/chat/completions", chatBody("s", "u", "no-such-model"));
    expect(unknown.status).toBe(404);
    expect(unknown.json).toMatchObject({ error: { code: "model_not_found" } });
    for (const junk of [
      "{",
      '{"model":"qwen3","messages":[',
      "[1,2,3]",
      "\u0000\u0001\u0002",
      '{"model":"qwen3","messages":"nope"}',
      "{".repeat(100_000),
    ]) {
      const r = await post(s, "/v1/chat/completions", junk);
      // Either the engine answered (load-only routing of a body it will reject itself) or the
      // default pool is absent and the model is unknown: never a 5xx from the gateway.
      expect([200, 404]).toContain(r.status);
    }
    expect(Number(s.gateway.host.counter("kvroute.parse_errors") ?? 0)).toBeGreaterThan(0);
    noTraps(s);
  });

  it("routes bodies over the limit by load without buffering them further", async () => {
    const t = await stackWith({}, { maxBodyBytes: 4096 });
    try {
      const big = chatBody("x".repeat(20_000), "u");
      const r = await post(t, "/v1/chat/completions", big);
      expect(r.status).toBe(200);
      expect(lastHit(t)?.body.length).toBe(big.length);
      expect(Number(t.gateway.host.counter("kvroute.body_too_large") ?? 0)).toBe(1);
      noTraps(t);
    } finally {
      await t.close();
    }
  });
});

describe("rank header policy: reject", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await stackWith({ rankHeaderPolicy: { mode: "reject" } });
  });
  afterAll(async () => s?.close());

  it("answers 400 JSON naming the header for any client rank header, valid or not", async () => {
    for (const [name, value] of [
      ["x-data-parallel-rank", "1"],
      ["x-dynamo-dp-rank", "0"],
      ["x-dp-rank", "-1"],
      ["x-data-parallel-rank", ""],
    ]) {
      const r = await post(s, "/v1/chat/completions", chatBody("s", "u"), {
        [name as string]: value as string,
      });
      expect(r.status, `${name}: ${value}`).toBe(400);
      expect((r.json as { error: { message: string } }).error.message).toContain(name as string);
    }
    const ok = await post(s, "/v1/chat/completions", chatBody("s", "u"));
    expect(ok.status).toBe(200);
    noTraps(s);
  });
});

describe("rank header policy: honor", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await stackWith({ rankHeaderPolicy: { mode: "honor", trustedCidrs: ["127.0.0.0/8", "::1/128"] } });
  });
  afterAll(async () => s?.close());

  it("pins a strictly parsed, served rank", async () => {
    for (const rank of ["0", "2", "3"]) {
      const r = await post(s, "/v1/chat/completions", chatBody("s", "u"), { "x-data-parallel-rank": rank });
      expect(r.status).toBe(200);
      expect(lastHit(s)?.headers["x-data-parallel-rank"]).toBe(rank);
    }
    expect(Number(s.gateway.host.counter("kvroute.requests.pinned") ?? 0)).toBe(3);
  });

  it("answers 400 for every hostile value and for a rank the model does not serve, with the valid range", async () => {
    for (const value of HOSTILE_RANKS) {
      const r = await post(s, "/v1/chat/completions", chatBody("s", "u"), { "x-data-parallel-rank": value });
      expect(r.status, JSON.stringify(value)).toBe(400);
    }
    const far = await post(s, "/v1/chat/completions", chatBody("s", "u"), { "x-data-parallel-rank": "4" });
    expect(far.status).toBe(400);
    expect((far.json as { error: { message: string; code: string } }).error).toMatchObject({
      code: "rank_out_of_range",
      message: expect.stringContaining("valid ranks are 0 to 3"),
    });
    noTraps(s);
  });

  it("ignores pins from clients outside the trusted networks", async () => {
    const t = await stackWith({ rankHeaderPolicy: { mode: "honor", trustedCidrs: ["10.0.0.0/8"] } });
    try {
      const ranks = new Set<string>();
      for (let i = 0; i < 24; i++) {
        await post(t, "/v1/chat/completions", chatBody("s", `u${i}`), { "x-data-parallel-rank": "2" });
        ranks.add(String(lastHit(t)?.headers["x-data-parallel-rank"]));
      }
      expect(ranks.size).toBeGreaterThan(1);
    } finally {
      await t.close();
    }
  });
});
