// A trap fails that thread's VM (Envoy: WasmBase::fail); later requests on that thread get a 503
// with details wasm_fail_stream under FAIL_CLOSED, or pass the filter untouched under FAIL_OPEN.
import { afterEach, describe, expect, it } from "vitest";
import { type Gateway, startGateway } from "../../host/gateway.ts";
import { moduleFile, startUpstream, type Upstream } from "./testing.ts";

let gw: Gateway | null = null;
let up: Upstream | null = null;
afterEach(async () => {
  await gw?.close();
  await up?.close();
  gw = null;
  up = null;
});

async function get(url: string, h: Record<string, string> = {}) {
  const r = await fetch(url, { headers: h });
  return { status: r.status, ran: r.headers.get("x-filter-ran"), body: await r.text() };
}

describe("failure policy", () => {
  it("FAIL_CLOSED (default): the trapping thread answers 503 from then on; other threads serve", async () => {
    up = await startUpstream();
    gw = await startGateway({
      wasm: moduleFile("trap"),
      threads: 2,
      clusters: { b: up.address },
      defaultCluster: "b",
    });
    const r1 = await get(`${gw.url}/a`, { "x-trap": "1" }); // worker_0 traps
    const r2 = await get(`${gw.url}/b`); // worker_1
    const r3 = await get(`${gw.url}/c`); // worker_0 again: failed VM
    const r4 = await get(`${gw.url}/d`); // worker_1
    expect([r1.status, r2.status, r3.status, r4.status]).toEqual([503, 200, 503, 200]);
    expect(r1.body).toBe("");
    expect([r2.ran, r4.ran]).toEqual(["1", "1"]);
    expect(gw.accessLog.map((e) => `${e.thread} ${e.status} ${e.details}`)).toEqual([
      "worker_0 503 wasm_fail_stream",
      "worker_1 200 via_upstream",
      "worker_0 503 wasm_fail_stream",
      "worker_1 200 via_upstream",
    ]);
    expect(gw.host.threads[0]?.failed).toBe(true);
    expect(gw.host.threads[0]?.failMessage).toMatch(/^Function: proxy_on_request_headers failed: /);
    expect(up.requests.map((r) => r.url)).toEqual(["/b", "/d"]);
  });

  it("FAIL_OPEN: requests on the failed thread skip the filter and reach the upstream", async () => {
    up = await startUpstream();
    gw = await startGateway({
      wasm: moduleFile("trap"),
      threads: 1,
      clusters: { b: up.address },
      defaultCluster: "b",
      failurePolicy: "FAIL_OPEN",
    });
    const r1 = await get(`${gw.url}/a`, { "x-trap": "1" });
    const r2 = await get(`${gw.url}/b`);
    expect([r1.status, r2.status]).toEqual([200, 200]);
    expect([r1.ran, r2.ran]).toEqual([null, null]);
    expect(up.requests.map((r) => r.url)).toEqual(["/a", "/b"]);
  });

  it("FAIL_RELOAD: the next request on the failed thread gets a freshly started VM", async () => {
    up = await startUpstream();
    gw = await startGateway({
      wasm: moduleFile("trap"),
      threads: 1,
      clusters: { b: up.address },
      defaultCluster: "b",
      failurePolicy: "FAIL_RELOAD",
      reloadBackoffMs: 0,
    });
    const before = gw.host.threads[0];
    const r1 = await get(`${gw.url}/a`, { "x-trap": "1" });
    const r2 = await get(`${gw.url}/b`);
    expect([r1.status, r2.status]).toEqual([503, 200]);
    expect(r2.ran).toBe("1");
    expect(gw.host.reloads).toBe(1);
    expect(gw.host.threads[0]).not.toBe(before);
    expect(gw.host.threads[0]?.failed).toBe(false);
  });

  it("FAIL_RELOAD respects the backoff: within it the failed VM still answers 503", async () => {
    up = await startUpstream();
    gw = await startGateway({
      wasm: moduleFile("trap"),
      threads: 1,
      clusters: { b: up.address },
      defaultCluster: "b",
      failurePolicy: "FAIL_RELOAD",
      reloadBackoffMs: 60_000,
    });
    await get(`${gw.url}/a`, { "x-trap": "1" });
    expect((await get(`${gw.url}/b`)).status).toBe(503);
    expect(gw.host.reloads).toBe(0);
  });

  it("an SDK filter that writes request headers after Continue traps (BadArgument → CHECK_RESULT)", async () => {
    up = await startUpstream();
    gw = await startGateway({
      wasm: moduleFile("sdk_filter"),
      threads: 1,
      clusters: { b: up.address },
      defaultCluster: "b",
    });
    const r = await fetch(`${gw.url}/x`, { method: "POST", body: "payload" });
    expect(r.status).toBe(503);
    expect(gw.host.threads[0]?.failMessage).toMatch(/^Function: proxy_on_request_body failed/);
    // The SDK logged the status it refused before throwing.
    expect(gw.host.logs()).toContain("[CRITICAL]: 2");
    expect(up.requests).toHaveLength(0);
  });
});
