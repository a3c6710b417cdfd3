// Which of the pool's endpoints a gateway's subset hint makes eligible. llm-d-router (GAIE's
// reference picker) keeps a hint entry's address and drops its port
// (pkg/epp/requestcontrol/candidates.go, Locate): a pod is eligible when its IP is listed, so
// every rank port of that pod is too — a gateway whose hint names a pod's service port still
// reaches a DP rank that listens on another target port. "address" keeps kvroute's older, exact
// ip:port comparison for gateways that list every rank port themselves.
export type SubsetMatch = "ip" | "address";

/** The host part of `ip:port` / `[v6]:port` (the whole entry when it has no port), brackets off. */
export function hostOf(entry: string): string {
  const colon = entry.lastIndexOf(":");
  const bracket = entry.lastIndexOf("]");
  const host =
    colon > bracket && (bracket >= 0 || entry.indexOf(":") === colon) ? entry.slice(0, colon) : entry;
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/**
 * The endpoints (ip:port, as the filter's slots name them) eligible under `hint`: in "ip" mode
 * every endpoint whose host a hint entry names, in "address" mode the hint's entries as they are.
 */
export function eligibleEndpoints(
  hint: readonly string[],
  mode: SubsetMatch,
  endpoints: () => string[],
): string[] {
  if (mode === "address" || hint.length === 0) return [...hint];
  const hosts = new Set(hint.map(hostOf));
  return endpoints().filter((e) => hosts.has(hostOf(e)));
}
