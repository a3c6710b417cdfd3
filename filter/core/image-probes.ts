// Probes into the routing pieces of the core for Node tests: the cache-image decoders and the
// prefix walk, each alone. Like index.ts: numbers in, numbers out, bytes through one reusable I/O
// region. Not a request path — the filter's decision is tested and measured as it ships
// (build/kvroute.wasm in the Proxy-Wasm host).
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
import { AdapterMatch, homeOrder, LoraAffinity } from "./lora-affinity";
import { BucketSource, PrefixWalk } from "./prefix-walk";
import { loadSignature } from "./queued-work";

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
    case 14:
      return c.tierGpu;
    case 15:
      return c.tierCpu;
    case 16:
      return c.tierStorage;
    case 17:
      return c.sessionHeaderName.length;
    case 18:
      return c.sessionMargin;
    case 19:
      return c.sessionTtlMs;
    case 20:
      return c.loraLoadCost;
    case 21:
      return c.loraFullCost;
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
    case 8:
      return pool.adapters.length;
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

/** The last decoded load (for queue-probes.ts). */
export function decodedLoad(): LoadImage | null {
  return loadImage;
}

/** The load signature (queued-work.ts) of slot s in the last decoded load; 0 without one. */
export function loadSignatureIo(s: i32): u64 {
  const l = loadImage;
  return l == null ? 0 : loadSignature(l, s);
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
    case 6:
      return l.maxLoras(s);
    case 7:
      return l.activeAdapters(s);
    case 8:
      return l.listedAdapters(s);
    default:
      return -1;
  }
}

/** Listed adapter i of slot s in the last load: its id, +0x10000 when it has running requests; -1 past the list. */
export function loadAdapterIo(s: i32, i: i32): i32 {
  const l = loadImage;
  if (l == null || i < 0 || i >= l.listedAdapters(s)) return -1;
  return <i32>l.adapterId(s, i) | (l.adapterRunning(s, i) ? 0x10000 : 0);
}

const adapterMatch = new AdapterMatch();
let affinity = new LoraAffinity();

/** Looks io[0, len) up as a request's `model` among the last cfg's adapters: pool << 16 | adapter, or -1. */
export function adapterFindIo(len: i32): i32 {
  const c = cfg;
  if (c == null || !adapterMatch.find(c, io.ptr, len)) return -1;
  return (adapterMatch.pool << 16) | adapterMatch.adapter;
}

/** Forgets the adapter affinity's recent routes. */
export function loraResetIo(): void {
  affinity = new LoraAffinity();
}

/** A request of `adapter` (an id in its pool's table) routed to slot and not ended, as the filter counts it after deciding. */
export function loraStartedIo(adapter: i32, slot: i32): void {
  affinity.started(adapter, slot);
}

/** Slot s's place in the home order of (pool, adapter) (lora-affinity.ts), in [0, 1); -1 when s is
 * not the pool's. */
export function loraHomeIo(pool: i32, adapter: i32, s: i32): f64 {
  const t = slots;
  if (t == null || s < 0 || s >= t.count || <i32>t.pool[s] !== pool) return -1;
  let n = 0;
  let k = 0;
  for (let i = 0; i < t.count; i++) {
    if (<i32>t.pool[i] !== pool) continue;
    if (i < s) k++;
    n++;
  }
  return homeOrder(adapter, k, n);
}

/** The adapter cost of slot s for a request of (pool, adapter) at nowMs, over the last cfg, slots and load. */
export function loraCostIo(pool: i32, adapter: i32, s: i32, nowMs: u64): f64 {
  const c = cfg;
  const t = slots;
  const l = loadImage;
  if (c == null || t == null || l == null || s < 0 || s >= t.count) return -1;
  affinity.fill(c, t, l, pool, adapter, nowMs);
  return affinity.cost[s];
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

let weightGpu: f64 = 1;
let weightCpu: f64 = 1;
let weightStorage: f64 = 1;

/** Tier weights for the next walkIo calls (the filter takes them from kvr.cfg). */
export function walkWeighIo(gpu: f64, cpu: f64, storage: f64): void {
  weightGpu = gpu;
  weightCpu = cpu;
  weightStorage = storage;
}

/**
 * io = [count hashes u64][candidates: words u64][directory: buckets × (offset u32, length u32)]
 * [bucket images at their offsets, relative to io]. At routeOutPtr(), per slot: depths (any
 * tier) i32, then GPU depths i32, then GPU-or-CPU depths i32, then tier-weighted cached chunks
 * f64; returns the number of bucket reads, or -1 when the arguments do not fit.
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
  walker.weigh(weightGpu, weightCpu, weightStorage);
  if (!walker.run(hashes, count, buckets, words, slotCount, candidates, table)) return -1;
  out.len = 0;
  out.reserve(slotCount * 20);
  const o = out.ptr;
  const n = <usize>slotCount;
  for (let s = 0; s < slotCount; s++) {
    const at = <usize>(s * 4);
    store<i32>(o + at, walker.depth[s]);
    store<i32>(o + n * 4 + at, walker.gpuDepth[s]);
    store<i32>(o + n * 8 + at, walker.cpuDepth[s]);
    store<f64>(o + n * 12 + <usize>(s * 8), walker.cached[s]);
  }
  return walker.lookups;
}
