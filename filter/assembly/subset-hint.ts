// GAIE's subset hint (gateway-api-inference-extension docs/proposals/004-endpoint-picker-protocol):
// a data plane may restrict the pick to the endpoints listed in the request's dynamic metadata
// `envoy.lb.subset_hint` / `x-gateway-destination-endpoint-subset`. Envoy exposes a stream's
// dynamic metadata to Wasm as the `metadata` property (path metadata.filter_metadata.<ns>.<key>)
// and serializes a list value as proxy-wasm pairs with each element as a key and an empty value
// (source/extensions/common/wasm/context.cc serializeValue, kList); a string value comes as its
// bytes, which we read as a comma-separated list. The endpoint picker passes the ext_proc
// request's metadata the same way.
import { getPropertyAt } from "./host";

// Read on every decision: encoded once.
const SUBSET_PATH = String.UTF8.encode(
  "metadata\0filter_metadata\0envoy.lb.subset_hint\0x-gateway-destination-endpoint-subset",
);

/** The allowed endpoints (ip:port), or null when the request carries no hint. */
export function readSubsetHint(): string[] | null {
  const v = getPropertyAt(SUBSET_PATH);
  if (v === null) return null;
  const list = pairKeys(v);
  if (list !== null) return list;
  const out: string[] = [];
  const parts = String.UTF8.decode(v).split(",");
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i].trim();
    if (p.length > 0) out.push(p);
  }
  return out;
}

/**
 * The keys of a serialized pairs buffer (u32 count, count × (u32 key length, u32 value length),
 * then each key and value followed by a NUL), or null when the bytes are not exactly that.
 */
function pairKeys(buf: ArrayBuffer): string[] | null {
  const p = changetype<usize>(buf);
  const size = buf.byteLength;
  if (size < 4) return null;
  const n = load<u32>(p);
  if (<u64>n * 8 + 4 > <u64>size) return null;
  let at: u64 = 4 + <u64>n * 8;
  const out: string[] = [];
  for (let i: u32 = 0; i < n; i++) {
    const k = load<u32>(p + 4 + <usize>i * 8);
    const val = load<u32>(p + 8 + <usize>i * 8);
    if (at + <u64>k + <u64>val + 2 > <u64>size) return null;
    if (load<u8>(p + <usize>(at + <u64>k)) !== 0 || load<u8>(p + <usize>(at + <u64>k + 1 + <u64>val)) !== 0)
      return null;
    out.push(String.UTF8.decodeUnsafe(p + <usize>at, <usize>k).trim());
    at += <u64>k + <u64>val + 2;
  }
  return at === <u64>size ? out : null;
}
