// Thin, trap-free wrappers over the Proxy-Wasm host calls the filter uses. The SDK's helpers
// abort on any status other than Ok/NotFound (REFERENCE §5: a trap is an outage), so anything
// that can legitimately fail here returns the status instead.
import * as imports from "@gcoredev/proxy-wasm-sdk-as/assembly/imports";
import { HeaderSnapshot } from "./header-snapshot";

export const OK: u32 = 0;
export const NOT_FOUND: u32 = 1;

export const REQUEST_HEADERS: u32 = 0;
export const RESPONSE_HEADERS: u32 = 2;
export const HTTP_CALL_RESPONSE_HEADERS: u32 = 6;
export const REQUEST_BODY: u32 = 0;
export const RESPONSE_BODY: u32 = 1;
export const HTTP_CALL_RESPONSE_BODY: u32 = 4;
export const PLUGIN_CONFIGURATION: u32 = 7;

export const LOG_DEBUG: u32 = 1;
export const LOG_INFO: u32 = 2;
export const LOG_WARN: u32 = 3;
export const LOG_ERROR: u32 = 4;

const scratch64 = memory.data(8);

// ---- what the host hands the VM ---------------------------------------------------------------
// Envoy copies every value it returns (a body, a header, a shared-data value) into memory it asks
// the module's exported `malloc` for, and writes the address and size where the call said
// (copyToPointerSize; none for empty data). The SDK's malloc makes that a pinned, zero-filled GC
// object, so every read fed the collector and a 160 KiB body was written twice. Ours takes the
// block from the heap outside the GC: a hot reader uses the bytes in place and frees them
// (HostBytes), a cold one copies them into a managed ArrayBuffer (takeOut).
const hostOut = memory.data(8);

// Bodies and answer chunks (readBuffer), and any copy of 16 KiB or more, take one reusable block
// instead of the heap. A body block freed back to the heap was split by the small allocations
// that followed it, so the next body did not fit and memory grew by up to a body per request
// before the heap settled (8.6 bodies of 64 MiB in a burst); and an answer read chunk by chunk
// paid a heap allocation and a free per chunk. The block only grows, to the largest copy seen
// (at most maxBodyBytes, which the VM must hold anyway); a copy made while it is out (a kept
// bucket image, say) takes the heap.
const LARGE_COPY: usize = 16384;
let spare: usize = 0;
let spareSize: usize = 0;
let spareOut = false;
/** Set by readBuffer around its host call: the copy it asks for is read and released at once. */
let transient = false;

/** The module's allocator for the host's copies (exported as `malloc`, see index.ts). */
export function hostMalloc(size: usize): usize {
  if (spareOut || (size < LARGE_COPY && !transient)) return heap.alloc(size > 0 ? size : 1);
  if (spareSize < size) {
    if (spare !== 0) heap.free(spare);
    const want = size > 256 ? size : 256;
    spare = heap.alloc(want);
    spareSize = want;
  }
  spareOut = true;
  return spare;
}

/** Frees a block hostMalloc returned. */
export function freeHostCopy(p: usize): void {
  if (p === spare) spareOut = false;
  else heap.free(p);
}

function outPtr(): usize {
  return <usize>load<u32>(hostOut);
}

function outLen(): i32 {
  return <i32>load<u32>(hostOut, 4);
}

/** The block the last call returned as a managed ArrayBuffer; the block itself is freed. */
function takeOut(): ArrayBuffer {
  const p = outPtr();
  const n = outLen();
  const b = new ArrayBuffer(p === 0 ? 0 : n);
  if (p !== 0) {
    memory.copy(changetype<usize>(b), p, <usize>n);
    freeHostCopy(p);
  }
  return b;
}

/**
 * Bytes the host returned, held outside the GC heap until `release` (or the next `take`, which
 * releases the previous block first): read in place, never copied again.
 */
export class HostBytes {
  ptr: usize = 0;
  len: i32 = 0;

  /** Takes the block the last host call returned (ptr 0 when it returned none). */
  take(): void {
    this.release();
    this.ptr = outPtr();
    this.len = this.ptr === 0 ? 0 : outLen();
  }

  release(): void {
    if (this.ptr !== 0) freeHostCopy(this.ptr);
    this.ptr = 0;
    this.len = 0;
  }
}

export function log(level: u32, message: string): void {
  const b = String.UTF8.encode(message);
  imports.proxy_log(<imports.LogLevel>level, changetype<usize>(b), b.byteLength);
}

export function nowNs(): u64 {
  if (imports.proxy_get_current_time_nanoseconds(scratch64) !== OK) return 0;
  return load<u64>(scratch64);
}

export function nowMs(): u64 {
  return nowNs() / 1000000;
}

// Header names come from a fixed set (the filter's own and a few from its configuration): each is
// encoded once and kept, rather than encoded into a new GC object on every call — a request
// strips a dozen client copies of routing headers before it is even decided.
const nameCache = new Map<string, ArrayBuffer>();
const NAME_CACHE_MAX: i32 = 256;

function nameBytes(name: string): ArrayBuffer {
  if (nameCache.has(name)) return nameCache.get(name);
  const b = String.UTF8.encode(name);
  if (nameCache.size < NAME_CACHE_MAX) nameCache.set(name, b);
  return b;
}

// ---- the request's headers, read once per callback ----------------------------------------------
// While a stream's snapshot is in use (useRequestHeaders, for the length of one callback), reads
// of the request headers answer from it and a removal of a name it does not hold makes no call.

let snapshot: HeaderSnapshot | null = null;
/** getHeaderValues' pairs when no snapshot is in use (read, looked up, released in one call). */
const scratchPairs = new HeaderSnapshot();

/** Reads the request headers into `s` (one call); false when they could not be read or parsed. */
export function snapshotRequestHeaders(s: HeaderSnapshot): bool {
  releaseSnapshot(s);
  if (imports.proxy_get_header_map_pairs(<imports.HeaderMapType>REQUEST_HEADERS, hostOut, hostOut + 4) !== OK)
    return false;
  const p = outPtr();
  if (p === 0) return false;
  if (s.parse(p, outLen())) return true;
  releaseSnapshot(s);
  return false;
}

/** Frees the snapshot's block; reads go to the host again. */
export function releaseSnapshot(s: HeaderSnapshot): void {
  if (s.ptr !== 0) freeHostCopy(s.ptr);
  s.clear();
  if (snapshot === s) snapshot = null;
}

/** The snapshot request-header reads answer from until the next call (null: the host's map). */
export function useRequestHeaders(s: HeaderSnapshot | null): void {
  snapshot = s !== null && s.ptr !== 0 ? s : null;
}

function snapshotFor(map: u32): HeaderSnapshot | null {
  return map === REQUEST_HEADERS ? snapshot : null;
}

/** Reads the header's value into the host's out slot; whether it is there. */
function readHeader(map: u32, name: string): bool {
  const key = nameBytes(name);
  return (
    imports.proxy_get_header_map_value(
      <imports.HeaderMapType>map,
      changetype<usize>(key),
      key.byteLength,
      hostOut,
      hostOut + 4,
    ) === OK
  );
}

/** Whether the header is present (its value is read and dropped, never copied). */
export function hasHeader(map: u32, name: string): bool {
  const snap = snapshotFor(map);
  if (snap !== null) return snap.find(nameBytes(name), 0) >= 0;
  if (!readHeader(map, name)) return false;
  const p = outPtr();
  if (p !== 0) freeHostCopy(p);
  return true;
}

/** The header's value; null when absent or when the map is no longer readable. */
export function getHeader(map: u32, name: string): ArrayBuffer | null {
  const snap = snapshotFor(map);
  if (snap !== null) {
    const i = snap.find(nameBytes(name), 0);
    return i < 0 ? null : copyOf(snap.valuePtr(i), snap.valueLen(i));
  }
  return readHeader(map, name) ? takeOut() : null;
}

function copyOf(p: usize, n: i32): ArrayBuffer {
  const b = new ArrayBuffer(n);
  memory.copy(changetype<usize>(b), p, <usize>n);
  return b;
}

/**
 * Every value of the (lower-case) header `name`, in order, one per entry: Envoy's
 * get_header_map_value returns only the first entry of a repeated header, so a security decision
 * that must see a second copy reads the pairs. Empty when absent or unreadable.
 */
export function getHeaderValues(map: u32, name: string): ArrayBuffer[] {
  const out = new Array<ArrayBuffer>(0);
  let snap = snapshotFor(map);
  let own = false;
  if (snap === null) {
    // No snapshot in use: read the pairs once into a scratch one (the same parser).
    if (imports.proxy_get_header_map_pairs(<imports.HeaderMapType>map, hostOut, hostOut + 4) !== OK)
      return out;
    const p = outPtr();
    if (p === 0) return out;
    snap = scratchPairs;
    own = true;
    if (!snap.parse(p, outLen())) {
      releaseSnapshot(snap);
      return out;
    }
  }
  const key = nameBytes(name);
  for (let i = snap.find(key, 0); i >= 0; i = snap.find(key, i + 1))
    out.push(copyOf(snap.valuePtr(i), snap.valueLen(i)));
  if (own) releaseSnapshot(snap);
  return out;
}

export function getHeaderString(map: u32, name: string): string | null {
  const v = getHeader(map, name);
  return v === null ? null : String.UTF8.decode(v);
}

/** Sets (adds or replaces) a header; the status, never a trap. */
export function setHeader(map: u32, name: string, value: string): u32 {
  const v = String.UTF8.encode(value);
  return setHeaderBytes(map, name, changetype<usize>(v), v.byteLength);
}

/** Sets a header to the `len` bytes at `ptr` (no string made); the status, never a trap. */
export function setHeaderBytes(map: u32, name: string, ptr: usize, len: i32): u32 {
  // A write the snapshot cannot follow: it is dropped (for the rest of the stream too), and the
  // host's map answers from now on.
  const snap = snapshotFor(map);
  if (snap !== null) releaseSnapshot(snap);
  const k = nameBytes(name);
  return imports.proxy_replace_header_map_value(
    <imports.HeaderMapType>map,
    changetype<usize>(k),
    k.byteLength,
    ptr,
    len,
  );
}

const digits = memory.data(24);

/** Sets a header to `value` in decimal, written in place (no string made). */
export function setHeaderNumber(map: u32, name: string, value: u64): u32 {
  let n: i32 = 1;
  for (let rest = value / 10; rest > 0; rest /= 10) n++;
  let v = value;
  for (let i = n - 1; i >= 0; i--) {
    store<u8>(digits + <usize>i, <u8>(0x30 + <u32>(v % 10)));
    v /= 10;
  }
  return setHeaderBytes(map, name, digits, n);
}

export function removeHeader(map: u32, name: string): u32 {
  const k = nameBytes(name);
  const snap = snapshotFor(map);
  if (snap !== null) {
    // Nothing to remove: no call. (Removing an absent header is OK in Envoy too.)
    if (snap.find(k, 0) < 0) return OK;
    snap.remove(k);
  }
  return imports.proxy_remove_header_map_value(
    <imports.HeaderMapType>map,
    changetype<usize>(k),
    k.byteLength,
  );
}

/** Bytes [start, start+length) of a buffer; null when unavailable. */
export function getBuffer(kind: u32, start: u32, length: u32): ArrayBuffer | null {
  const r = imports.proxy_get_buffer_bytes(<imports.BufferType>kind, start, length, hostOut, hostOut + 4);
  if (r !== OK) return null;
  return takeOut();
}

const bufferFlags = memory.data(4);

/** How many bytes a buffer holds now (0 when unavailable). */
export function bufferSize(kind: u32): u32 {
  if (imports.proxy_get_buffer_status(<imports.BufferType>kind, hostOut, bufferFlags) !== OK) return 0;
  return load<u32>(hostOut);
}

/** Bytes [start, start+length) of a buffer into `out`, read in place; false when unavailable. */
export function readBuffer(kind: u32, start: u32, length: u32, out: HostBytes): bool {
  out.release();
  transient = true;
  const r = imports.proxy_get_buffer_bytes(<imports.BufferType>kind, start, length, hostOut, hostOut + 4);
  transient = false;
  if (r !== OK) return false;
  out.take();
  return true;
}

/** The next message of a shared queue into `out`; the status (OK, or empty, or gone). */
export function dequeue(queue: u32, out: HostBytes): u32 {
  out.release();
  const r = imports.proxy_dequeue_shared_queue(queue, hostOut, hostOut + 4);
  if (r === OK) out.take();
  return r;
}

export class SharedValue {
  value: ArrayBuffer | null = null;
  cas: u32 = 0;
  status: u32 = NOT_FOUND;
}

const casOut = memory.data(4);

/** Reads a shared-data key into `out` (value null when missing). */
export function getShared(key: string, out: SharedValue): void {
  const k = String.UTF8.encode(key);
  const r = imports.proxy_get_shared_data(changetype<usize>(k), k.byteLength, hostOut, hostOut + 4, casOut);
  out.status = r;
  if (r === OK) {
    out.value = takeOut();
    out.cas = load<u32>(casOut);
  } else {
    out.value = null;
    out.cas = 0;
  }
}

/** A shared-data value held in place (SharedBytes.read); its cas and the read's status beside it. */
export class SharedBytes extends HostBytes {
  cas: u32 = 0;
  status: u32 = NOT_FOUND;

  /** Reads `key` (its UTF-8 bytes, encoded once by the owner) over the previous value. */
  read(key: ArrayBuffer): void {
    this.readKey(changetype<usize>(key), key.byteLength);
  }

  /** Reads the key whose bytes are [key, key+keyLen). */
  readKey(key: usize, keyLen: i32): void {
    this.release();
    const r = imports.proxy_get_shared_data(key, keyLen, hostOut, hostOut + 4, casOut);
    this.status = r;
    if (r === OK) {
      this.take();
      this.cas = load<u32>(casOut);
    } else {
      this.cas = 0;
    }
  }
}

export function setSharedKey(key: ArrayBuffer, ptr: usize, len: i32, cas: u32): u32 {
  return imports.proxy_set_shared_data(changetype<usize>(key), key.byteLength, ptr, len, cas);
}

export function setShared(key: string, ptr: usize, len: i32, cas: u32): u32 {
  const k = String.UTF8.encode(key);
  return imports.proxy_set_shared_data(changetype<usize>(k), k.byteLength, ptr, len, cas);
}

/** Header pairs in the host's serialized form: count, (key len, value len)*, then each key\0 value\0. */
export function serializePairs(names: string[], values: string[]): ArrayBuffer {
  const n = names.length;
  const keys = new Array<ArrayBuffer>(n);
  const vals = new Array<ArrayBuffer>(n);
  let size = 4 + n * 8;
  for (let i = 0; i < n; i++) {
    keys[i] = String.UTF8.encode(names[i]);
    vals[i] = String.UTF8.encode(values[i]);
    size += keys[i].byteLength + vals[i].byteLength + 2;
  }
  const out = new ArrayBuffer(size);
  const p = changetype<usize>(out);
  store<u32>(p, n);
  let at = p + 4 + <usize>(n * 8);
  for (let i = 0; i < n; i++) {
    const k = keys[i];
    const v = vals[i];
    store<u32>(p + 4 + <usize>(i * 8), k.byteLength);
    store<u32>(p + 8 + <usize>(i * 8), v.byteLength);
    memory.copy(at, changetype<usize>(k), <usize>k.byteLength);
    at += <usize>k.byteLength;
    store<u8>(at++, 0);
    memory.copy(at, changetype<usize>(v), <usize>v.byteLength);
    at += <usize>v.byteLength;
    store<u8>(at++, 0);
  }
  return out;
}

/** Answers the request locally with a JSON body (takes effect when the callback returns). */
/** A local reply with a JSON body; `extraName`/`extraValue`: one more header (Retry-After of a 429). */
export function sendJson(
  status: u32,
  body: string,
  details: string,
  extraName: string = "",
  extraValue: string = "",
): u32 {
  const b = String.UTF8.encode(body);
  const d = String.UTF8.encode(details);
  const h =
    extraName.length > 0
      ? serializePairs(["content-type", extraName], ["application/json", extraValue])
      : serializePairs(["content-type"], ["application/json"]);
  return imports.proxy_send_local_response(
    status,
    changetype<usize>(d),
    d.byteLength,
    changetype<usize>(b),
    b.byteLength,
    changetype<usize>(h),
    h.byteLength,
    -1,
  );
}

const tokenOut = memory.data(4);

/** Starts an HTTP call; the token (> 0), or 0 when the host refused it. */
export function httpCall(
  cluster: string,
  names: string[],
  values: string[],
  body: ArrayBuffer,
  timeoutMs: u32,
): u32 {
  const c = String.UTF8.encode(cluster);
  const h = serializePairs(names, values);
  const r = imports.proxy_http_call(
    changetype<usize>(c),
    c.byteLength,
    changetype<usize>(h),
    h.byteLength,
    changetype<usize>(body),
    body.byteLength,
    0,
    0,
    timeoutMs,
    tokenOut,
  );
  return r === OK ? load<u32>(tokenOut) : 0;
}

const metricOut = memory.data(4);

export function defineMetric(kind: u32, name: string): u32 {
  const b = String.UTF8.encode(name);
  return imports.proxy_define_metric(
    <imports.MetricType>kind,
    changetype<usize>(b),
    b.byteLength,
    metricOut,
  ) === OK
    ? load<u32>(metricOut)
    : 0;
}

export function incrementMetric(id: u32, by: i64): void {
  if (id !== 0) imports.proxy_increment_metric(id, by);
}

export function recordMetric(id: u32, value: u64): void {
  if (id !== 0) imports.proxy_record_metric(id, value);
}

export function setTickMs(ms: u32): void {
  imports.proxy_set_tick_period_milliseconds(ms);
}

/** A property (NUL-separated path) as bytes, or null. */
export function getProperty(path: string): ArrayBuffer | null {
  return getPropertyAt(String.UTF8.encode(path));
}

/** getProperty for a path already in bytes (a hot path's, encoded once). */
export function getPropertyAt(path: ArrayBuffer): ArrayBuffer | null {
  const r = imports.proxy_get_property(changetype<usize>(path), path.byteLength, hostOut, hostOut + 4);
  if (r !== OK) return null;
  return takeOut();
}
