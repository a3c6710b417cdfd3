// A virtual host's route table as Envoy's router picks from it (source/common/router/config_impl.cc):
// routes are tried in order and the first whose match holds wins; no match is a 404 local reply
// (route_not_found). The pick is cached per stream and picked again after a route-cache clear —
// which a Proxy-Wasm module of ABI 0.2.1 causes by writing any request header — so filters after
// the Wasm filter, and the router, see the route of the headers as the Wasm filter left them.
// What a route carries here is what decides whether a routed request keeps the operator's
// policies: its cluster, its timeout, and its typed_per_filter_config (per-route RBAC, rate
// limits) that the policy filters read (policy-filters.ts).
import type { HeaderMap } from "./header-map.ts";

export interface HeaderMatch {
  name: string;
  /** present_match: true (or false: the header must be absent). */
  present?: boolean;
  /** string_match.exact (or the older exact_match). */
  exact?: string;
}

export interface RouteMatch {
  /** `prefix` (the default "/" matches every path). */
  prefix?: string;
  /** `path`: the whole path before the query, exactly. */
  path?: string;
  headers?: HeaderMatch[];
}

export interface RouteEntry {
  name: string;
  match: RouteMatch;
  /** route.cluster */
  cluster: string;
  /**
   * route.timeout in ms; 0 disables it. Envoy's default when a route sets none is 15 s. It runs from
   * the end of the downstream request to the end of the upstream response.
   */
  timeoutMs: number;
  /** typed_per_filter_config: HTTP filter name → that filter's per-route config (as parsed). */
  perFilterConfig: Record<string, unknown>;
}

/** Envoy's default route timeout (RouteAction.timeout unset). */
export const ENVOY_DEFAULT_ROUTE_TIMEOUT_MS = 15_000;

function headerHolds(h: HeaderMap, m: HeaderMatch): boolean {
  // Envoy's HeaderUtility matches a repeated header against its values joined with ",".
  const values = h.getAll(m.name);
  if (m.present !== undefined) return m.present === values.length > 0;
  if (values.length === 0) return false;
  if (m.exact !== undefined) return values.join(",") === m.exact;
  return true;
}

function matches(route: RouteEntry, h: HeaderMap): boolean {
  const fullPath = h.get(":path") ?? "/";
  const q = fullPath.indexOf("?");
  const path = q < 0 ? fullPath : fullPath.slice(0, q);
  const m = route.match;
  if (m.path !== undefined && path !== m.path) return false;
  if (m.prefix !== undefined && !path.startsWith(m.prefix)) return false;
  return (m.headers ?? []).every((hm) => headerHolds(h, hm));
}

/** The first route whose match holds, or null (Envoy answers 404 route_not_found). */
export function selectRoute(routes: readonly RouteEntry[], h: HeaderMap): RouteEntry | null {
  for (const r of routes) if (matches(r, h)) return r;
  return null;
}
