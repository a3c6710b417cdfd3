// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// The routing core: pure logic shared by the Proxy-Wasm filter and the control plane (via
// @assemblyscript/loader). No Proxy-Wasm or host imports may appear anywhere under core/.
//
// This file is the Node export surface only: every function takes and returns numbers, and
// bytes move through one reusable I/O region in linear memory (`ioReserve`), so a call from
// Node costs no loader marshalling or allocation. The filter imports the modules directly
// (request-hash.ts, rank-header.ts, segment-template.ts).
import { ByteBuf } from "./byte-buf";
import { chainChunks, lastChainHash, rootHash } from "./chunk-hash";
import { ERR_ARGUMENT } from "./errors";
import { decodeString } from "./json-string";
import { parseRank } from "./rank-header";
import { RENDER_NONE } from "./render";
import { ENDPOINT_CHAT, ENDPOINT_COMPLETIONS, RequestHasher } from "./request-hash";
import { decodeSegmentTemplate, SegmentTemplate, templateError } from "./segment-template";
import { UsageScan, usageModeOf } from "./usage-scan";
import { xxh64 } from "./xxh64";

export { keepHeadroom } from "./heap-headroom";
export * from "./ingest-io";

export const PROTOCOL_VERSION: u32 = 1;

const io = new ByteBuf(64 << 10);
const scratch = new ByteBuf(256);
const decoded = new ByteBuf(256);
const hasher = new RequestHasher();
const templates: (SegmentTemplate | null)[] = [];
const scanResult = memory.data(4 * 20);

/** Does a range of n bytes from the start of the I/O region stay inside it? (i64: sums of lengths cannot wrap) */
function ioHolds(n: i64): bool {
  return n >= 0 && n <= <i64>io.cap;
}

/** Where the heap begins (the allocator's root lies at the next 16-byte boundary): bench/lib/core-heap.ts walks it. */
export function heapBasePtr(): usize {
  return __heap_base;
}

/** Ensures the I/O region holds n bytes and returns its address (it moves when it grows). */
export function ioReserve(n: i32): usize {
  if (n > io.cap) {
    io.len = 0;
    io.grow(n);
  }
  return io.ptr;
}

export function xxh64Io(len: i32, seed: u64): u64 {
  if (!ioHolds(len)) return 0;
  return xxh64(io.ptr, <usize>len, seed);
}

/** h0 of model ‖ 0 ‖ lora ‖ 0 ‖ salt, the three strings lying back to back in the I/O region. */
export function rootHashIo(modelLen: i32, loraLen: i32, saltLen: i32): u64 {
  if (modelLen < 0 || loraLen < 0 || saltLen < 0 || !ioHolds(<i64>modelLen + loraLen + saltLen)) return 0;
  const p = io.ptr;
  return rootHash(
    p,
    modelLen,
    p + <usize>modelLen,
    loraLen,
    p + <usize>(modelLen + loraLen),
    saltLen,
    scratch,
  );
}

/**
 * Continues a chunk chain over io[0, total) = (partial chunk ‖ new bytes). Returns the number of
 * complete chunks (their hashes at hashPtr()); the new partial is io[count*chunk, total) and
 * the new previous hash chunkLastHash().
 */
export function chunkFeedIo(prev: u64, total: i32, chunk: i32): i32 {
  if (chunk < 1 || !ioHolds(total)) return ERR_ARGUMENT;
  const h = hasher.hashes;
  h.len = 0;
  h.reserve((total / chunk) * 8);
  return chainChunks(prev, io.ptr, total, chunk, h.ptr);
}

export function chunkLastHash(): u64 {
  return lastChainHash;
}

export function hashPtr(): usize {
  return hasher.hashes.ptr;
}

export function hashCount(): i32 {
  return hasher.hashCount;
}

/** Decodes a segment template from io[0, len): its id (≥ 0) or a negative TPL_ERR_* code. */
export function templateLoad(len: i32): i32 {
  if (!ioHolds(len)) return ERR_ARGUMENT;
  const t = decodeSegmentTemplate(io.ptr, len);
  if (t == null) return templateError;
  for (let i = 0; i < templates.length; i++) {
    if (unchecked(templates[i]) == null) {
      templates[i] = t;
      return i;
    }
  }
  templates.push(t);
  return templates.length - 1;
}

export function templateFree(id: i32): void {
  if (id >= 0 && id < templates.length) {
    templates[id] = null;
  }
}

function templateById(id: i32): SegmentTemplate | null {
  return id >= 0 && id < templates.length ? unchecked(templates[id]) : null;
}

/** Scans io[0, len). Returns 0 or a negative error; the fields are at scanResultPtr(). */
export function scanIo(len: i32): i32 {
  const s = hasher.scan;
  const r = ioHolds(len) ? s.scan(io.ptr, len) : ERR_ARGUMENT;
  const f = scanResult;
  store<i32>(f, s.modelOff, 0);
  store<i32>(f, s.modelLen, 4);
  store<i32>(f, s.modelEsc ? 1 : 0, 8);
  store<i32>(f, s.promptKind, 12);
  store<i32>(f, s.promptOff, 16);
  store<i32>(f, s.promptLen, 20);
  store<i32>(f, s.promptEsc ? 1 : 0, 24);
  store<i32>(f, s.promptCount, 28);
  store<i32>(f, s.stream, 32);
  store<i32>(f, s.saltOff, 36);
  store<i32>(f, s.saltLen, 40);
  store<i32>(f, s.saltEsc ? 1 : 0, 44);
  store<i32>(f, s.loraOff, 48);
  store<i32>(f, s.loraLen, 52);
  store<i32>(f, s.loraEsc ? 1 : 0, 56);
  store<i32>(f, s.flags, 60);
  store<i32>(f, s.hasMessages ? 1 : 0, 64);
  store<i32>(f, s.msgCount, 68);
  store<i32>(f, s.partCount, 72);
  return r;
}

export function scanResultPtr(): usize {
  return scanResult;
}

/** Message records (json-scan.ts MSG_RECORD) of the last scan. */
export function scanMessagesPtr(): usize {
  return hasher.scan.messages.ptr;
}

/** Part records (json-scan.ts PART_RECORD) of the last scan. */
export function scanPartsPtr(): usize {
  return hasher.scan.parts.ptr;
}

/** Decodes the string span io[off, off+len) of the last scan; bytes at decodedPtr(). */
export function decodeSpanIo(off: i32, len: i32, escaped: i32): i32 {
  decoded.len = 0;
  if (off < 0 || len < 0 || !ioHolds(<i64>off + len)) return ERR_ARGUMENT;
  decodeString(io.ptr + <usize>off, len, escaped !== 0, decoded);
  return decoded.len;
}

export function decodedPtr(): usize {
  return decoded.ptr;
}

/**
 * Renders io[0, bodyLen) (endpoint 1 chat with template `templateId`, 2 completions with the
 * BOS text at io[bodyLen, bodyLen+bosLen)). Returns a negative scan error or RENDER_*; the
 * stream is at renderedPtr() / renderedLen().
 */
export function renderIo(bodyLen: i32, endpoint: i32, templateId: i32, bosLen: i32, maxStream: i32): i32 {
  const r = hasher.renderer;
  r.out.len = 0;
  if (maxStream < 0 || bosLen < 0 || !ioHolds(bodyLen) || !ioHolds(<i64>bodyLen + bosLen))
    return ERR_ARGUMENT;
  r.maxStream = maxStream;
  const s = hasher.scan;
  const err = s.scan(io.ptr, bodyLen);
  if (err < 0) return err;
  if (endpoint === ENDPOINT_CHAT) {
    const t = templateById(templateId);
    return t == null ? RENDER_NONE : r.renderChat(s, t);
  }
  if (endpoint === ENDPOINT_COMPLETIONS) return r.renderCompletion(s, io.ptr + <usize>bodyLen, bosLen);
  return ERR_ARGUMENT;
}

export function renderedPtr(): usize {
  return hasher.renderer.out.ptr;
}

export function renderedLen(): i32 {
  return hasher.renderer.out.len;
}

/**
 * The filter's whole pipeline (RequestHasher.run) over io = body ‖ bos ‖ model ‖ lora. Returns a
 * negative error or RENDER_*; hashCount() hashes at hashPtr(), the stream at renderedPtr().
 */
export function hashRequestIo(
  bodyLen: i32,
  endpoint: i32,
  templateId: i32,
  bosLen: i32,
  modelLen: i32,
  loraLen: i32,
  chunk: i32,
  maxStream: i32,
): i32 {
  const tail = <i64>bodyLen + bosLen + modelLen + loraLen;
  if (maxStream < 0 || bosLen < 0 || modelLen < 0 || loraLen < 0 || !ioHolds(bodyLen) || !ioHolds(tail)) {
    return ERR_ARGUMENT;
  }
  const p = io.ptr;
  hasher.renderer.maxStream = maxStream;
  const bos = p + <usize>bodyLen;
  const model = bos + <usize>bosLen;
  const lora = model + <usize>modelLen;
  return hasher.run(
    p,
    bodyLen,
    endpoint,
    templateById(templateId),
    bos,
    bosLen,
    model,
    modelLen,
    lora,
    loraLen,
    chunk,
  );
}

/** Strict DP-rank parse of io[0, len): the rank, or -1 when invalid. */
export function parseRankIo(len: i32): i64 {
  if (!ioHolds(len)) return -1;
  return parseRank(io.ptr, len);
}

// The response-side usage scanner (usage-scan.ts), one response at a time.
const usage = new UsageScan();

/** Starts a response: mode USAGE_JSON (1), USAGE_SSE (2) or 0 (off); at most `budget` bytes. */
export function usageBegin(mode: i32, budget: u32): void {
  usage.begin(mode, budget);
}

/** The next io[0, len) bytes of the response body. */
export function usageFeedIo(len: i32): i32 {
  if (!ioHolds(len)) return ERR_ARGUMENT;
  usage.feed(io.ptr, len);
  return 0;
}

/** Ends the response; returns its SERVED_* flags. */
export function usageFinish(): i32 {
  usage.finish();
  return <i32>usage.flags;
}

/** The served cached tokens (with SERVED_CACHED), as f64 so every u32 crosses exactly. */
export function usageCached(): f64 {
  return <f64>usage.cached;
}

/** usageModeOf over io: content-type io[0, typeLen), content-encoding after it (-1 = absent). */
export function usageModeIo(typeLen: i32, encodingLen: i32): i32 {
  const t = typeLen < 0 ? 0 : typeLen;
  if (!ioHolds(<i64>t + (encodingLen < 0 ? 0 : encodingLen))) return ERR_ARGUMENT;
  return usageModeOf(io.ptr, typeLen, io.ptr + <usize>t, encodingLen);
}

/** Bytes the scan looked at. */
export function usageScanned(): f64 {
  return <f64>usage.scanned;
}

// Routing pieces (cache images, prefix walk) for Node tests and benchmarks.
export * from "./image-probes";
export * from "./queue-probes";
