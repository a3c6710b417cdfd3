// Raw Proxy-Wasm imports and helpers for the host's test modules. The modules call the ABI
// directly (not through the SDK's wrappers) so they can log the exact result code of every call.
import { __pin, __unpin } from "rt/itcms";
import {
  proxy_add_header_map_value,
  proxy_get_buffer_bytes,
  proxy_get_header_map_pairs,
  proxy_get_header_map_value,
  proxy_get_shared_data,
  proxy_http_call,
  proxy_log,
  proxy_remove_header_map_value,
  proxy_replace_header_map_value,
  proxy_send_local_response,
  proxy_set_shared_data,
} from "./env";

export * from "./env";

export const OUT_PTR: usize = memory.data(8);
export const OUT_SIZE: usize = memory.data(8);
export const OUT_U32: usize = memory.data(8);

export function malloc(size: usize): usize {
  const buf = new ArrayBuffer(<i32>size);
  return __pin(changetype<usize>(buf));
}

export function utf8(s: string): ArrayBuffer {
  return String.UTF8.encode(s);
}

export function log(msg: string): void {
  const b = String.UTF8.encode(msg);
  proxy_log(2, changetype<usize>(b), b.byteLength);
}

/** Takes the (ptr, size) the host wrote to OUT_PTR/OUT_SIZE: copies, frees, returns the bytes. */
export function takeOut(): ArrayBuffer {
  const p = load<u32>(OUT_PTR);
  const s = load<u32>(OUT_SIZE);
  const out = new ArrayBuffer(<i32>s);
  if (s > 0) {
    memory.copy(changetype<usize>(out), <usize>p, <usize>s);
    __unpin(<usize>p);
  }
  return out;
}

export function takeOutString(): string {
  return String.UTF8.decode(takeOut());
}

export class Result {
  code: u32 = 0;
  text: string = "";
}

export function getHeader(mapType: u32, key: string): Result {
  const k = utf8(key);
  const r = new Result();
  r.code = proxy_get_header_map_value(mapType, changetype<usize>(k), k.byteLength, OUT_PTR, OUT_SIZE);
  if (r.code === 0) r.text = takeOutString();
  return r;
}

export function addHeader(mapType: u32, key: string, value: string): u32 {
  const k = utf8(key);
  const v = utf8(value);
  return proxy_add_header_map_value(
    mapType,
    changetype<usize>(k),
    k.byteLength,
    changetype<usize>(v),
    v.byteLength,
  );
}

export function replaceHeader(mapType: u32, key: string, value: string): u32 {
  const k = utf8(key);
  const v = utf8(value);
  return proxy_replace_header_map_value(
    mapType,
    changetype<usize>(k),
    k.byteLength,
    changetype<usize>(v),
    v.byteLength,
  );
}

export function removeHeader(mapType: u32, key: string): u32 {
  const k = utf8(key);
  return proxy_remove_header_map_value(mapType, changetype<usize>(k), k.byteLength);
}

/** Number of pairs in the serialized map, or the error code as a negative number. */
export function pairsCount(mapType: u32): i32 {
  const c = proxy_get_header_map_pairs(mapType, OUT_PTR, OUT_SIZE);
  if (c !== 0) return -(<i32>c);
  const b = takeOut();
  if (b.byteLength === 0) return 0;
  return <i32>load<u32>(changetype<usize>(b));
}

export function getBuffer(t: u32, start: u32, len: u32): Result {
  const r = new Result();
  r.code = proxy_get_buffer_bytes(t, start, len, OUT_PTR, OUT_SIZE);
  if (r.code === 0) r.text = takeOutString();
  return r;
}

export function localReply(code: u32, body: string, hk: string, hv: string): u32 {
  const d = utf8("test module reply");
  const b = utf8(body);
  // One pair, serialized as the ABI wants: count, sizes, NUL-terminated strings.
  const k = utf8(hk);
  const v = utf8(hv);
  const size = 4 + 8 + k.byteLength + 1 + v.byteLength + 1;
  const h = new ArrayBuffer(size);
  const p = changetype<usize>(h);
  store<u32>(p, 1);
  store<u32>(p + 4, k.byteLength);
  store<u32>(p + 8, v.byteLength);
  memory.copy(p + 12, changetype<usize>(k), k.byteLength);
  memory.copy(p + 13 + k.byteLength, changetype<usize>(v), v.byteLength);
  return proxy_send_local_response(
    code,
    changetype<usize>(d),
    d.byteLength,
    changetype<usize>(b),
    b.byteLength,
    p,
    size,
    -1,
  );
}

/** "a=1;b=x" → map. */
export function parseConfig(s: string): Map<string, string> {
  const m = new Map<string, string>();
  const parts = s.split(";");
  for (let i = 0; i < parts.length; i++) {
    const kv = parts[i];
    const eq = kv.indexOf("=");
    if (eq > 0) m.set(kv.substring(0, eq), kv.substring(eq + 1));
  }
  return m;
}

export function cfgInt(m: Map<string, string>, key: string, dflt: i32): i32 {
  return m.has(key) ? I32.parseInt(m.get(key)) : dflt;
}

export function sharedGet(key: string): Result {
  const k = utf8(key);
  const r = new Result();
  r.code = proxy_get_shared_data(changetype<usize>(k), k.byteLength, OUT_PTR, OUT_SIZE, OUT_U32);
  if (r.code === 0) r.text = takeOutString();
  return r;
}

export function lastCas(): u32 {
  return load<u32>(OUT_U32);
}

export function sharedSet(key: string, value: string, cas: u32): u32 {
  const k = utf8(key);
  const v = utf8(value);
  return proxy_set_shared_data(changetype<usize>(k), k.byteLength, changetype<usize>(v), v.byteLength, cas);
}

/** Header pairs in the host's serialized form. */
export function serializePairs(keys: string[], values: string[]): ArrayBuffer {
  let size = 4;
  for (let i = 0; i < keys.length; i++)
    size += 8 + String.UTF8.byteLength(keys[i]) + 1 + String.UTF8.byteLength(values[i]) + 1;
  const out = new ArrayBuffer(size);
  const p = changetype<usize>(out);
  store<u32>(p, keys.length);
  let pos = p + 4 + 8 * keys.length;
  for (let i = 0; i < keys.length; i++) {
    const k = utf8(keys[i]);
    const v = utf8(values[i]);
    store<u32>(p + 4 + 8 * i, k.byteLength);
    store<u32>(p + 8 + 8 * i, v.byteLength);
    memory.copy(pos, changetype<usize>(k), k.byteLength);
    pos += k.byteLength + 1;
    memory.copy(pos, changetype<usize>(v), v.byteLength);
    pos += v.byteLength + 1;
  }
  return out;
}

/** proxy_http_call with the token left in OUT_U32; the result code. */
export function httpCall(cluster: string, keys: string[], values: string[], body: string, timeout: u32): u32 {
  const cl = utf8(cluster);
  const h = serializePairs(keys, values);
  const b = utf8(body);
  const t = serializePairs([], []);
  return proxy_http_call(
    changetype<usize>(cl),
    cl.byteLength,
    changetype<usize>(h),
    h.byteLength,
    changetype<usize>(b),
    b.byteLength,
    changetype<usize>(t),
    t.byteLength,
    timeout,
    OUT_U32,
  );
}
