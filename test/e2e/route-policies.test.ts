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

type Json = Record<string, unknown>;
type Routes = { name: string; typed_per_filter_config?: Json; route: Json }[];

const RBAC = "envoy.filters.http.rbac";
const RATE_LIMIT = "envoy.filters.http.local_ratelimit";
const TRUSTED = { "x-client": "trusted" };

function routesOf(cfg: Json): Routes {
  const listener = (cfg.static_resources as { listeners: Json[] }).listeners[0] as Json;
  const hcm = (((listener.filter_chains as Json[])[0] as Json).filters as Json[])[0]?.typed_config as Json;
  return ((hcm.route_config as Json).virtual_hosts as Json[])[0]?.routes as Routes;
}

function filtersOf(cfg: Json): Json[] {
  const listener = (cfg.static_resources as { listeners: Json[] }).listeners[0] as Json;
  const hcm = (((listener.filter_chains as Json[])[0] as Json).filters as Json[])[0]?.typed_config as Json;
  return hcm.http_filters as Json[];
}

/** Envoy Gateway's shape of a SecurityPolicy / BackendTrafficPolicy on the route. */
function withPolicies(o: { rateLimit?: number; timeout?: string }) {
  return (cfg: Json) => {
    const filters = filtersOf(cfg);
    const router = filters.findIndex((f) => f.name === "envoy.filters.http.router");
    filters.splice(
      router,
      0,
      {
        name: RBAC,
        typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC" },
      },
      {
        name: RATE_LIMIT,
        typed_config: {
          "@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
          stat_prefix: "http_local_rate_limiter",
        },
      },
    );
    const route = routesOf(cfg).find((r) => r.name === "inference") as Routes[number];
    route.typed_per_filter_config = {
      [RBAC]: {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute",
        rbac: {
          rules: {
            action: "ALLOW",
            policies: {
              trusted: {
                permissions: [{ any: true }],
                principals: [{ header: { name: "x-client", string_match: { exact: "trusted" } } }],
              },
            },
          },
        },
      },
      ...(o.rateLimit === undefined
        ? {}
        : {
            [RATE_LIMIT]: {
              "@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
              stat_prefix: "http_local_rate_limiter",
              token_bucket: { max_tokens: o.rateLimit, tokens_per_fill: o.rateLimit, fill_interval: "3600s" },
              filter_enabled: { default_value: { numerator: 100, denominator: "HUNDRED" } },
              filter_enforced: { default_value: { numerator: 100, denominator: "HUNDRED" } },
            },
          }),
    };
    if (o.timeout !== undefined) route.route.timeout = o.timeout;
  };
}

/** The artifacts' shape before: a first route for requests with a destination, to ORIGINAL_DST. */
function twoRouteShape(cfg: Json): void {
  (cfg.static_resources as { clusters: Json[] }).clusters.push({
    name: "kvroute_original_dst",
    type: "ORIGINAL_DST",
    lb_policy: "CLUSTER_PROVIDED",
    original_dst_lb_config: { use_http_header: true, http_header_name: "x-gateway-destination-endpoint" },
  });
  routesOf(cfg).unshift({
    name: "kvroute-destination",
    match: { prefix: "/", headers: [{ name: "x-gateway-destination-endpoint", present_match: true }] },
    route: { cluster: "kvroute_original_dst", timeout: "0s" },
  } as Routes[number]);
}

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
