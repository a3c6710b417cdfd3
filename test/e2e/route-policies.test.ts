// A request kvroute routes keeps the route's policies. The gateway runs envoy/envoy.yaml's shape
// (host/envoy-listener.ts reads it) with the operator's policies added the way Envoy Gateway
// generates them: an RBAC and a local rate limit filter AFTER the Wasm filter (Envoy Gateway's
// order, internal/xds/translator/httpfilters.go), with empty listener-level configs and the rules
// in the route's typed_per_filter_config; and a route timeout. Each policy must hold both when the
// filter routes the request (it wrote x-gateway-destination-endpoint, which re-picks the route)
// and when it fails open (no control plane). The last test runs the same check on the shape the
// artifacts had before (a second, header-matched route to an ORIGINAL_DST cluster) and shows the
// denied client getting through there — the defect these tests guard against.
import { afterEach, describe, expect, it } from "vitest";
import { chat, type E2E, startE2E, synced } from "./harness.ts";
import { TRUSTED, twoRouteShape, withPolicies } from "./route-policy-config.ts";

/** Did the filter route the last request (a destination reached the router)? */
function lastRouted(e: E2E): boolean {
  const entry = e.gateway.accessLog.at(-1);
  if (entry === undefined) throw new Error("no request logged");
  // Routing writes the destination header, and a header write re-picks the route.
  if (entry.destination !== "-") expect(entry.routeCacheClears).toBeGreaterThan(0);
  return entry.destination !== "-";
}

describe("routed requests keep the route's policies", () => {
  let e: E2E | null = null;
  afterEach(async () => {
    await e?.close();
    e = null;
  });

  for (const mode of ["routed", "fail-open"] as const) {
    it(`${mode}: RBAC denies a client the route does not allow, and allows the one it does`, async () => {
      e = await startE2E({ envoy: withPolicies({}), noControlPlane: mode === "fail-open" });
      if (mode === "routed") await synced(e);
      const allowed = await chat(e, "policy", "hello", { headers: TRUSTED });
      expect(allowed.status).toBe(200);
      expect(lastRouted(e)).toBe(mode === "routed");
      // Near misses of the allowed principal: absent, another case, a prefix, a suffix, the header
      // repeated (Envoy matches a repeated header's values joined by ",").
      const nearMisses: Record<string, string>[] = [
        {},
        { "x-client": "Trusted" },
        { "x-client": "trust" },
        { "x-client": "trusted-not" },
        { "x-client": "trusted, trusted" },
      ];
      for (const headers of nearMisses) {
        const denied = await chat(e, "policy", "hello", { headers });
        expect(denied.status).toBe(403);
        expect(lastRouted(e)).toBe(mode === "routed");
        expect(e.gateway.accessLog.at(-1)?.details).toBe("rbac_access_denied_matched_policy[none]");
      }
      if (mode === "fail-open") expect(Number(e.gateway.host.counter("kvroute.requests.fail_open"))).toBe(6);
    }, 30_000);

    it(`${mode}: the route's local rate limit applies`, async () => {
      e = await startE2E({ envoy: withPolicies({ rateLimit: 2 }), noControlPlane: mode === "fail-open" });
      if (mode === "routed") await synced(e);
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        statuses.push((await chat(e, "limit", `q${i}`, { headers: TRUSTED })).status);
        expect(lastRouted(e)).toBe(mode === "routed");
      }
      expect(statuses).toEqual([200, 200, 429, 429]);
    }, 30_000);
  }

  it("routed: the route's timeout applies (504 from the gateway, not a wait for the engine)", async () => {
    // Real-time engines (timeScale 1): 2000 output tokens take seconds; the route allows 0.3 s.
    e = await startE2E({ envoy: withPolicies({ timeout: "0.3s" }), sim: { timeScale: 1 } });
    await synced(e);
    const quick = await chat(e, "timeout", "short", { headers: TRUSTED, maxTokens: 1 });
    expect(quick.status).toBe(200);
    const slow = await chat(e, "timeout", "long", { headers: TRUSTED, maxTokens: 2000 });
    expect(slow.status).toBe(504);
    expect(lastRouted(e)).toBe(true);
    expect(e.gateway.accessLog.at(-1)?.details).toBe("upstream_response_timeout");
  }, 30_000);

  it("the two-route shape the artifacts had lost the RBAC of every routed request", async () => {
    e = await startE2E({
      envoy: (cfg) => {
        withPolicies({})(cfg);
        twoRouteShape(cfg);
      },
    });
    await synced(e);
    const denied = await chat(e, "policy", "hello");
    expect(lastRouted(e)).toBe(true);
    // The filter's header write re-picked the route onto kvroute-destination, which carries no
    // per-route RBAC: the client the route denies got an answer.
    expect(denied.status).toBe(200);
  }, 30_000);
});
