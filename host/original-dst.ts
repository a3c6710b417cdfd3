// How Envoy reads a destination header as one address: Network::Utility::
// parseInternetAddressAndPortNoThrow (source/common/network/utility.cc), used by the ORIGINAL_DST
// cluster's use_http_header and, per comma-separated entry, by the override_host load balancing
// policy. "[v6]:port" splits at the last "]:", anything else at the last ":"; the address must be
// a literal IP of that family, and the port goes through absl::SimpleAtoi into a uint64 that must
// not exceed 65535 — so surrounding ASCII whitespace and a leading "+" are accepted, and so is 0.
import { isIP } from "node:net";

export interface HostPort {
  host: string;
  port: number;
}

/** absl::SimpleAtoi into a uint64, then Envoy's `> 65535` check: the port, or null. */
export function envoyPort(text: string): number | null {
  // absl strips ASCII whitespace (space, \t, \n, \v, \f, \r) on both sides, then takes one sign.
  const m = /^[ \t\n\v\f\r]*\+?([0-9]+)[ \t\n\v\f\r]*$/.exec(text);
  if (!m) return null;
  const port = Number(m[1]);
  return port <= 65535 ? port : null;
}

/** parseInternetAddressAndPortNoThrow(value, v6only=false), or null. */
export function parseDestination(value: string | undefined): HostPort | null {
  if (value === undefined || value === "") return null;
  const v6 = value.startsWith("[");
  const at = v6 ? value.lastIndexOf("]:") : value.lastIndexOf(":");
  if (at < 0) return null;
  const host = v6 ? value.slice(1, at) : value.slice(0, at);
  const port = envoyPort(value.slice(at + (v6 ? 2 : 1)));
  if (port === null || isIP(host) !== (v6 ? 6 : 4)) return null;
  return { host, port };
}

/** Envoy's Address::Instance::asString() of an IP address: "ip:port", "[v6]:port". */
export function addressString(a: HostPort): string {
  return a.host.includes(":") ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}
