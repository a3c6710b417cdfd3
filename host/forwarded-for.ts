// Who the client is, as Envoy's HTTP connection manager decides it: the downstream remote address
// that `source.address` reports to a Wasm filter. Followed from Envoy's
// source/common/http/conn_manager_utility.cc (mutateRequestHeaders),
// source/common/http/utility.cc (getLastAddressFromXFF, appendXff),
// source/extensions/http/original_ip_detection/xff/xff.cc and the connection manager's config.cc
// (with no original_ip_detection_extensions, the XFF extension with xff_num_trusted_hops is used):
//
// - use_remote_address: false (Envoy's default): the address N entries from the end of
//   X-Forwarded-For, N = xff_num_trusted_hops (0: the last entry), when that entry parses as an IP;
//   else the connection's peer. A client that talks to Envoy directly writes that header itself.
// - use_remote_address: true: with N > 0 trusted hops the entry N − 1 from the end (read before
//   Envoy appends its own), else — or when that entry is missing or not an IP — the connection's
//   peer; then the peer (Envoy's local address for a loopback peer) is appended to the header.
//
// X-Forwarded-For is one of Envoy's inline headers: repeated copies are joined with "," when the
// request is decoded, so the last entry of the last copy is the last entry.
import { isIPv4, isIPv6, SocketAddress } from "node:net";
import type { HeaderMap } from "./header-map.ts";

/** The two HttpConnectionManager fields that decide the downstream remote address. */
export interface ConnectionManagerAddressing {
  /** HttpConnectionManager.use_remote_address (Envoy default false). */
  useRemoteAddress: boolean;
  /** HttpConnectionManager.xff_num_trusted_hops (Envoy default 0). */
  xffNumTrustedHops: number;
}

export const ENVOY_DEFAULT_ADDRESSING: ConnectionManagerAddressing = {
  useRemoteAddress: false,
  xffNumTrustedHops: 0,
};

export interface IpPort {
  address: string;
  port: number;
}

const XFF = "x-forwarded-for";

/** Network::Utility::parseInternetAddressNoThrow: a literal IPv4 or IPv6 address, canonical; else null. */
export function parseIp(text: string): string | null {
  if (isIPv4(text)) return text;
  if (!isIPv6(text) || text.includes("%")) return null;
  return new SocketAddress({ address: text, family: "ipv6" }).address;
}

/**
 * Http::Utility::getLastAddressFromXFF: skip `numToSkip` entries from the end, take the one before
 * them (whitespace trimmed); null when there are not enough entries or it is not an IP.
 */
export function lastAddressFromXff(xff: string | undefined, numToSkip: number): string | null {
  if (xff === undefined) return null;
  let rest = xff;
  for (let i = 0; i < numToSkip; i++) {
    const comma = rest.lastIndexOf(",");
    if (comma < 0) return null;
    rest = rest.slice(0, comma);
  }
  const comma = rest.lastIndexOf(",");
  if (comma >= 0 && comma + 1 < rest.length) rest = rest.slice(comma + 1);
  return parseIp(rest.trim());
}

function isLoopback(address: string): boolean {
  return address === "::1" || (isIPv4(address) && address.startsWith("127."));
}

/**
 * Decides the downstream remote address for one request and, with use_remote_address, appends the
 * peer to X-Forwarded-For as Envoy does. Entries taken from the header carry port 0, like the
 * Ipv4Instance/Ipv6Instance Envoy builds from them.
 */
export function downstreamRemoteAddress(
  headers: HeaderMap,
  peer: IpPort,
  local: IpPort,
  config: ConnectionManagerAddressing,
): IpPort {
  const copies = headers.getAll(XFF);
  if (copies.length > 1) {
    headers.remove(XFF);
    headers.add(XFF, copies.join(","));
  }
  const xff = headers.get(XFF);
  const hops = config.xffNumTrustedHops;
  if (config.useRemoteAddress) {
    const trusted = hops > 0 ? lastAddressFromXff(xff, hops - 1) : null;
    const appended = isLoopback(peer.address) ? local.address : peer.address;
    if (xff === undefined) headers.add(XFF, appended);
    else headers.set(XFF, `${xff},${appended}`);
    return trusted === null ? peer : { address: trusted, port: 0 };
  }
  const fromXff = lastAddressFromXff(xff, hops);
  return fromXff === null ? peer : { address: fromXff, port: 0 };
}

/** Address::Instance::asString for an IP: "a.b.c.d:port" or "[v6]:port". */
export function formatIpPort(address: string, port: number): string {
  return address.includes(":") ? `[${address}]:${port}` : `${address}:${port}`;
}
