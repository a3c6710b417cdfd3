// A trap fails that thread's VM (Envoy: WasmBase::fail). The failing request gets a 503 with
// details wasm_fail_stream; later requests on that thread get a fresh VM under FAIL_RELOAD (the
// default of Envoy >= 1.33 when no policy is set), a 503 under FAIL_CLOSED, or pass the filter
// untouched under FAIL_OPEN.
import { afterEach, describe, expect, it } from "vitest";
import { envoyConfigFor, shippedGatewayOptions } from "../../control-plane/src/cli/envoy-config.ts";
import { listenerRouting } from "../../host/envoy-listener.ts";
import { type Gateway, startGateway } from "../../host/gateway.ts";
import { TRUSTED, withPolicies } from "../e2e/route-policy-config.ts";
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
  it("FAIL_CLOSED: the trapping thread answers 503 from then on; other threads serve", async () => {
    up = await startUpstream();
    gw = await startGateway({
      wasm: moduleFile("trap"),
      threads: 2,
      failurePolicy: "FAIL_CLOSED",
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

  it("no policy set means FAIL_RELOAD: the trapping request gets 503, the next one a fresh VM that ran _start, on_vm_start and on_configure again", async () => {
    up = await startUpstream();
    let now = 1_000_000;
    gw = await startGateway({
      wasm: moduleFile("trap"),
      threads: 1,
      mainThread: false,
      clusters: { b: up.address },
      defaultCluster: "b",
      clock: () => now,
    });
    const before = gw.host.threads[0];
    const startup = () => gw?.host.logs((m) => m.startsWith("trap: ")) ?? [];
    expect(startup()).toEqual(["trap: _start", "trap: on_vm_start root=1", "trap: on_configure root=1"]);
    const r1 = await get(`${gw.url}/a`, { "x-trap": "1" });
    expect(r1.status).toBe(503);
    expect(gw.accessLog[0]?.details).toBe("wasm_fail_stream");
    // The VM was loaded more than 1.5 × the 1 s base backoff ago: the next stream reloads it.
    now += 1500;
    const r2 = await get(`${gw.url}/b`);
    expect([r2.status, r2.ran]).toEqual([200, "1"]);
    expect(gw.host.reloads).toBe(1);
    expect(gw.host.threads[0]).not.toBe(before);
    expect(gw.host.threads[0]?.failed).toBe(false);
    // A fresh clone: fresh memory, _start again, then the root context of the current config.
    expect(startup()).toEqual([
      "trap: _start",
      "trap: on_vm_start root=1",
      "trap: on_configure root=1",
      "trap: _start",
      "trap: on_vm_start root=1",
      "trap: on_configure root=1",
    ]);
    expect(up.requests.map((r) => r.url)).toEqual(["/b"]);
  });

  it("FAIL_RELOAD waits a jittered [base, 1.5 × base) after the VM's last load; meanwhile the failed VM answers 503", async () => {
    up = await startUpstream();
    let now = 1_000_000;
    gw = await startGateway({
      wasm: moduleFile("trap"),
      threads: 1,
      mainThread: false,
      clusters: { b: up.address },
      defaultCluster: "b",
      failurePolicy: "FAIL_RELOAD",
      reloadBackoffMs: 2000,
      clock: () => now,
    });
    await get(`${gw.url}/a`, { "x-trap": "1" });
    now += 1999; // below the base: never
    expect((await get(`${gw.url}/b`)).status).toBe(503);
    expect(gw.host.reloads).toBe(0);
    now += 1001; // 3000 ms = 1.5 × base: always
    expect((await get(`${gw.url}/c`)).status).toBe(200);
    expect(gw.host.reloads).toBe(1);
    // The reload counts as a load: a second trap right away waits again.
    await get(`${gw.url}/d`, { "x-trap": "1" });
    now += 1999;
    expect((await get(`${gw.url}/e`)).status).toBe(503);
    expect(gw.host.reloads).toBe(1);
    expect(up.requests.map((r) => r.url)).toEqual(["/c"]);
  });

  it("the main thread's VM serves no streams, so FAIL_RELOAD never replaces it", async () => {
    up = await startUpstream();
    let now = 1_000_000;
    gw = await startGateway({
      wasm: moduleFile("trap"),
      threads: 1,
      clusters: { b: up.address },
      defaultCluster: "b",
      clock: () => now,
    });
    const main = gw.host.main;
    main?.fail("test: the main thread's VM trapped");
    now += 5000;
    expect((await get(`${gw.url}/a`)).status).toBe(200);
    expect(gw.host.main).toBe(main);
    expect(gw.host.main?.failed).toBe(true);
    expect(gw.host.reloads).toBe(0);
  });

  it("an SDK filter that writes request headers after Continue traps (BadArgument → CHECK_RESULT)", async () => {
    up = await startUpstream();
    gw = await startGateway({
      wasm: moduleFile("sdk_filter"),
      threads: 1,
      failurePolicy: "FAIL_CLOSED",
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

describe("a failed VM bypassed under envoy.yaml's shape", () => {
  it("FAIL_OPEN: the one route's cluster still balances over the engines, the route's RBAC still applies, a client's destination header is gone", async () => {
    up = await startUpstream();
    const upstream = up;
    // envoy/envoy.yaml as the demo writes it, its engines cluster pointed at the upstream, an RBAC
    // after the Wasm filter with the rule on the route (Envoy Gateway's shape).
    const cfg = envoyConfigFor({
      listenPort: 0,
      adminPort: 0,
      controlPlane: "127.0.0.1:9",
      engines: [upstream.address],
      token: "t-0123456789abcdef",
      wasm: moduleFile("trap"),
    });
    withPolicies({})(cfg);
    gw = await startGateway({
      wasm: moduleFile("trap"),
      threads: 1,
      failurePolicy: "FAIL_OPEN",
      ...listenerRouting(cfg),
      removeRequestHeaders: shippedGatewayOptions().removeRequestHeaders,
    });
    // Under FAIL_OPEN even the trapping request goes on, past the failed filter.
    const trapped = await get(`${gw.url}/a`, { "x-trap": "1", ...TRUSTED });
    expect([trapped.status, trapped.ran]).toEqual([200, null]);
    expect(gw.host.threads[0]?.failed).toBe(true);
    // Bypassed: no filter ran, the header guard dropped the client's destination, the route's
    // cluster picked the engine, and the route's RBAC judged the client.
    const served = await get(`${gw.url}/b`, { ...TRUSTED, "x-gateway-destination-endpoint": "127.0.0.1:1" });
    expect([served.status, served.ran]).toEqual([200, null]);
    expect((await get(`${gw.url}/c`)).status).toBe(403);
    expect(upstream.requests.map((r) => r.url)).toEqual(["/a", "/b"]);
    expect(gw.accessLog.at(-2)?.destination).toBe("-");
  });
});
