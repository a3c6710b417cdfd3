// The pieces of the Node host between the Wasm filter and the upstream: Envoy's destination
// address parser, the override_host and ORIGINAL_DST clusters, route selection, and the policy
// filters with their per-route config — each checked with the near misses a real Envoy treats
// differently.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseDocument } from "yaml";
import { listenerRouting } from "../../host/envoy-listener.ts";
import { HeaderMap } from "../../host/header-map.ts";
import { parseDestination } from "../../host/original-dst.ts";
import { LocalRateLimitFilter, RbacFilter } from "../../host/policy-filters.ts";
import { type RouteEntry, selectRoute } from "../../host/routes.ts";
import { UpstreamCluster } from "../../host/upstream-cluster.ts";

const headers = (pairs: Record<string, string | string[]>) =>
  new HeaderMap(
    Object.entries(pairs).flatMap(([k, v]) =>
      Array.isArray(v) ? v.map((x) => [k, x] as [string, string]) : [[k, v]],
    ),
  );

describe("parseDestination follows Envoy's parseInternetAddressAndPortNoThrow", () => {
  it.each([
    ["10.0.0.1:8000", { host: "10.0.0.1", port: 8000 }],
    // absl::SimpleAtoi: whitespace around the port and a "+" are accepted, and port 0 is a port.
    ["10.0.0.1:0", { host: "10.0.0.1", port: 0 }],
    ["10.0.0.1: 8000", { host: "10.0.0.1", port: 8000 }],
    ["10.0.0.1:8000 ", { host: "10.0.0.1", port: 8000 }],
    ["10.0.0.1:\t+8000\r", { host: "10.0.0.1", port: 8000 }],
    ["[::1]:8000", { host: "::1", port: 8000 }],
    ["[::1]: 0", { host: "::1", port: 0 }],
    ["10.0.0.1:65535", { host: "10.0.0.1", port: 65535 }],
  ])("%j → %j", (value, want) => expect(parseDestination(value)).toEqual(want));

  it.each([
    "10.0.0.1:65536",
    "10.0.0.1:-1",
    "10.0.0.1:",
    "10.0.0.1",
    " 10.0.0.1:8000", // whitespace around the address is not the port's
    "10.0.0.1 :8000",
    "10.0.0.1:80 00",
    "10.0.0.1:8000,10.0.0.2:8000", // a list is not one address (ORIGINAL_DST: host invalid)
    "host.example:8000",
    "::1:8000", // IPv6 needs brackets
    "[10.0.0.1]:8000",
    "",
  ])("%j → no address", (value) => expect(parseDestination(value)).toBeNull());
});

describe("override_host: the header picks among the cluster's own endpoints", () => {
  const cluster = new UpstreamCluster("engines", {
    endpoints: ["10.0.0.1:8000", "10.0.0.2:8000", "[fd00::1]:8000"],
    overrideHostHeader: "x-gateway-destination-endpoint",
  });
  const pick = (v?: string) =>
    cluster.choose(headers(v === undefined ? {} : { "x-gateway-destination-endpoint": v })).target;

  it("an endpoint of the cluster is chosen, also from a list, also padded", () => {
    expect(pick("10.0.0.2:8000")).toEqual({ host: "10.0.0.2", port: 8000 });
    expect(pick("10.9.9.9:1, 10.0.0.2:8000")).toEqual({ host: "10.0.0.2", port: 8000 });
    expect(pick("[fd00::1]:8000")).toEqual({ host: "fd00::1", port: 8000 });
  });

  it("an address outside the cluster is never the target: the fallback balances over the endpoints", () => {
    const ours = new Set(["10.0.0.1:8000", "10.0.0.2:8000", "fd00::1:8000"]);
    for (const v of [undefined, "", "169.254.169.254:80", "10.0.0.2:8001", "10.0.0.2", "10.0.0.2:08000"]) {
      const t = pick(v);
      expect(t && ours.has(`${t.host}:${t.port}`), String(v)).toBe(true);
    }
  });
});

describe("ORIGINAL_DST reads its header as one address", () => {
  const cluster = new UpstreamCluster("odst", {
    endpoints: [],
    originalDstHeader: "x-gateway-destination-endpoint",
  });
  it("absent: no host; invalid: no host and flagged; valid: that address", () => {
    expect(cluster.choose(headers({}))).toEqual({ target: null });
    expect(cluster.choose(headers({ "x-gateway-destination-endpoint": "a:1" }))).toEqual({
      target: null,
      originalDstHostInvalid: true,
    });
    expect(cluster.choose(headers({ "x-gateway-destination-endpoint": "10.1.2.3:0" })).target).toEqual({
      host: "10.1.2.3",
      port: 0,
    });
  });
});

describe("route selection", () => {
  const route = (name: string, match: RouteEntry["match"]): RouteEntry => ({
    name,
    match,
    cluster: "c",
    timeoutMs: 0,
    perFilterConfig: {},
  });
  const table = [
    route("dest", { prefix: "/", headers: [{ name: "x-gateway-destination-endpoint", present: true }] }),
    route("v1", { prefix: "/v1/" }),
    route("exact", { path: "/healthz" }),
  ];
  it("first match wins; a header write re-picks; the query is not part of the path", () => {
    const h = headers({ ":path": "/v1/chat/completions?x=1" });
    expect(selectRoute(table, h)?.name).toBe("v1");
    h.set("x-gateway-destination-endpoint", "10.0.0.1:1");
    expect(selectRoute(table, h)?.name).toBe("dest");
    expect(selectRoute(table, headers({ ":path": "/healthz?full" }))?.name).toBe("exact");
    expect(selectRoute(table, headers({ ":path": "/healthz/x" }))).toBeNull();
  });
});

describe("RBAC with per-route config", () => {
  const allowCidr = (prefix: string, len: number) => ({
    "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute",
    rbac: {
      rules: {
        action: "ALLOW",
        policies: {
          office: {
            permissions: [{ any: true }],
            principals: [{ remote_ip: { address_prefix: prefix, prefix_len: len } }],
          },
        },
      },
    },
  });
  const withRoute = (cfg: unknown): RouteEntry => ({
    name: "r",
    match: { prefix: "/" },
    cluster: "c",
    timeoutMs: 0,
    perFilterConfig: { rbac: cfg },
  });
  const rbac = new RbacFilter("rbac", {});
  const decide = (route: RouteEntry | null, ip: string) =>
    rbac.decodeHeaders(headers({ ":path": "/" }), route, { remoteIp: ip })?.status ?? 200;

  it("the route's CIDR: inside allowed; the addresses just outside, another family and a mapped IPv4 denied", () => {
    const r = withRoute(allowCidr("10.1.2.0", 24));
    expect(decide(r, "10.1.2.0")).toBe(200);
    expect(decide(r, "10.1.2.255")).toBe(200);
    for (const ip of ["10.1.3.0", "10.1.1.255", "10.1.2", "::ffff:10.1.2.7", "fd00::1"])
      expect(decide(r, ip), ip).toBe(403);
  });

  it("a /23 holds both halves and nothing past them", () => {
    const r = withRoute(allowCidr("10.1.2.0", 23));
    expect(decide(r, "10.1.3.200")).toBe(200);
    expect(decide(r, "10.1.4.0")).toBe(403);
  });

  it("no per-route config: the listener's (empty: not enforced); FilterConfig disabled: off", () => {
    expect(decide(null, "192.0.2.1")).toBe(200);
    expect(
      decide(
        withRoute({ "@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig", disabled: true }),
        "192.0.2.1",
      ),
    ).toBe(200);
  });
});

describe("local rate limit with per-route config", () => {
  it("the route's bucket: max_tokens pass, then 429; not enforced → counted only", () => {
    const bucket = (enforced: number) => ({
      stat_prefix: "rl",
      token_bucket: { max_tokens: 2, tokens_per_fill: 2, fill_interval: "3600s" },
      filter_enabled: { default_value: { numerator: 100 } },
      filter_enforced: { default_value: { numerator: enforced } },
    });
    const rl = new LocalRateLimitFilter("rl", { stat_prefix: "rl" });
    const route = (cfg: unknown): RouteEntry => ({
      name: "r",
      match: {},
      cluster: "c",
      timeoutMs: 0,
      perFilterConfig: { rl: cfg },
    });
    const enforced = route(bucket(100));
    const statuses = [0, 1, 2].map(
      () => rl.decodeHeaders(headers({}), enforced, { remoteIp: "10.0.0.1" })?.status ?? 200,
    );
    expect(statuses).toEqual([200, 200, 429]);
    const shadow = route(bucket(0));
    const shadowStatuses = [0, 1, 2].map(
      () => rl.decodeHeaders(headers({}), shadow, { remoteIp: "10.0.0.1" })?.status ?? 200,
    );
    expect(shadowStatuses).toEqual([200, 200, 200]);
    // The listener's config has no bucket: a route without its own is not limited.
    expect(rl.decodeHeaders(headers({}), null, { remoteIp: "10.0.0.1" })).toBeNull();
  });
});

describe("listenerRouting reads what it models and refuses the rest by name", () => {
  // biome-ignore lint/suspicious/noExplicitAny: the tests edit parsed Envoy JSON whose shape envoy.yaml fixes
  type Cfg = Record<string, any>;
  const base = () => {
    const cfg = parseDocument(
      readFileSync(new URL("../../envoy/envoy.yaml", import.meta.url), "utf8"),
    ).toJS();
    return cfg as Cfg;
  };
  const hcmOf = (cfg: Cfg) => cfg.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const rbacFilter = (rbac: Record<string, unknown>) => ({
    name: "envoy.filters.http.rbac",
    typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC", ...rbac },
  });
  const withFilter = (f: unknown, mutate: (cfg: Cfg) => void = () => {}) => {
    const cfg = base();
    const filters = hcmOf(cfg).http_filters;
    filters.splice(filters.length - 1, 0, f);
    mutate(cfg);
    return cfg;
  };

  it("envoy.yaml: one route to the override_host engines, the guard is not a policy filter", () => {
    const r = listenerRouting(base());
    expect(r.routes.map((x) => [x.name, x.cluster, x.timeoutMs])).toEqual([
      ["inference", "kvroute_engines", 0],
    ]);
    expect(r.clusters.kvroute_engines?.overrideHostHeader).toBe("x-gateway-destination-endpoint");
    expect(r.policyFilters).toEqual([]);
    expect(r.earlyRemoveHeaders).toEqual([]);
  });

  it("finds the Wasm filter by type, as Envoy Gateway names it envoy.filters.http.wasm/<IR name>", () => {
    const cfg = withFilter(rbacFilter({}), (c) => {
      const wasm = hcmOf(c).http_filters.find((f: { name: string }) => f.name === "envoy.filters.http.wasm");
      wasm.name = "envoy.filters.http.wasm/envoyextensionpolicy/default/kvroute/wasm/0";
    });
    expect(listenerRouting(cfg).policyFilters.map((f) => f.name)).toEqual(["envoy.filters.http.rbac"]);
  });

  it.each([
    ["an RBAC matcher tree", withFilter(rbacFilter({ matcher: {} })), /RBAC matcher/],
    [
      "a per-route RBAC matcher tree",
      withFilter(rbacFilter({}), (c) => {
        hcmOf(c).route_config.virtual_hosts[0].routes[0].typed_per_filter_config = {
          "envoy.filters.http.rbac": { rbac: { matcher: {} } },
        };
      }),
      /RBAC matcher/,
    ],
    ["a disabled filter", withFilter({ ...rbacFilter({}), disabled: true }), /disabled/],
    [
      "an unknown filter after the Wasm filter",
      withFilter({ name: "envoy.filters.http.lua", typed_config: { "@type": "x" } }),
      /lua/,
    ],
    [
      "a path_separated_prefix match",
      withFilter(rbacFilter({}), (c) => {
        hcmOf(c).route_config.virtual_hosts[0].routes[0].match = { path_separated_prefix: "/v1" };
      }),
      /path_separated_prefix/,
    ],
  ])("%s", (_name, cfg, why) => expect(() => listenerRouting(cfg)).toThrow(why));

  it("early header removals (Envoy Gateway's earlyRequestHeaders) are read", () => {
    const cfg = base();
    hcmOf(cfg).early_header_mutation_extensions = [
      {
        name: "envoy.http.early_header_mutation.header_mutation",
        typed_config: {
          "@type":
            "type.googleapis.com/envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation",
          mutations: [{ remove: "x-gateway-destination-endpoint" }],
        },
      },
    ];
    expect(listenerRouting(cfg).earlyRemoveHeaders).toEqual(["x-gateway-destination-endpoint"]);
  });
});
