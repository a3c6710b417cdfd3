// Who may pin a DP rank under the `honor` policy: clients from the trusted CIDRs (the
// `source.address` property) and, when configured, carrying the shared-secret header. With
// neither configured every client may pin — `honor` is an operator's explicit opt-in.
import { CfgImage } from "../core/cache-images";
import { getHeader, getProperty, REQUEST_HEADERS } from "./host";

export function trustedForPin(cfg: CfgImage): bool {
  if (cfg.secretHeaderName.length > 0) {
    const given = getHeader(REQUEST_HEADERS, cfg.secretHeaderName);
    if (given === null || !constantTimeEquals(given, String.UTF8.encode(cfg.secretHeaderValue))) return false;
  }
  if (cfg.trustedCidrs.length === 0) return true;
  const source = getProperty("source\0address");
  if (source === null) return false;
  const addr = new StaticArray<u8>(16);
  const family = parseAddress(String.UTF8.decode(source), addr);
  if (family === 0) return false;
  for (let i = 0; i < cfg.trustedCidrs.length; i++)
    if (inCidr(addr, family, cfg.trustedCidrs[i])) return true;
  return false;
}

function constantTimeEquals(a: ArrayBuffer, b: ArrayBuffer): bool {
  if (a.byteLength !== b.byteLength) return false;
  let diff: u32 = 0;
  for (let i = 0; i < a.byteLength; i++)
    diff |= <u32>(load<u8>(changetype<usize>(a) + <usize>i) ^ load<u8>(changetype<usize>(b) + <usize>i));
  return diff === 0;
}

/**
 * Parses "a.b.c.d[:port]" (family 4, bytes 0..3) or "[v6]:port" / bare v6 (family 6). Returns 0
 * when the text is not an address. An IPv4-mapped IPv6 address is treated as IPv4.
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
  if (!parseV6(host, out)) return 0;
  for (let i = 0; i < 10; i++) if (out[i] !== 0) return 6;
  if (out[10] === 0xff && out[11] === 0xff) {
    for (let i = 0; i < 4; i++) out[i] = out[12 + i];
    return 4;
  }
  return 6;
}

function parseV4(s: string, out: StaticArray<u8>, at: i32): bool {
  const parts = s.split(".");
  if (parts.length !== 4) return false;
  for (let i = 0; i < 4; i++) {
    const p = parts[i];
    if (p.length === 0 || p.length > 3) return false;
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
  const halves = s.split("::");
  if (halves.length > 2) return false;
  const head = halves[0].length > 0 ? halves[0].split(":") : new Array<string>(0);
  const tail = halves.length === 2 && halves[1].length > 0 ? halves[1].split(":") : new Array<string>(0);
  if (halves.length === 1 && head.length !== 8) return false;
  if (head.length + tail.length > 8) return false;
  for (let i = 0; i < head.length; i++) if (!group(head[i], out, i * 2)) return false;
  const start = 8 - tail.length;
  for (let i = 0; i < tail.length; i++) if (!group(tail[i], out, (start + i) * 2)) return false;
  return true;
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

export function inCidr(addr: StaticArray<u8>, family: i32, cidr: string): bool {
  const slash = cidr.indexOf("/");
  if (slash < 0) return false;
  const net = new StaticArray<u8>(16);
  const netFamily = parseAddress(cidr.substring(0, slash), net);
  if (netFamily !== family) return false;
  const bits = I32.parseInt(cidr.substring(slash + 1));
  const maxBits = family === 4 ? 32 : 128;
  if (bits < 0 || bits > maxBits) return false;
  for (let b = 0; b < bits; b++) {
    const shift: u32 = <u32>b & 7;
    const mask: u32 = <u32>0x80 >>> shift;
    if ((<u32>addr[b >> 3] & mask) !== (<u32>net[b >> 3] & mask)) return false;
  }
  return true;
}
