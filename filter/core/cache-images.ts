// Decoders for the control plane's shared-data images `kvr.cfg`, `kvr.slots`, `kvr.load`, `kvr.gw`
// (docs/wire-format.md §4). The filter decodes an image once per change (its shared-data cas
// tells it when), never per request. A malformed image decodes to null with a reason code and
// the filter keeps its previous one.
import { ImageReader } from "./image-reader";
import { decodeSegmentTemplate, SegmentTemplate } from "./segment-template";

/** 2: kvr.cfg carries tier weights; bucket rows carry a tier (docs/wire-format.md §4). */
export const IMAGE_PROTOCOL: u32 = 2;
/** 3: kvr.cfg ends with the session-affinity settings, then the LoRA costs and the pools'
 * adapter tables; protocol 2 is still read (sessions off, no adapters), so a filter upgraded
 * first keeps reading an older control plane's image. */
export const CFG_PROTOCOL: u32 = 3;
export const CFG_MAGIC: u32 = 0x4352564b; // "KVRC"
export const SLOTS_MAGIC: u32 = 0x5452564b; // "KVRT"
export const LOAD_MAGIC: u32 = 0x4c52564b; // "KVRL"
export const ROSTER_MAGIC: u32 = 0x4752564b; // "KVRG"
export const ROSTER_PROTOCOL: u32 = 1;

export const IMG_ERR_MAGIC: i32 = -1;
export const IMG_ERR_PROTOCOL: i32 = -2;
export const IMG_ERR_TRUNCATED: i32 = -3;
export const IMG_ERR_TRAILING: i32 = -4;
export const IMG_ERR_RANGE: i32 = -5;

/** Why the last decode returned null. */
export let imageError: i32 = 0;

export const ENGINE_VLLM: u8 = 0;
export const ENGINE_SGLANG: u8 = 1;
export const ENGINE_DYNAMO: u8 = 2;
export const DP_INTERNAL: u8 = 0;
export const DP_HYBRID: u8 = 1;
export const DP_EXTERNAL: u8 = 2;
export const POLICY_KV_AWARE: u8 = 0;
export const POLICY_LEAST_LOAD: u8 = 1;
export const POLICY_ROUND_ROBIN: u8 = 2;
export const POLICY_RANDOM: u8 = 3;
export const RANK_IGNORE: u8 = 0;
export const RANK_HONOR: u8 = 1;
export const RANK_REJECT: u8 = 2;
export const POOL_SGLANG_BODY_RANK: u8 = 1;
export const POOL_DYNAMO_LEGACY: u8 = 2;
export const POOL_DISAGGREGATED: u8 = 4;
export const ROLE_AGGREGATED: u8 = 0;
export const ROLE_PREFILL: u8 = 1;
export const ROLE_DECODE: u8 = 2;

/** Limits that keep a hostile or broken image from making the filter allocate without bound. */
const MAX_POOLS: u32 = 1024;
const MAX_MODELS: u32 = 256;
const MAX_CIDRS: u32 = 1024;
const MAX_SLOTS: u32 = 65535;
/** The control plane's MAX_POOL_ADAPTERS (config/schema.ts). */
const MAX_ADAPTERS: u32 = 256;

export class PoolImage {
  name: string = "";
  engine: u8 = 0;
  dpMode: u8 = 0;
  policy: u8 = 0;
  flags: u8 = 0;
  blockSize: u32 = 16;
  /** Model names as bytes (the first is canonical and seeds h0), compared to the request's `model`. */
  models: ArrayBuffer[] = [];
  bosText: ArrayBuffer = new ArrayBuffer(0);
  /** null: chats of this pool are not segmentable (route by load and speculative affinity). */
  template: SegmentTemplate | null = null;
  /** Overload shedding (filter/core/shedding.ts): off unless the pool's configuration enables it. */
  shedding: bool = false;
  retryAfterSeconds: u32 = 1;
  /** Saturation thresholds of standard and sheddable requests: queued requests, KV per mille. */
  standardMaxQueued: u32 = 0;
  standardMaxKvPermille: u32 = 0;
  sheddableMaxQueued: u32 = 0;
  sheddableMaxKvPermille: u32 = 0;
  /** LoRA adapters served over the pool's base model (ids = positions; lora-affinity.ts). */
  adapters: ArrayBuffer[] = [];
}

export class CfgImage {
  chunkSize: i32 = 128;
  buckets: u32 = 0;
  ways: u32 = 0;
  slotWords: i32 = 1;
  speculativeTtlMs: u32 = 0;
  maxBodyBytes: u32 = 0;
  overlapWeight: f32 = 1;
  decodeWeight: f32 = 1;
  inflightWeight: f32 = 1;
  temperature: f32 = 0;
  /** Worth of a cached chunk by the tier holding it (GPU, CPU, storage), 0..1. */
  tierGpu: f32 = 1;
  tierCpu: f32 = 1;
  tierStorage: f32 = 1;
  rankPolicy: u8 = RANK_IGNORE;
  failClosed: bool = false;
  defaultPool: i32 = -1;
  secretHeaderName: string = "";
  secretHeaderValue: string = "";
  trustedCidrs: string[] = [];
  pools: PoolImage[] = [];
  /** The request header carrying a priority (filter/core/priority.ts); never forwarded. */
  priorityHeaderName: string = DEFAULT_PRIORITY_HEADER;
  /** Session affinity (session-affinity.ts): the session header, "" = off (a protocol-2 image). */
  sessionHeaderName: string = "";
  /** How much costlier than the best a session's slot may be and still be kept (prefill-token equivalents). */
  sessionMargin: f32 = 0;
  sessionTtlMs: u32 = 0;
  /** Adapter affinity's costs in prefill tokens (lora-affinity.ts); 0 in a protocol-2 image. */
  loraLoadCost: f32 = 0;
  loraFullCost: f32 = 0;
}

/** The priority header before any configuration arrived (the control plane's default). */
export const DEFAULT_PRIORITY_HEADER = "x-kvroute-priority";

function header(r: ImageReader, magic: u32): bool {
  return headerProtocol(r, magic, IMAGE_PROTOCOL, IMAGE_PROTOCOL) !== 0;
}

/** Reads magic and protocol; the protocol when it is within oldest..newest, else 0 (imageError set). */
function headerProtocol(r: ImageReader, magic: u32, oldest: u32, newest: u32): u32 {
  if (r.u32() !== magic) {
    imageError = IMG_ERR_MAGIC;
    return 0;
  }
  const protocol = <u32>r.u16();
  if (protocol < oldest || protocol > newest) {
    imageError = IMG_ERR_PROTOCOL;
    return 0;
  }
  return protocol;
}

function finish(r: ImageReader): bool {
  if (!r.ok) {
    imageError = IMG_ERR_TRUNCATED;
    return false;
  }
  if (!r.atEnd()) {
    imageError = IMG_ERR_TRAILING;
    return false;
  }
  return true;
}

export function decodeCfg(ptr: usize, len: i32): CfgImage | null {
  const r = new ImageReader(ptr, len);
  const protocol = headerProtocol(r, CFG_MAGIC, IMAGE_PROTOCOL, CFG_PROTOCOL);
  if (protocol === 0) return null;
  r.u16();
  const c = new CfgImage();
  c.chunkSize = <i32>r.u32();
  c.buckets = r.u32();
  c.ways = r.u16();
  c.slotWords = <i32>r.u16();
  c.speculativeTtlMs = r.u32();
  c.maxBodyBytes = r.u32();
  c.overlapWeight = r.f32();
  c.decodeWeight = r.f32();
  c.inflightWeight = r.f32();
  c.temperature = r.f32();
  c.tierGpu = r.f32();
  c.tierCpu = r.f32();
  c.tierStorage = r.f32();
  c.rankPolicy = <u8>r.u8();
  c.failClosed = r.u8() !== 0;
  c.defaultPool = r.i16();
  c.secretHeaderName = r.str16();
  c.secretHeaderValue = r.str16();
  const cidrs = r.u16();
  if (cidrs > MAX_CIDRS) r.ok = false;
  for (let i: u32 = 0; r.ok && i < cidrs; i++) c.trustedCidrs.push(r.str16());
  const pools = r.u16();
  if (pools > MAX_POOLS) r.ok = false;
  for (let i: u32 = 0; r.ok && i < pools; i++) {
    const p = new PoolImage();
    p.name = r.str16();
    p.engine = <u8>r.u8();
    p.dpMode = <u8>r.u8();
    p.policy = <u8>r.u8();
    p.flags = <u8>r.u8();
    p.blockSize = r.u16();
    const models = r.u16();
    if (models > MAX_MODELS) r.ok = false;
    for (let m: u32 = 0; r.ok && m < models; m++) p.models.push(r.str16Bytes());
    p.bosText = r.str16Bytes();
    const tpl = r.blob32();
    if (r.ok && tpl.byteLength > 0)
      p.template = decodeSegmentTemplate(changetype<usize>(tpl), tpl.byteLength);
    p.shedding = (r.u8() & 1) !== 0;
    r.u8();
    p.retryAfterSeconds = r.u16();
    p.standardMaxQueued = r.u16();
    p.standardMaxKvPermille = r.u16();
    p.sheddableMaxQueued = r.u16();
    p.sheddableMaxKvPermille = r.u16();
    c.pools.push(p);
  }
  c.priorityHeaderName = r.str16();
  if (protocol >= 3) {
    c.sessionHeaderName = r.str16();
    c.sessionMargin = r.f32();
    c.sessionTtlMs = r.u32();
    c.loraLoadCost = r.f32();
    c.loraFullCost = r.f32();
    for (let i = 0; r.ok && i < c.pools.length; i++) {
      const n = r.u16();
      if (n > MAX_ADAPTERS) r.ok = false;
      const p = c.pools[i];
      for (let a: u32 = 0; r.ok && a < n; a++) p.adapters.push(r.str16Bytes());
    }
  }
  if (!finish(r)) return null;
  // Values the routing math divides by or indexes with: refuse the image rather than trap later.
  const bucketsPowerOfTwo = c.buckets !== 0 && (c.buckets & (c.buckets - 1)) === 0;
  if (
    c.chunkSize < 1 ||
    !bucketsPowerOfTwo ||
    c.ways === 0 ||
    c.slotWords < 1 ||
    c.slotWords > 1024 ||
    c.defaultPool >= c.pools.length ||
    c.priorityHeaderName.length === 0 ||
    !(c.sessionMargin >= 0)
  ) {
    imageError = IMG_ERR_RANGE;
    return null;
  }
  imageError = 0;
  return c;
}

export class SlotsImage {
  count: i32 = 0;
  pool: StaticArray<u16> = new StaticArray<u16>(0);
  flags: StaticArray<u8> = new StaticArray<u8>(0);
  globalRank: StaticArray<u32> = new StaticArray<u32>(0);
  /** -1: send no rank header (vLLM external LB: the port is the rank). */
  headerRank: StaticArray<i32> = new StaticArray<i32>(0);
  workerId: StaticArray<u64> = new StaticArray<u64>(0);
  address: string[] = [];
  /** Each address's UTF-8 bytes, as the destination header carries them (decoded once per image). */
  addressBytes: ArrayBuffer[] = [];

  @inline present(slot: i32): bool {
    return (this.flags[slot] & 1) !== 0;
  }
  @inline role(slot: i32): u8 {
    return (this.flags[slot] >> 1) & 3;
  }
}

export function decodeSlots(ptr: usize, len: i32, poolCount: i32): SlotsImage | null {
  const r = new ImageReader(ptr, len);
  if (!header(r, SLOTS_MAGIC)) return null;
  const n = r.u16();
  if (n > MAX_SLOTS) r.ok = false;
  const s = new SlotsImage();
  const count = r.ok ? <i32>n : 0;
  s.count = count;
  s.pool = new StaticArray<u16>(count);
  s.flags = new StaticArray<u8>(count);
  s.globalRank = new StaticArray<u32>(count);
  s.headerRank = new StaticArray<i32>(count);
  s.workerId = new StaticArray<u64>(count);
  for (let i = 0; r.ok && i < count; i++) {
    const pool = r.u16();
    if (<i32>pool >= poolCount) r.ok = false;
    s.pool[i] = <u16>pool;
    s.flags[i] = <u8>r.u8();
    r.u8();
    s.globalRank[i] = r.u32();
    s.headerRank[i] = r.i32();
    s.workerId[i] = r.u64();
    const address = r.str16();
    s.address.push(address);
    s.addressBytes.push(String.UTF8.encode(address));
  }
  if (!finish(r)) return null;
  imageError = 0;
  return s;
}

/** The load image, kept as bytes (it changes several times a second) with typed accessors. */
export class LoadImage {
  data: ArrayBuffer = new ArrayBuffer(0);
  count: i32 = 0;
  stride: i32 = 0;

  @inline private at(slot: i32): usize {
    return changetype<usize>(this.data) + 12 + <usize>(slot * this.stride);
  }
  /** Slots beyond the image (published before the load caught up) read as unhealthy and idle. */
  healthy(slot: i32): bool {
    return slot < this.count && (load<u8>(this.at(slot)) & 1) !== 0;
  }
  running(slot: i32): u32 {
    return slot < this.count ? <u32>load<u16>(this.at(slot), 2) : 0;
  }
  waiting(slot: i32): u32 {
    return slot < this.count ? <u32>load<u16>(this.at(slot), 4) : 0;
  }
  kvPermille(slot: i32): u32 {
    return slot < this.count ? <u32>load<u16>(this.at(slot), 6) : 0;
  }
  inflight(slot: i32): u32 {
    return slot < this.count ? load<u32>(this.at(slot), 8) : 0;
  }
  ttftMs(slot: i32): u32 {
    return slot < this.count ? load<u32>(this.at(slot), 12) : 0;
  }
  /** The slot's adapter capacity (vLLM max_loras); 0: no LoRA report (or an image without one). */
  maxLoras(slot: i32): u32 {
    return this.hasLora(slot) ? <u32>load<u8>(this.at(slot), 16) : 0;
  }
  /** Distinct adapters with running or waiting requests, named in the ids or not. */
  activeAdapters(slot: i32): u32 {
    return this.hasLora(slot) ? <u32>load<u8>(this.at(slot), 17) : 0;
  }
  /** How many of loraId(slot, 0..) are filled (≤ LOAD_ADAPTER_IDS). */
  listedAdapters(slot: i32): i32 {
    if (!this.hasLora(slot)) return 0;
    const n = <i32>load<u8>(this.at(slot), 18);
    return n < LOAD_ADAPTER_IDS ? n : LOAD_ADAPTER_IDS;
  }
  /** Listed adapter i's id in the pool's adapter table; 0xffff: one the table does not have. */
  adapterId(slot: i32, i: i32): u32 {
    return <u32>load<u16>(this.at(slot) + 20 + <usize>(i << 1));
  }
  /** Listed adapter i has running requests (else only waiting ones). */
  adapterRunning(slot: i32, i: i32): bool {
    return ((<u32>load<u8>(this.at(slot), 19) >> <u32>i) & 1) !== 0;
  }
  @inline private hasLora(slot: i32): bool {
    return slot < this.count && this.stride >= LOAD_LORA_STRIDE;
  }
}

/** Adapter ids per slot in kvr.load (the control plane's LOAD_ADAPTER_IDS). */
export const LOAD_ADAPTER_IDS: i32 = 8;
/** The stride from which a load image carries the LoRA fields (wire-format §4.3). */
const LOAD_LORA_STRIDE: i32 = 36;

const LOAD_MIN_STRIDE: u32 = 16;

export function decodeLoad(ptr: usize, len: i32): LoadImage | null {
  const r = new ImageReader(ptr, len);
  if (!header(r, LOAD_MAGIC)) return null;
  const count = r.u16();
  const stride = r.u16();
  r.u16();
  if (!r.ok) {
    imageError = IMG_ERR_TRUNCATED;
    return null;
  }
  if (stride < LOAD_MIN_STRIDE) {
    imageError = IMG_ERR_RANGE;
    return null;
  }
  if (<u64>len !== 12 + <u64>count * <u64>stride) {
    imageError = <u64>len < 12 + <u64>count * <u64>stride ? IMG_ERR_TRUNCATED : IMG_ERR_TRAILING;
    return null;
  }
  const l = new LoadImage();
  l.data = new ArrayBuffer(len);
  memory.copy(changetype<usize>(l.data), ptr, <usize>len);
  l.count = <i32>count;
  l.stride = <i32>stride;
  imageError = 0;
  return l;
}

/** kvr.gw: the id hashes of the gateways that report now, ascending (wire-format §4.7). */
export class RosterImage {
  hashes: StaticArray<u64> = new StaticArray<u64>(0);

  get count(): i32 {
    return this.hashes.length;
  }

  /** The gateway's place in the roster, -1 when it is not listed (binary search). */
  indexOf(hash: u64): i32 {
    let lo = 0;
    let hi = this.hashes.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const h = this.hashes[mid];
      if (h === hash) return mid;
      if (h < hash) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }
}

export function decodeRoster(ptr: usize, len: i32): RosterImage | null {
  const r = new ImageReader(ptr, len);
  if (headerProtocol(r, ROSTER_MAGIC, ROSTER_PROTOCOL, ROSTER_PROTOCOL) === 0) return null;
  const count = <i32>r.u16();
  if (!r.ok || <u64>len !== 8 + <u64>count * 8) {
    imageError = !r.ok || <u64>len < 8 + <u64>count * 8 ? IMG_ERR_TRUNCATED : IMG_ERR_TRAILING;
    return null;
  }
  const hashes = new StaticArray<u64>(count);
  for (let i = 0; i < count; i++) {
    hashes[i] = r.u64();
    if (i > 0 && hashes[i] <= hashes[i - 1]) {
      imageError = IMG_ERR_RANGE;
      return null;
    }
  }
  if (!finish(r)) return null;
  const g = new RosterImage();
  g.hashes = hashes;
  imageError = 0;
  return g;
}
