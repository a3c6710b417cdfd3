// Clients that misbehave: forged destinations, hostile rank headers under each policy,
// malformed, truncated and oversized bodies, unknown models. Nothing traps; every answer is a
// clear error or a documented safe route.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  chatBody,
  counter,
  type FakeEngine,
  lastHit,
  post,
  type Stack,
  startStack,
  synced,
  until,
} from "./harness.ts";

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

  it("never lets a client choose the rank", async () => {
    // A client rank is stripped and replaced by the filter's choice: each request asks for a
    // different rank, and the rank the engine sees does not follow the ask. (Whether the filter
    // spreads concurrent requests depends on how they overlap on a loaded machine, so this
    // asserts only what the policy promises.)
    const before = s.engines.map((e) => e.hits.length);
    const asked = new Map<string, string>();
    await Promise.all(
      Array.from({ length: 24 }, (_, i) => {
        asked.set(`u${i}`, String(i % 4));
        return post(s, "/v1/chat/completions", chatBody("s", `u${i}`), {
          "x-data-parallel-rank": String(i % 4),
        });
      }),
    );
    const seen = s.engines.flatMap((e, k) => e.hits.slice(before[k]));
    expect(seen).toHaveLength(24);
    const ignored = seen.filter((h) => {
      const user = /u\d+/.exec(h.body)?.[0] ?? "";
      return String(h.headers["x-data-parallel-rank"]) !== asked.get(user);
    });
    expect(ignored.length).toBeGreaterThan(0);
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
      ["x-dynamo-prefill-dp-rank", "0"],
      ["x-prefill-dp-rank", "1"],
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

  it("strips the other routing headers, which no policy lets a client set, and answers 200", async () => {
    for (const name of [
      "x-dynamo-worker-instance-id",
      "x-worker-instance-id",
      "x-dynamo-prefill-instance-id",
      "x-prefill-instance-id",
      "x-dynamo-routing-mode",
    ]) {
      const r = await post(s, "/v1/chat/completions", chatBody("s", "u"), { [name]: "7" });
      expect(r.status, name).toBe(200);
      expect(lastHit(s)?.headers[name], name).toBeUndefined();
    }
  });

  it("reports header-time rejections, on any path, to the control plane", async () => {
    const rejected = async () => {
      const text = await (await fetch(`${s.cp.url}/metrics`)).text();
      return [
        ...text.matchAll(/^kvroute_routed_requests_total\{[^}]*outcome="rejected"[^}]*\} (\d+)/gm),
      ].reduce((n, m) => n + Number(m[1]), 0);
    };
    // Earlier tests' rejections may still be on their way (a thread hands the leader one batch per
    // drain): start from the point where the control plane has every rejection the gateway counted.
    const stat = Number(s.gateway.host.counter("kvroute.requests.rejected") ?? 0);
    await until(async () => (await rejected()) === stat, "earlier rejections reported");
    const before = stat;
    expect((await post(s, "/v1/chat/completions", chatBody("s", "u"), { "x-dp-rank": "1" })).status).toBe(
      400,
    );
    const models = await fetch(`${s.gateway.url}/v1/models`, { headers: { "x-data-parallel-rank": "1" } });
    expect(models.status).toBe(400);
    expect(Number(s.gateway.host.counter("kvroute.requests.rejected") ?? 0)).toBe(stat + 2);
    await until(async () => (await rejected()) === before + 2, "two rejections reported");
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

  it("routes an untrusted client's valid pin as if it were absent, and counts it", async () => {
    const t = await stackWith({ rankHeaderPolicy: { mode: "honor", trustedCidrs: ["10.0.0.0/8"] } });
    try {
      // All at once: the gateway's own unanswered requests spread them over the slots (one after
      // another, each would follow the gateway's order of equal slots — one slot while the load
      // image stays the same, which could be rank 2 itself).
      const sent = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          post(t, "/v1/chat/completions", chatBody("s", `u${i}`), { "x-data-parallel-rank": "2" }),
        ),
      );
      for (const r of sent) expect(r.status).toBe(200);
      const ranks = new Set(
        t.engines.flatMap((e) => e.hits.map((h) => String(h.headers["x-data-parallel-rank"]))),
      );
      expect(ranks.size).toBeGreaterThan(1);
      expect(Number(t.gateway.host.counter("kvroute.requests.untrusted_pin") ?? 0)).toBe(24);
      expect(Number(t.gateway.host.counter("kvroute.requests.pinned") ?? 0)).toBe(0);
      expect(Number(t.gateway.host.counter("kvroute.requests.rejected") ?? 0)).toBe(0);
    } finally {
      await t.close();
    }
  });
});

describe("a forged destination (SSRF), routed or not", () => {
  let s: Stack;
  let canary: Server;
  let canaryHits = 0;
  let forged = "";
  beforeAll(async () => {
    canary = createServer((_req, res) => {
      canaryHits++;
      res.end("internal");
    });
    await new Promise<void>((r) => canary.listen(0, "127.0.0.1", r));
    forged = `127.0.0.1:${(canary.address() as AddressInfo).port}`;
    // Engine 1 is not in the pool: it stands for the route's fallback cluster (fail-open traffic
    // and paths the filter does not route).
    s = await startStack({
      engines: [[0, 1, 2, 3], [0]],
      pools: (e) => [
        { name: "qwen", models: ["qwen3"], endpoints: [{ address: e[0]?.address, ranks: [0, 1, 2, 3] }] },
      ],
      routing: { rankHeaderPolicy: { mode: "reject" } },
      fallbackEngine: 1,
    });
    await until(() => s.cp.ready(), "control plane ready");
    await synced(s);
  });
  afterAll(async () => {
    await s?.close();
    canary?.close();
  });

  /** Sends with the forged destination; nothing may reach the canary or carry its address. */
  async function forge(
    path: string,
    init: { method?: string; body?: string; headers?: Record<string, string> },
  ) {
    const res = await fetch(`${s.gateway.url}${path}`, {
      method: init.method ?? "POST",
      body: init.body,
      headers: {
        "content-type": "application/json",
        "x-gateway-destination-endpoint": forged,
        ...init.headers,
      },
    });
    await res.text();
    return res.status;
  }

  function nothingReachedTheCanary() {
    expect(canaryHits).toBe(0);
    for (const e of s.engines)
      for (const h of e.hits) expect(h.headers["x-gateway-destination-endpoint"]).not.toBe(forged);
    expect(s.gateway.accessLog.map((l) => l.upstream)).not.toContain(forged);
  }

  it("routed requests go where the filter says", async () => {
    expect(await forge("/v1/chat/completions", { body: chatBody("s", "routed") })).toBe(200);
    expect(lastHit(s)?.headers["x-gateway-destination-endpoint"]).toBe(s.engines[0]?.address);
    nothingReachedTheCanary();
  });

  it("paths the filter does not route go to the fallback without the header", async () => {
    const fallback = s.engines[1];
    for (const [method, path] of [
      ["GET", "/v1/models"],
      ["POST", "/v1/embeddings"],
      ["GET", "/v1/chat/completions"],
    ] as const) {
      const before = fallback?.hits.length ?? 0;
      const status = await forge(path, { method, body: method === "POST" ? chatBody("s", "u") : undefined });
      expect(status, path).toBe(200);
      expect(fallback?.hits.length).toBe(before + 1);
      expect(fallback?.hits.at(-1)?.headers["x-gateway-destination-endpoint"]).toBeUndefined();
    }
    nothingReachedTheCanary();
  });

  it("requests the filter answers itself reach no upstream", async () => {
    const hits = s.engines.reduce((n, e) => n + e.hits.length, 0);
    expect(await forge("/v1/chat/completions", { body: chatBody("s", "u", "no-such-model") })).toBe(404);
    expect(
      await forge("/v1/chat/completions", {
        body: chatBody("s", "u"),
        headers: { "x-data-parallel-rank": "1" },
      }),
    ).toBe(400);
    expect(s.engines.reduce((n, e) => n + e.hits.length, 0)).toBe(hits);
    nothingReachedTheCanary();
  });

  it("fail-open requests (no healthy slot) go to the fallback without the header", async () => {
    const engine = s.engines[0] as FakeEngine;
    engine.up = false;
    const before = counter(s, "kvroute.requests.fail_open");
    // Each request is one more chance for the forged header; the wait ends when the gateway
    // sees every slot unhealthy and fails open.
    await until(async () => {
      expect([200, 503]).toContain(await forge("/v1/chat/completions", { body: chatBody("s", "open") }));
      return counter(s, "kvroute.requests.fail_open") > before;
    }, "fail-open");
    expect(s.engines[1]?.hits.at(-1)?.headers["x-gateway-destination-endpoint"]).toBeUndefined();
    nothingReachedTheCanary();
  });
});
