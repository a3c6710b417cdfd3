// The operator's policy filters that Envoy Gateway places after the Wasm filter
// (internal/xds/translator/httpfilters.go orders Wasm at 200+, RBAC 301, local rate limit 302,
// global rate limit 303): they read their per-route config from the route picked *after* the Wasm
// filter wrote its headers (routes.ts). Two are modelled, enough to show whether a routed request
// keeps the route's policies:
//   - envoy.filters.http.rbac (extensions/filters/http/rbac): the route's RBACPerRoute replaces
//     the listener's RBAC; no rules = not enforced; ALLOW denies what no policy matches, DENY what
//     one does; a denial is 403 "RBAC: access denied". Principals: any, remote_ip (the downstream
//     address the connection manager decided, source.address), header, or_ids / and_ids / not_id;
//     permissions: any, header, url_path prefix/exact, or_rules / and_rules / not_rule.
//   - envoy.filters.http.local_ratelimit (extensions/filters/http/local_ratelimit): the route's
//     LocalRateLimit replaces the listener's; a token bucket starting full, tokens_per_fill added
//     every fill_interval up to max_tokens; filter_enabled / filter_enforced absent = 0 % (as in
//     Envoy: the filter then only counts); a limited request is 429 "local_rate_limited".
// Per-route config may come wrapped in envoy.config.route.v3.FilterConfig ({config, disabled}).
import { BlockList, isIP } from "node:net";
import type { HeaderMap } from "./header-map.ts";
import type { RouteEntry } from "./routes.ts";

type Json = Record<string, unknown>;

export interface PolicyReply {
  status: number;
  body: string;
  details: string;
}

/** What a policy filter sees of the stream. */
export interface PolicyContext {
  /** source.address's IP: the client as the connection manager decided it. */
  remoteIp: string;
}

export interface PolicyFilter {
  /** The HTTP filter's name: the key of its per-route config in typed_per_filter_config. */
  readonly name: string;
  /** A local reply to end the request with, or null to let it continue. */
  decodeHeaders(h: HeaderMap, route: RouteEntry | null, ctx: PolicyContext): PolicyReply | null;
}

const RBAC = "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC";
const RBAC_PER_ROUTE = "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute";
const LOCAL_RATE_LIMIT =
  "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit";
const FILTER_CONFIG = "type.googleapis.com/envoy.config.route.v3.FilterConfig";

/** The route's config for `filter`: undefined when it has none, "disabled" when it turns the filter off. */
function perRoute(route: RouteEntry | null, filter: string): Json | "disabled" | undefined {
  const raw = route?.perFilterConfig[filter] as Json | undefined;
  if (raw === undefined) return undefined;
  if (raw["@type"] === FILTER_CONFIG) {
    if (raw.disabled === true) return "disabled";
    return raw.config as Json | undefined;
  }
  return raw;
}

// --- RBAC ------------------------------------------------------------------------------------

function headerMatches(h: HeaderMap, m: Json): boolean {
  const name = m.name as string;
  const values = h.getAll(name);
  if (m.present_match !== undefined) return values.length > 0 === (m.present_match as boolean);
  if (values.length === 0) return false;
  const joined = values.join(",");
  const sm = (m.string_match as Json | undefined) ?? {};
  const exact = (sm.exact as string | undefined) ?? (m.exact_match as string | undefined);
  if (exact !== undefined) return joined === exact;
  if (sm.prefix !== undefined) return joined.startsWith(sm.prefix as string);
  return true;
}

function inCidr(ip: string, cidr: Json): boolean {
  const prefix = cidr.address_prefix as string;
  const len = (cidr.prefix_len as number | undefined) ?? (isIP(prefix) === 6 ? 128 : 32);
  // Envoy's CidrRange::isInRange compares within one IP version: a v4 range never holds a v6
  // address (an IPv4-mapped one included), and the other way round.
  const family = isIP(prefix) === 6 ? "ipv6" : "ipv4";
  if (isIP(ip) !== (family === "ipv6" ? 6 : 4)) return false;
  const list = new BlockList();
  list.addSubnet(prefix, len, family);
  return list.check(ip, family);
}

function principalMatches(p: Json, h: HeaderMap, ctx: PolicyContext): boolean {
  if (p.any === true) return true;
  if (p.remote_ip !== undefined) return inCidr(ctx.remoteIp, p.remote_ip as Json);
  if (p.source_ip !== undefined) return inCidr(ctx.remoteIp, p.source_ip as Json);
  if (p.header !== undefined) return headerMatches(h, p.header as Json);
  if (p.or_ids !== undefined)
    return ((p.or_ids as Json).ids as Json[]).some((x) => principalMatches(x, h, ctx));
  if (p.and_ids !== undefined)
    return ((p.and_ids as Json).ids as Json[]).every((x) => principalMatches(x, h, ctx));
  if (p.not_id !== undefined) return !principalMatches(p.not_id as Json, h, ctx);
  throw new Error(`RBAC principal not modelled by the Node host: ${JSON.stringify(p)}`);
}

function permissionMatches(p: Json, h: HeaderMap): boolean {
  if (p.any === true) return true;
  if (p.header !== undefined) return headerMatches(h, p.header as Json);
  if (p.url_path !== undefined) {
    const path = (h.get(":path") ?? "/").split("?")[0] as string;
    const sm = ((p.url_path as Json).path as Json | undefined) ?? {};
    if (sm.exact !== undefined) return path === sm.exact;
    if (sm.prefix !== undefined) return path.startsWith(sm.prefix as string);
    return true;
  }
  if (p.or_rules !== undefined)
    return ((p.or_rules as Json).rules as Json[]).some((x) => permissionMatches(x, h));
  if (p.and_rules !== undefined)
    return ((p.and_rules as Json).rules as Json[]).every((x) => permissionMatches(x, h));
  if (p.not_rule !== undefined) return !permissionMatches(p.not_rule as Json, h);
  throw new Error(`RBAC permission not modelled by the Node host: ${JSON.stringify(p)}`);
}

/** The name of the first policy that matches, or null. */
function matchingPolicy(rules: Json, h: HeaderMap, ctx: PolicyContext): string | null {
  for (const [name, policy] of Object.entries((rules.policies as Record<string, Json> | undefined) ?? {})) {
    const permitted = ((policy.permissions as Json[] | undefined) ?? []).some((p) => permissionMatches(p, h));
    const principal = ((policy.principals as Json[] | undefined) ?? []).some((p) =>
      principalMatches(p, h, ctx),
    );
    if (permitted && principal) return name;
  }
  return null;
}

export class RbacFilter implements PolicyFilter {
  constructor(
    readonly name: string,
    /** The listener-level RBAC config (its `rules`, if any). */
    private readonly listener: Json,
  ) {
    if (listener.matcher !== undefined || listener.shadow_matcher !== undefined)
      throw new Error(`${name}: an RBAC matcher is not modelled by the Node host (use rules)`);
  }

  decodeHeaders(h: HeaderMap, route: RouteEntry | null, ctx: PolicyContext): PolicyReply | null {
    const own = perRoute(route, this.name);
    if (own === "disabled") return null;
    // RBACPerRoute wraps the RBAC config in `rbac`; a missing one means the listener's applies.
    const config = own === undefined ? this.listener : ((own.rbac as Json | undefined) ?? {});
    const rules = config.rules as Json | undefined;
    if (rules === undefined) return null;
    const matched = matchingPolicy(rules, h, ctx);
    const deny = (rules.action ?? "ALLOW") === "ALLOW" ? matched === null : matched !== null;
    if (!deny) return null;
    return {
      status: 403,
      body: "RBAC: access denied",
      details: `rbac_access_denied_matched_policy[${matched ?? "none"}]`,
    };
  }
}

// --- Local rate limit --------------------------------------------------------------------------

/** A protobuf Duration in JSON ("1s", "0.250s") as milliseconds. */
export function durationMs(d: unknown): number {
  if (typeof d !== "string" || !/^\d+(\.\d+)?s$/.test(d)) throw new Error(`not a protobuf Duration: ${d}`);
  return Math.round(Number(d.slice(0, -1)) * 1000);
}

function fractionOn(f: Json | undefined): boolean {
  // RuntimeFractionalPercent.default_value: {numerator, denominator HUNDRED}; absent = 0 %.
  const v = f?.default_value as Json | undefined;
  if (v === undefined) return false;
  const den =
    { HUNDRED: 100, TEN_THOUSAND: 10_000, MILLION: 1_000_000 }[(v.denominator as string) ?? "HUNDRED"] ?? 100;
  const num = (v.numerator as number | undefined) ?? 0;
  return Math.random() * den < num;
}

class TokenBucket {
  private tokens: number;
  private last = performance.now();
  constructor(
    private readonly max: number,
    private readonly perFill: number,
    private readonly fillMs: number,
  ) {
    this.tokens = max;
  }
  take(): boolean {
    const now = performance.now();
    const fills = Math.floor((now - this.last) / this.fillMs);
    if (fills > 0) {
      this.tokens = Math.min(this.max, this.tokens + fills * this.perFill);
      this.last += fills * this.fillMs;
    }
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }
}

export class LocalRateLimitFilter implements PolicyFilter {
  /** One bucket per config object: the listener's, and each route's. */
  private readonly buckets = new WeakMap<Json, TokenBucket>();

  constructor(
    readonly name: string,
    private readonly listener: Json,
  ) {}

  private bucket(config: Json): TokenBucket | null {
    const tb = config.token_bucket as Json | undefined;
    if (tb === undefined) return null;
    let b = this.buckets.get(config);
    if (b === undefined) {
      b = new TokenBucket(
        tb.max_tokens as number,
        (tb.tokens_per_fill as number | undefined) ?? 1,
        durationMs(tb.fill_interval),
      );
      this.buckets.set(config, b);
    }
    return b;
  }

  decodeHeaders(_h: HeaderMap, route: RouteEntry | null, _ctx: PolicyContext): PolicyReply | null {
    const own = perRoute(route, this.name);
    if (own === "disabled") return null;
    const config = own ?? this.listener;
    const bucket = this.bucket(config);
    if (bucket === null || !fractionOn(config.filter_enabled as Json | undefined)) return null;
    if (bucket.take()) return null;
    if (!fractionOn(config.filter_enforced as Json | undefined)) return null;
    return { status: 429, body: "local_rate_limited", details: "local_rate_limited" };
  }
}

/** The policy filter for an http_filters entry, or null when the host does not model that filter. */
export function policyFilterFromEnvoy(name: string, typedConfig: Json): PolicyFilter | null {
  switch (typedConfig["@type"]) {
    case RBAC:
      return new RbacFilter(name, typedConfig);
    case LOCAL_RATE_LIMIT:
      return new LocalRateLimitFilter(name, typedConfig);
    default:
      return null;
  }
}

export const POLICY_TYPES = { RBAC, RBAC_PER_ROUTE, LOCAL_RATE_LIMIT, FILTER_CONFIG } as const;
