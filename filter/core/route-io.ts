// Node export surface for the routing pieces of the core (cache images, prefix walk), used by
// tests and the benchmark. Like index.ts: numbers in, numbers out, bytes through one reusable
// I/O region.
import { ByteBuf } from "./byte-buf";
import {
  CfgImage,
  decodeCfg,
  decodeLoad,
  decodeSlots,
  imageError,
  LoadImage,
  SlotsImage,
} from "./cache-images";
import { fallbackLimit } from "./fallback-limit";
import { decodeString } from "./json-string";
import { BucketSource, PrefixWalk } from "./prefix-walk";
import { RENDER_NONE } from "./render";
import { ENDPOINT_CHAT, RequestHasher } from "./request-hash";
import { Decider, findPool, OUT_NO_SLOT } from "./route-decision";

const io = new ByteBuf(64 << 10);
const out = new ByteBuf(4096);
let cfg: CfgImage | null = null;
let slots: SlotsImage | null = null;
let loadImage: LoadImage | null = null;

export function routeIoReserve(n: i32): usize {
  if (n > io.cap) {
    io.len = 0;
    io.grow(n);
  }
  return io.ptr;
}

export function routeOutPtr(): usize {
  return out.ptr;
}

/** Decodes io[0, len) as kvr.cfg: the pool count, or a negative IMG_ERR_* code. */
export function cfgDecodeIo(len: i32): i32 {
  cfg = decodeCfg(io.ptr, len);
  return cfg == null ? imageError : cfg!.pools.length;
}

/** A numeric field of the last decoded cfg (tests read the image back through this). */
export function cfgField(which: i32): f64 {
  const c = cfg;
  if (c == null) return -1;
  switch (which) {
    case 0:
      return c.chunkSize;
    case 1:
      return c.buckets;
    case 2:
      return c.ways;
    case 3:
      return c.slotWords;
    case 4:
      return c.speculativeTtlMs;
    case 5:
      return c.maxBodyBytes;
    case 6:
      return c.overlapWeight;
    case 7:
      return c.decodeWeight;
    case 8:
      return c.inflightWeight;
    case 9:
      return c.temperature;
    case 10:
      return c.rankPolicy;
    case 11:
      return c.failClosed ? 1 : 0;
    case 12:
      return c.defaultPool;
    case 13:
      return c.trustedCidrs.length;
    default:
      return -1;
  }
}

/** A field of pool p of the last decoded cfg: 0 engine, 1 dpMode, 2 policy, 3 flags, 4 blockSize, 5 models, 6 bos length, 7 has template. */
export function cfgPoolField(p: i32, which: i32): i32 {
  const c = cfg;
  if (c == null || p < 0 || p >= c.pools.length) return -1;
  const pool = c.pools[p];
  switch (which) {
    case 0:
      return pool.engine;
    case 1:
      return pool.dpMode;
    case 2:
      return pool.policy;
    case 3:
      return pool.flags;
    case 4:
      return <i32>pool.blockSize;
    case 5:
      return pool.models.length;
    case 6:
      return pool.bosText.byteLength;
    case 7:
      return pool.template != null ? 1 : 0;
    default:
      return -1;
  }
}

/** Decodes io[0, len) as kvr.slots against the last cfg's pool count: the slot count or an error. */
export function slotsDecodeIo(len: i32): i32 {
  slots = decodeSlots(io.ptr, len, cfg == null ? 0 : cfg!.pools.length);
  return slots == null ? imageError : slots!.count;
}

/** A field of slot s: 0 pool, 1 flags, 2 global rank, 3 header rank, 4 address length. */
export function slotField(s: i32, which: i32): i64 {
  const t = slots;
  if (t == null || s < 0 || s >= t.count) return -1;
  switch (which) {
    case 0:
      return t.pool[s];
    case 1:
      return t.flags[s];
    case 2:
      return t.globalRank[s];
    case 3:
      return t.headerRank[s];
    case 4:
      return String.UTF8.byteLength(t.address[s]);
    default:
      return -1;
  }
}

export function slotWorkerId(s: i32): u64 {
  const t = slots;
  return t == null || s < 0 || s >= t.count ? 0 : t.workerId[s];
}

/** Decodes io[0, len) as kvr.load: the slot count or an error. */
export function loadDecodeIo(len: i32): i32 {
  loadImage = decodeLoad(io.ptr, len);
  return loadImage == null ? imageError : loadImage!.count;
}

/** A field of slot s in the last load: 0 healthy, 1 running, 2 waiting, 3 KV per mille, 4 in-flight, 5 TTFT ms. */
export function loadField(s: i32, which: i32): i64 {
  const l = loadImage;
  if (l == null) return -1;
  switch (which) {
    case 0:
      return l.healthy(s) ? 1 : 0;
    case 1:
      return l.running(s);
    case 2:
      return l.waiting(s);
    case 3:
      return l.kvPermille(s);
    case 4:
      return l.inflight(s);
    case 5:
      return l.ttftMs(s);
    default:
      return -1;
  }
}

/** Bucket images laid out in the I/O region behind a directory of (offset, length) pairs. */
class TableBucketSource extends BucketSource {
  base: usize = 0;
  dir: usize = 0;
  buckets: u32 = 0;
  limit: usize = 0;
  fetch(index: u32): bool {
    if (index >= this.buckets) return false;
    const off = load<u32>(this.dir + ((<usize>index) << 3));
    const len = load<u32>(this.dir + ((<usize>index) << 3), 4);
    if (len === 0 || <usize>off + <usize>len > this.limit) return false;
    this.ptr = this.base + <usize>off;
    this.len = <i32>len;
    return true;
  }
}

const table = new TableBucketSource();
let walker = new PrefixWalk(256, 4);

/**
 * io = [count hashes u64][candidates: words u64][directory: buckets × (offset u32, length u32)]
 * [bucket images at their offsets, relative to io]. Depths land at routeOutPtr() as i32 per slot;
 * returns the number of bucket reads, or -1 when the arguments do not fit.
 */
export function walkIo(count: i32, buckets: u32, words: i32, slotCount: i32, totalLen: i32): i32 {
  if (
    count < 0 ||
    words < 1 ||
    words > 64 ||
    slotCount < 0 ||
    slotCount > words * 64 ||
    buckets === 0 ||
    buckets > 1 << 24
  )
    return -1;
  if (walker.depth.length < slotCount || (walker.depth.length + 63) / 64 < words)
    walker = new PrefixWalk(words * 64, words);
  const hashes = io.ptr;
  const candidates = hashes + ((<usize>count) << 3);
  table.base = io.ptr;
  table.dir = candidates + <usize>(words * 8);
  table.buckets = buckets;
  table.limit = <usize>totalLen;
  if (<u64>count * 8 + <u64>words * 8 + <u64>buckets * 8 > <u64>totalLen) return -1;
  if (!walker.run(hashes, count, buckets, words, slotCount, candidates, table)) return -1;
  out.len = 0;
  out.reserve(slotCount * 4);
  for (let s = 0; s < slotCount; s++) store<i32>(out.ptr + <usize>(s * 4), walker.depth[s]);
  return walker.lookups;
}

// ---- the whole decision, as the filter makes it (for the benchmark and tests) ---------------

const hasher = new RequestHasher();
const decider = new Decider(0x853c49e6748fea9b);
const modelName = new ByteBuf(64);
const tableIo = new ByteBuf(64 << 10);
const bitmaps = new ByteBuf(2 * 1024 * 8);
let pool: i32 = -1;
let localInflight = new StaticArray<u32>(0);
const decision = memory.data(4 * 8);

/** The bucket-table region for routeDecideIo: directory (buckets × 8 bytes) then images. */
export function routeTableReserve(n: i32): usize {
  if (n > tableIo.cap) {
    tableIo.len = 0;
    tableIo.grow(n);
  }
  return tableIo.ptr;
}

/** In-flight requests this gateway sent to slot s that the control plane may not count yet. */
export function routeSetInflight(slot: i32, n: u32): void {
  if (slot < 0 || slot >= 65536) return;
  if (slot >= localInflight.length) {
    const grown = new StaticArray<u32>(slot + 1);
    for (let i = 0; i < localInflight.length; i++) grown[i] = localInflight[i];
    localInflight = grown;
  }
  localInflight[slot] = n;
}

/**
 * Phase 1 over io[0, bodyLen): scan, find the pool, render with its template and hash. Returns
 * the pool index, or a negative scan error, or -100 when no pool serves the model. The chunk
 * hashes are then at routeHashPtr() (routeHashCount() of them): the caller looks up their
 * buckets and lays them out for routeDecideIo.
 */
export function routePrepareIo(bodyLen: i32, endpoint: i32): i32 {
  pool = -1;
  hasher.hashCount = 0;
  const c = cfg;
  if (c == null) return ERR_NO_CFG;
  const scan = hasher.scan;
  const err = scan.scan(io.ptr, bodyLen);
  if (err < 0) return err;
  modelName.len = 0;
  if (scan.modelLen > 0) decodeString(io.ptr + <usize>scan.modelOff, scan.modelLen, scan.modelEsc, modelName);
  const p = findPool(c, modelName.ptr, modelName.len);
  if (p < 0) return ERR_NO_POOL;
  pool = p;
  const def = c.pools[p];
  if (def.models.length === 0) return p;
  const canonical = def.models[0];
  const status = hasher.hashScanned(
    io.ptr,
    endpoint,
    endpoint === ENDPOINT_CHAT ? def.template : null,
    changetype<usize>(def.bosText),
    def.bosText.byteLength,
    changetype<usize>(canonical),
    canonical.byteLength,
    0,
    0,
    c.chunkSize,
  );
  if (status < 0) return status;
  if (status === RENDER_NONE) hasher.hashCount = 0;
  return p;
}

export const ERR_NO_CFG: i32 = -100;
export const ERR_NO_POOL: i32 = -101;

export function routeHashPtr(): usize {
  return hasher.hashes.ptr;
}

export function routeHashCount(): i32 {
  return hasher.hashCount;
}

/** Bytes of the rendered prompt stream of the last routePrepareIo. */
export function routePromptBytes(): i32 {
  return hasher.renderer.out.len;
}

/**
 * Phase 2: candidates of the prepared pool, prefix walk over the bucket table
 * (routeTableReserve region, `tableLen` bytes), decision. `pin` is a client-pinned rank or -1.
 * Returns the OUT_* outcome; routeDecisionPtr() holds slot, prefill slot, cached chunks, lookups.
 */
export function routeDecideIo(pin: i64, tableLen: i32): i32 {
  const c = cfg;
  const t = slots;
  const l = loadImage;
  if (c == null || t == null || l == null || pool < 0) return OUT_NO_SLOT;
  const words = c.slotWords;
  bitmaps.len = 0;
  bitmaps.reserve(words * 16);
  const candidates = bitmaps.ptr;
  const scratch = bitmaps.ptr + <usize>(words * 8);
  if (walker.depth.length < words * 64) walker = new PrefixWalk(words * 64, words);
  decider.candidates(t, l, pool, -1, pin, candidates, words);
  table.base = tableIo.ptr;
  table.dir = tableIo.ptr;
  table.buckets = c.buckets;
  table.limit = <usize>tableLen;
  const count = hasher.hashCount;
  if (count > 0 && <u64>c.buckets * 8 <= <u64>tableLen) {
    walker.run(hasher.hashes.ptr, count, c.buckets, words, t.count, candidates, table);
  } else {
    for (let s = 0; s < walker.depth.length; s++) walker.depth[s] = 0;
    walker.lookups = 0;
  }
  const outcome = decider.decide(
    c,
    t,
    l,
    pool,
    candidates,
    words,
    walker.depth,
    hasher.renderer.out.len,
    pin,
    localInflight,
    scratch,
  );
  store<i32>(decision, decider.slot, 0);
  store<i32>(decision, decider.prefillSlot, 4);
  store<i32>(decision, decider.cachedChunks, 8);
  store<i32>(decision, walker.lookups, 12);
  store<i32>(decision, <i32>decider.rankLow, 16);
  store<i32>(decision, <i32>decider.rankHigh, 20);
  return outcome;
}

export function routeDecisionPtr(): usize {
  return decision;
}

// ---- fallbacks of the last decision (GAIE's ordered destination list) ------------------------

const fallbackOut = new StaticArray<i32>(64);
const allowedIo = new ByteBuf(64);

/**
 * Restricts the next decisions to the `count` slot ids at io[0, 4·count) (the subset hint as
 * the filter builds it); count < 0 lifts the restriction.
 */
export function routeAllowSlotsIo(count: i32): void {
  const c = cfg;
  if (count < 0 || c == null) {
    decider.allowed = 0;
    return;
  }
  const words = c.slotWords;
  allowedIo.len = 0;
  allowedIo.reserve(words * 8);
  memory.fill(allowedIo.ptr, 0, <usize>(words * 8));
  for (let i = 0; i < count; i++) {
    const s = load<i32>(io.ptr + <usize>(i * 4));
    if (s < 0 || s >= words * 64) continue;
    const at = allowedIo.ptr + ((<usize>(s >> 6)) << 3);
    store<u64>(at, load<u64>(at) | ((<u64>1) << (<u64>(s & 63))));
  }
  decider.allowed = allowedIo.ptr;
}

/**
 * After routeDecideIo: the fallback slots of that decision for a pool of `engine` with the
 * plugin option destinationFallbacks = `configured`, as the filter lists them, at
 * routeOutPtr() (i32 each). Returns how many.
 */
export function routeFallbacksIo(engine: u8, configured: u32): i32 {
  const t = slots;
  if (t == null) return 0;
  const max = fallbackLimit(engine, configured);
  if (max === 0) return 0;
  const n = decider.fallbacks(t, max, fallbackOut);
  out.len = 0;
  out.reserve(n * 4);
  for (let i = 0; i < n; i++) store<i32>(out.ptr + <usize>(i * 4), fallbackOut[i]);
  return n;
}
