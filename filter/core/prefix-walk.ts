// How many leading chunks of a prompt each slot holds, from the prefix-index buckets
// (docs/wire-format.md §4.4), without probing every chunk of a long prompt — and on which tier.
//
// The prefix property: a slot that holds chunk k holds chunks 1..k-1 too (an engine stores a
// block only after its parent), so the sets S(k) = {slots holding chunk k} are nested. A slot's
// cached depth is the largest k with the slot in S(k). Bisection over k with the nested sets
// finds every slot's depth in O(distinct depths × log K) bucket reads: a novel prompt costs one
// read (chunk 1), a prompt every slot holds in full costs two.
//
// Where nesting is broken (a parent evicted before its child, a speculative entry), each
// probed set is intersected with its parent interval's set, so the answer stays a lower bound
// of what the buckets claim — never a depth some chunk before it contradicts.
//
// Tiers (GPU 0, CPU 1, storage 2; a bucket has one row per chunk and tier, a slot in the row of
// its best copy). D_t(s) is the depth over the sets "held on tier t or better", so
// D_0 ≤ D_1 ≤ D_2, and a slot's cached chunks are worth
//     cached(s) = w_gpu·D_0 + w_cpu·(D_1 − D_0) + w_storage·(D_2 − D_1)
// i.e. chunk k counts at the weight of the best tier whose sets hold all of chunks 1..k. The walk
// over all tiers runs first; the D_0 and D_1 walks run only if a probed row of a lower tier held a
// candidate (otherwise they would probe the same chunks, read the same sets and find the same
// depths), and read the buckets through a small per-run memo of what each probed chunk held, so
// a GPU-only fleet pays nothing for tiers and a tiered one re-reads few buckets.

/** Where the walk reads bucket images: shared data in the filter, an in-memory table in tests. */
export abstract class BucketSource {
  /** Set by fetch: the bucket image, valid until the next fetch. */
  ptr: usize = 0;
  len: i32 = 0;
  /** Loads bucket `index`; false when it is missing (treated as empty). */
  abstract fetch(index: u32): bool;
}

const MAX_LEVELS: i32 = 40;
export const TIERS: i32 = 3;
/** Probed chunks remembered per run (direct-mapped by chunk position). */
const MEMO: i32 = 64;

export class PrefixWalk {
  /** Cached depth (complete chunks, any tier) per slot after run(); 0 for slots holding nothing. */
  depth: StaticArray<i32>;
  /** Depth held on the GPU (D_0) and on the GPU or CPU (D_1). */
  gpuDepth: StaticArray<i32>;
  cpuDepth: StaticArray<i32>;
  /** Cached chunks weighted by tier (the formula above). */
  cached: StaticArray<f64>;
  /** Bucket reads made by the last run. */
  lookups: i32 = 0;
  private weights: StaticArray<f64> = new StaticArray<f64>(TIERS);
  private sets: ArrayBuffer;
  private memo: ArrayBuffer;
  private memoK: StaticArray<i32> = new StaticArray<i32>(MEMO);
  private words: i32 = 1;
  private hashes: usize = 0;
  private buckets: u32 = 1;
  private source: BucketSource | null = null;
  /** Highest tier the current walk counts. */
  private maxTier: i32 = TIERS - 1;
  /** Slots the arrays may hold non-zero values for (the widest run since the last full clear). */
  private filled: i32 = 0;
  /** Bit t: the all-tier walk found a candidate in a probed row of tier t. */
  private seen: i32 = 0;
  private target: StaticArray<i32> = new StaticArray<i32>(0);

  constructor(maxSlots: i32, maxWords: i32) {
    this.depth = new StaticArray<i32>(maxSlots);
    this.gpuDepth = new StaticArray<i32>(maxSlots);
    this.cpuDepth = new StaticArray<i32>(maxSlots);
    this.cached = new StaticArray<f64>(maxSlots);
    this.sets = new ArrayBuffer((MAX_LEVELS + 2) * maxWords * 8);
    this.memo = new ArrayBuffer(MEMO * TIERS * maxWords * 8);
    for (let t = 0; t < TIERS; t++) this.weights[t] = 1;
  }

  /** Tier weights from the configuration, each clamped to [0, 1] (NaN → 0). */
  weigh(gpu: f64, cpu: f64, storage: f64): void {
    this.weights[0] = clamp01(gpu);
    this.weights[1] = clamp01(cpu);
    this.weights[2] = clamp01(storage);
  }

  /** Every depth and cached value 0 (no hashes to walk). */
  clear(): void {
    const n = <usize>this.filled;
    memory.fill(changetype<usize>(this.depth), 0, n * 4);
    memory.fill(changetype<usize>(this.gpuDepth), 0, n * 4);
    memory.fill(changetype<usize>(this.cpuDepth), 0, n * 4);
    memory.fill(changetype<usize>(this.cached), 0, n * 8);
    this.filled = 0;
  }

  @inline private set(level: i32): usize {
    return changetype<usize>(this.sets) + <usize>(level * this.words * 8);
  }

  /**
   * Fills `depth`, `gpuDepth`, `cpuDepth` and `cached` for slots 0..slotCount-1 among `candidates`
   * (a bitmap of `words` u64 words). `hashes` points at `count` chunk hashes (h1..hK). Returns
   * false when the arguments do not fit this walker (then every depth is 0).
   */
  run(
    hashes: usize,
    count: i32,
    buckets: u32,
    words: i32,
    slotCount: i32,
    candidates: usize,
    source: BucketSource,
  ): bool {
    this.lookups = 0;
    this.clear();
    const n = slotCount < this.depth.length ? slotCount : this.depth.length;
    // The walk assigns only slots below words × 64; the loops below touch only the first n.
    this.filled = words * 64 < this.depth.length ? words * 64 : this.depth.length;
    if (this.filled < n) this.filled = n;
    if (
      words < 1 ||
      words * 64 < n ||
      (MAX_LEVELS + 2) * words * 8 > this.sets.byteLength ||
      buckets === 0 ||
      count <= 0
    )
      return false;
    this.words = words;
    this.hashes = hashes;
    this.buckets = buckets;
    this.source = source;
    memory.fill(changetype<usize>(this.memoK), 0, <usize>MEMO * 4);
    this.seen = 0;

    this.walk(TIERS - 1, this.depth, count, candidates);
    const any = changetype<usize>(this.depth);
    const gpu = changetype<usize>(this.gpuDepth);
    const cpu = changetype<usize>(this.cpuDepth);
    const cached = changetype<usize>(this.cached);
    const m = <usize>this.filled;
    const w0 = unchecked(this.weights[0]);
    if ((this.seen & 6) === 0) {
      // No lower tier among the probed rows: every tier's depth is the any-tier depth.
      memory.copy(gpu, any, m * 4);
      memory.copy(cpu, any, m * 4);
      for (let s: usize = 0; s < m; s++) store<f64>(cached + (s << 3), w0 * <f64>load<i32>(any + (s << 2)));
      return true;
    }
    this.walk(0, this.gpuDepth, count, candidates);
    if ((this.seen & 4) !== 0) this.walk(1, this.cpuDepth, count, candidates);
    else memory.copy(cpu, any, m * 4);
    const w1 = unchecked(this.weights[1]);
    const w2 = unchecked(this.weights[2]);
    for (let s: usize = 0; s < m; s++) {
      // Lower bounds over nested sets: a better tier's depth never exceeds a worse one's.
      const g = load<i32>(gpu + (s << 2));
      const c0 = load<i32>(cpu + (s << 2));
      const c = c0 > g ? c0 : g;
      const a0 = load<i32>(any + (s << 2));
      const a = a0 > c ? a0 : c;
      store<i32>(cpu + (s << 2), c);
      store<i32>(any + (s << 2), a);
      store<f64>(cached + (s << 3), w0 * <f64>g + w1 * <f64>(c - g) + w2 * <f64>(a - c));
    }
    return true;
  }

  /** One bisection walk counting tiers 0..maxTier, depths into `out`. */
  private walk(maxTier: i32, out: StaticArray<i32>, count: i32, candidates: usize): void {
    this.maxTier = maxTier;
    this.target = out;
    const words = this.words;
    const all = this.set(0);
    memory.copy(all, candidates, <usize>(words * 8));
    // Chunk 1 first: a prompt nobody has seen costs a single read.
    const one = this.set(1);
    this.probe(1, one, all);
    if (this.empty(one)) return;
    if (count === 1) {
      this.assign(one, 0, 1);
      return;
    }
    const last = this.set(2);
    this.probe(count, last, one);
    this.assign(last, 0, count);
    this.resolve(1, count, one, last, 3);
  }

  /** Slots in sLo but not in sHi have their depth in [lo, hi). */
  private resolve(lo: i32, hi: i32, sLo: usize, sHi: usize, level: i32): void {
    if (this.subset(sLo, sHi)) return;
    if (hi - lo === 1 || level >= MAX_LEVELS + 2) {
      this.assign(sLo, sHi, lo);
      return;
    }
    const mid = lo + ((hi - lo) >> 1);
    const sMid = this.set(level);
    this.probe(mid, sMid, sLo);
    // Each recursion level owns one set; both halves recurse into deeper levels, so sMid
    // stays intact for the second half.
    this.resolve(mid, hi, sMid, sHi, level + 1);
    this.resolve(lo, mid, sLo, sMid, level + 1);
  }

  /** S_{≤maxTier}(k) ∩ within → out. */
  private probe(k: i32, out: usize, within: usize): void {
    const words = this.words;
    const rows = this.rows(k);
    const stride = <usize>(words * 8);
    const maxTier = this.maxTier;
    let seen = 0;
    for (let w = 0; w < words; w++) {
      const at = <usize>(w * 8);
      const m = load<u64>(within + at);
      const e1 = load<u64>(rows + stride + at);
      const e2 = load<u64>(rows + 2 * stride + at);
      let v = load<u64>(rows + at);
      if (maxTier >= 1) v |= e1;
      if (maxTier >= 2) v |= e2;
      store<u64>(out + at, v & m);
      if ((e1 & m) !== 0) seen |= 2;
      if ((e2 & m) !== 0) seen |= 4;
    }
    if (maxTier === TIERS - 1) this.seen |= seen;
  }

  /** The slots holding chunk k, one bitmap per tier (words u64 each), read once per run. */
  private rows(k: i32): usize {
    const words = this.words;
    const i = k & (MEMO - 1);
    const rows = changetype<usize>(this.memo) + <usize>(i * TIERS * words * 8);
    // k ≥ 1, so 0 marks an empty memo entry.
    if (this.memoK[i] === k) return rows;
    this.memoK[i] = k;
    memory.fill(rows, 0, <usize>(TIERS * words * 8));
    const h = load<u64>(this.hashes + ((<usize>(k - 1)) << 3));
    const src = this.source!;
    this.lookups++;
    if (!src.fetch(<u32>(h & <u64>(this.buckets - 1)))) return rows;
    const p = src.ptr;
    const len = src.len;
    if (len < 4) return rows;
    if (load<u8>(p, 1) === 0) {
      this.segmentRows(p, len, h, k, rows);
      return rows;
    }
    // The earlier format, bitmap rows, as a control plane from before segment rows publishes it.
    const count = <i32>load<u8>(p);
    const imageWords = <i32>load<u8>(p, 1);
    const entry = 16 + imageWords * 8;
    if (4 + count * entry > len) return rows;
    const copyWords = imageWords < words ? imageWords : words;
    for (let e = 0; e < count; e++) {
      const at = p + 4 + <usize>(e * entry);
      if (load<u64>(at) !== h || load<u32>(at, 8) !== <u32>k) continue;
      const tier = <i32>load<u8>(at, 12);
      // A tier this filter does not know (a newer control plane) is not a hit.
      if (tier >= TIERS) continue;
      const row = rows + <usize>(tier * words * 8);
      for (let w = 0; w < copyWords; w++) {
        const o = <usize>(w * 8);
        store<u64>(row + o, load<u64>(row + o) | load<u64>(at + 16 + o));
      }
    }
    return rows;
  }

  /**
   * ORs into `rows` (a bitmap per tier) the rows of chunk (h, k) in an image of segment rows
   * (docs/wire-format.md §4.4): hash u64, depth u16, tier u8, segment u8, slot bits u32 — the
   * bits of slots 32·segment … 32·segment + 31, i.e. half of bitmap word segment / 2.
   */
  private segmentRows(p: usize, len: i32, h: u64, k: i32, rows: usize): void {
    const count = <i32>load<u16>(p, 2);
    if (4 + count * 16 > len) return;
    const words = this.words;
    const depth = <u16>k;
    for (let e = 0; e < count; e++) {
      const at = p + 4 + <usize>(e << 4);
      if (load<u64>(at) !== h || load<u16>(at, 8) !== depth) continue;
      const tier = <i32>load<u8>(at, 10);
      const segment = <i32>load<u8>(at, 11);
      // A tier this filter does not know (a newer control plane) is not a hit; nor is a slot
      // beyond the configured slot table.
      if (tier >= TIERS || segment >> 1 >= words) continue;
      const half = rows + <usize>(tier * words * 8 + (segment << 2));
      store<u32>(half, load<u32>(half) | load<u32>(at, 12));
    }
  }

  /** target[s] = d for every slot s in a (but not in b, when b != 0). */
  private assign(a: usize, b: usize, d: i32): void {
    const out = this.target;
    const maxSlots = out.length;
    for (let w = 0; w < this.words; w++) {
      let bits = load<u64>(a + <usize>(w * 8));
      if (b !== 0) bits &= ~load<u64>(b + <usize>(w * 8));
      while (bits !== 0) {
        const s = w * 64 + <i32>ctz(bits);
        if (s < maxSlots) out[s] = d;
        bits &= bits - 1;
      }
    }
  }

  private empty(a: usize): bool {
    for (let w = 0; w < this.words; w++) if (load<u64>(a + <usize>(w * 8)) !== 0) return false;
    return true;
  }

  /** a ⊆ b */
  private subset(a: usize, b: usize): bool {
    for (let w = 0; w < this.words; w++) {
      const at = <usize>(w * 8);
      if ((load<u64>(a + at) & ~load<u64>(b + at)) !== 0) return false;
    }
    return true;
  }
}

function clamp01(v: f64): f64 {
  return v >= 1 ? 1 : v > 0 ? v : 0;
}
