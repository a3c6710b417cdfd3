// Misbehaving clients against the whole stack: a forged destination never reaches its target,
// the gateway-facing endpoints refuse strangers, and a flood of unique prompts stays inside the
// budgets (gateway key space; control-plane index bounded by what the engines can hold).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shippedClientAddressing } from "../../control-plane/src/cli/envoy-config.ts";
import { startGateway } from "../../host/gateway.ts";
import { chat, type E2E, MODEL, startE2E, synced, TOKEN, until } from "./harness.ts";

let e: E2E;
let internal: Server;
let internalHits = 0;
beforeAll(async () => {
  // Pins are honoured only from 10.0.0.0/8 — an address no test client has (they are on loopback).
  e = await startE2E({
    workers: 2,
    ranks: 2,
    routing: { rankHeaderPolicy: { mode: "honor", trustedCidrs: ["10.0.0.0/8"] } },
  });
  await until(() => e.cp?.ready() === true, "control plane ready");
  await synced(e);
  internal = createServer((_req, res) => {
    internalHits++;
    res.end("secret");
  });
  await new Promise<void>((r) => internal.listen(0, "127.0.0.1", r));
}, 60_000);
afterAll(async () => {
  await e?.close();
  internal?.close();
});

describe("attacks and bad input", () => {
  it("a client's destination header never changes the upstream (SSRF)", async () => {
    const target = `127.0.0.1:${(internal.address() as AddressInfo).port}`;
    for (const path of ["/v1/chat/completions", "/v1/completions", "/v1/models", "/admin"]) {
      await fetch(`${e.url}${path}`, {
        method: path === "/v1/models" || path === "/admin" ? "GET" : "POST",
        headers: { "content-type": "application/json", "x-gateway-destination-endpoint": target },
        body: path.startsWith("/v1/c")
          ? JSON.stringify({ model: MODEL, prompt: "hi", messages: [{ role: "user", content: "hi" }] })
          : undefined,
      }).then((r) => r.text());
    }
    expect(internalHits).toBe(0);
  });

  it("a client cannot claim a trusted address with X-Forwarded-For (the shipped use_remote_address)", async () => {
    // The gateway stands for envoy/envoy.yaml and takes its connection-manager settings from it.
    expect(shippedClientAddressing()).toEqual({ useRemoteAddress: true, xffNumTrustedHops: 0 });
    const pinned = () => Number(e.gateway.host.counter("kvroute.requests.pinned") ?? 0);
    const untrusted = () => Number(e.gateway.host.counter("kvroute.requests.untrusted_pin") ?? 0);
    const spoof = (url: string, xff: string) =>
      fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-data-parallel-rank": "1", "x-forwarded-for": xff },
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: "user", content: "pin me" }],
          max_tokens: 2,
        }),
      }).then(async (r) => {
        await r.text();
        return r.status;
      });
    const before = { pinned: pinned(), untrusted: untrusted() };
    for (const xff of ["10.1.2.3", "203.0.113.5, 10.1.2.3", "::ffff:10.1.2.3"])
      expect(await spoof(e.url, xff)).toBe(200);
    expect(pinned()).toBe(before.pinned);
    expect(untrusted()).toBe(before.untrusted + 3);

    // The same request through Envoy's default (use_remote_address: false) is trusted: the test
    // can tell the difference the setting makes.
    const defaults = await startGateway({
      wasm: new URL("../../build/kvroute.wasm", import.meta.url).pathname,
      threads: 1,
      vmId: "kvroute-defaults",
      rootId: "kvroute",
      pluginConfig: JSON.stringify({
        controlPlane: { cluster: "cp", authority: `127.0.0.1:${e.cpPort}`, token: TOKEN, timeoutMs: 3000 },
        tickMs: 20,
      }),
      clusters: { cp: `127.0.0.1:${e.cpPort}` },
      allowOnHeadersStopIteration: true,
      port: 0,
    });
    try {
      await until(
        () => ["kvr.cfg", "kvr.slots", "kvr.load"].every((k) => defaults.host.sharedData(k) !== null),
        "default gateway synced",
      );
      expect(await spoof(defaults.url, "10.1.2.3")).toBe(200);
      expect(Number(defaults.host.counter("kvroute.requests.pinned") ?? 0)).toBe(1);
    } finally {
      await defaults.close();
    }
  });

  it("sync and report refuse requests without the bearer token", async () => {
    const url = e.cp?.url as string;
    expect((await fetch(`${url}/v1/sync?epoch=0&version=0`)).status).toBe(401);
    expect(
      (
        await fetch(`${url}/v1/sync?epoch=0&version=0`, {
          headers: { authorization: "Bearer guess-guess-guess-guess" },
        })
      ).status,
    ).toBe(401);
    expect((await fetch(`${url}/v1/report`, { method: "POST", body: "x" })).status).toBe(401);
  });

  it("a flood of unique prompts keeps the gateway's key space bounded and the index within engine capacity", async () => {
    const keys = new Set(e.gateway.host.sharedDataKeys());
    for (let i = 0; i < 300; i++) {
      const r = await chat(e, `flood ${i} ${"unique text ".repeat(40)}`, `q${i}`);
      expect(r.status).toBe(200);
    }
    await synced(e);
    // No key is new: the filter's speculative routes live in its VMs and on its one board.
    const added = e.gateway.host.sharedDataKeys().filter((k) => !keys.has(k));
    expect(added.filter((k) => k !== "kvr.gwb")).toEqual([]);
    // Each rank's index mirrors its engine's cache, which evicts at capacity (2048 blocks).
    const blocks = (e.cp?.slots.present() ?? []).map((s) => e.cp?.index.slot(s.key)?.blockCount ?? 0);
    expect(Math.max(...blocks)).toBeLessThanOrEqual(2048);
  }, 120_000);
});
