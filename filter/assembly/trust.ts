// Who may pin a DP rank under the `honor` policy: clients from the trusted CIDRs (the
// `source.address` property) and, when configured, carrying the shared-secret header. With
// neither configured every client may pin — `honor` is an operator's explicit opt-in. The same
// checks decide who may send the `critical` priority (trustedForPriority), which needs one of them.
//
// `source.address` is what Envoy's connection manager decided the client is: with
// `use_remote_address: false` (Envoy's default) it comes from X-Forwarded-For, which a client
// writes itself. The CIDR check is only as good as that setting (docs/operations.md).
import { CfgImage } from "../core/cache-images";
import { getHeaderValues, getProperty, REQUEST_HEADERS } from "./host";

export function trustedForPin(cfg: CfgImage): bool {
  if (cfg.secretHeaderName.length > 0 && !secretPresented(cfg)) return false;
  if (cfg.trustedCidrs.length === 0) return true;
  const source = getProperty("source\0address");
  if (source === null) return false;
  const addr = new StaticArray<u8>(16);
  const family = clientFamily(parseAddress(String.UTF8.decode(source), addr), addr);
  if (family === 0) return false;
  for (let i = 0; i < cfg.trustedCidrs.length; i++)
    if (inCidr(addr, family, cfg.trustedCidrs[i])) return true;
  return false;
}

/**
 * Who may send the `critical` priority: a client that passes the same checks as a pin, but only
 * once the operator configured at least one of them — unlike `honor`, nothing opts a gateway into
 * trusting every client with a priority that is never shed.
 */
export function trustedForPriority(cfg: CfgImage): bool {
  if (cfg.secretHeaderName.length === 0 && cfg.trustedCidrs.length === 0) return false;
  return trustedForPin(cfg);
}

/**
 * Exactly one copy of the secret header, equal byte for byte. A second copy — even a correct one —
 * fails: a proxy in front might forward the client's copy next to its own.
 */
function secretPresented(cfg: CfgImage): bool {
  const given = getHeaderValues(REQUEST_HEADERS, cfg.secretHeaderName);
  return given.length === 1 && constantTimeEquals(given[0], String.UTF8.encode(cfg.secretHeaderValue));
}

function constantTimeEquals(a: ArrayBuffer, b: ArrayBuffer): bool {
  if (a.byteLength !== b.byteLength) return false;
  let diff: u32 = 0;
  for (let i = 0; i < a.byteLength; i++)
    diff |= <u32>(load<u8>(changetype<usize>(a) + <usize>i) ^ load<u8>(changetype<usize>(b) + <usize>i));
  return diff === 0;
}

/**
 * Parses "a.b.c.d[:port]" (family 4, bytes 0..3) or "[v6]:port" / bare v6 (family 6, 16 bytes,
 * a trailing dotted quad allowed as in "::ffff:10.0.0.1"). Returns 0 when the text is not an
 * address (zone ids, leading zeros in a dotted quad, anything else).
 */
export function parseAddress(text: string, out: StaticArray<u8>): i32 {
  let host = text;
  if (host.startsWith("[")) {
    const close = host.indexOf("]");
    if (close < 0) return 0;
    host = host.substring(1, close);
  } else if (host.indexOf(":") === host.lastIndexOf(":") && host.indexOf(":") >= 0) {
    host = host.substring(0, host.indexOf(":"));
  }
  if (host.indexOf(":") < 0) return parseV4(host, out, 0) ? 4 : 0;
  return parseV6(host, out) ? 6 : 0;
}

/** ::ffff:a.b.c.d — an IPv4 client on a dual-stack socket, or an IPv4 CIDR written as IPv6. */
function isV4Mapped(addr: StaticArray<u8>): bool {
  for (let i = 0; i < 10; i++) if (addr[i] !== 0) return false;
  return addr[10] === 0xff && addr[11] === 0xff;
}

/** A v4-mapped client address is that IPv4 client: compared as family 4 (bytes moved to 0..3). */
function clientFamily(family: i32, addr: StaticArray<u8>): i32 {
  if (family !== 6 || !isV4Mapped(addr)) return family;
  for (let i = 0; i < 4; i++) addr[i] = addr[12 + i];
  return 4;
}

function parseV4(s: string, out: StaticArray<u8>, at: i32): bool {
  const parts = s.split(".");
  if (parts.length !== 4) return false;
  for (let i = 0; i < 4; i++) {
    const p = parts[i];
    if (p.length === 0 || p.length > 3 || (p.length > 1 && p.charCodeAt(0) === 0x30)) return false;
    let v = 0;
    for (let j = 0; j < p.length; j++) {
      const d = p.charCodeAt(j) - 0x30;
      if (d < 0 || d > 9) return false;
      v = v * 10 + d;
    }
    if (v > 255) return false;
    out[at + i] = <u8>v;
  }
  return true;
}

function parseV6(s: string, out: StaticArray<u8>): bool {
  for (let i = 0; i < 16; i++) out[i] = 0;
  // A trailing dotted quad stands for the last two groups.
  let text = s;
  let quad = "";
  const lastColon = s.lastIndexOf(":");
  if (s.indexOf(".") > lastColon) {
    quad = s.substring(lastColon + 1);
    text = `${s.substring(0, lastColon + 1)}0:0`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return false;
  const head = halves[0].length > 0 ? halves[0].split(":") : new Array<string>(0);
  const tail = halves.length === 2 && halves[1].length > 0 ? halves[1].split(":") : new Array<string>(0);
  if (halves.length === 1 && head.length !== 8) return false;
  if (halves.length === 2 && head.length + tail.length > 7) return false;
  for (let i = 0; i < head.length; i++) if (!group(head[i], out, i * 2)) return false;
  const start = 8 - tail.length;
  for (let i = 0; i < tail.length; i++) if (!group(tail[i], out, (start + i) * 2)) return false;
  return quad.length === 0 || parseV4(quad, out, 12);
}

function group(g: string, out: StaticArray<u8>, at: i32): bool {
  if (g.length === 0 || g.length > 4) return false;
  let v = 0;
  for (let i = 0; i < g.length; i++) {
    const c = g.charCodeAt(i) | 0x20;
    const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x61 + 10 : -1;
    if (d < 0) return false;
    v = (v << 4) | d;
  }
  out[at] = <u8>(v >> 8);
  out[at + 1] = <u8>(v & 0xff);
  return true;
}

/** The prefix length of "…/n": 1 to 3 ASCII digits, no sign, no spaces; -1 otherwise. */
function prefixBits(s: string): i32 {
  if (s.length === 0 || s.length > 3) return -1;
  let v = 0;
  for (let i = 0; i < s.length; i++) {
    const d = s.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return -1;
    v = v * 10 + d;
  }
  return v;
}

/**
 * Whether `addr` (family 4 or 6, after clientFamily) is inside `cidr`. Bits are compared most
 * significant first, so prefixes that end inside an octet (/23, /50) work. An IPv4 network written
 * v4-mapped ("::ffff:10.0.0.0/104") is the IPv4 network /(n − 96); an IPv6 network never matches an
 * IPv4 client and the other way round.
 */
export function inCidr(addr: StaticArray<u8>, family: i32, cidr: string): bool {
  const slash = cidr.indexOf("/");
  if (slash < 0) return false;
  const net = new StaticArray<u8>(16);
  let netFamily = parseAddress(cidr.substring(0, slash), net);
  let bits = prefixBits(cidr.substring(slash + 1));
  if (netFamily === 0 || bits < 0) return false;
  if (netFamily === 6 && isV4Mapped(net) && bits >= 96) {
    for (let i = 0; i < 4; i++) net[i] = net[12 + i];
    netFamily = 4;
    bits -= 96;
  }
  if (netFamily !== family || bits > (family === 4 ? 32 : 128)) return false;
  for (let b = 0; b < bits; b++) {
    const mask: u32 = <u32>0x80 >>> (<u32>b & 7);
    if ((<u32>addr[b >> 3] & mask) !== (<u32>net[b >> 3] & mask)) return false;
  }
  return true;
}
