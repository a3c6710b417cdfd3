// How many leading chunks of a prompt each slot holds, from the prefix-index buckets
// (docs/wire-format.md §4.4), without probing every chunk of a long prompt.
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

/** Where the walk reads bucket images: shared data in the filter, an in-memory table in tests. */
export abstract class BucketSource {
  /** Set by fetch: the bucket image, valid until the next fetch. */
  ptr: usize = 0;
  len: i32 = 0;
  /** Loads bucket `index`; false when it is missing (treated as empty). */
  abstract fetch(index: u32): bool;
}

const MAX_LEVELS: i32 = 40;

export class PrefixWalk {
  /** Cached depth (complete chunks) per slot after run(); 0 for slots holding nothing. */
  depth: StaticArray<i32>;
  /** Bucket reads made by the last run. */
  lookups: i32 = 0;
  private sets: ArrayBuffer;
  private words: i32 = 1;
  private hashes: usize = 0;
  private buckets: u32 = 1;
  private source: BucketSource | null = null;

  constructor(maxSlots: i32, maxWords: i32) {
    this.depth = new StaticArray<i32>(maxSlots);
    this.sets = new ArrayBuffer((MAX_LEVELS + 2) * maxWords * 8);
  }

  @inline private set(level: i32): usize {
    return changetype<usize>(this.sets) + <usize>(level * this.words * 8);
  }

  /**
   * Fills `depth` for slots 0..slotCount-1 among `candidates` (a bitmap of `words` u64 words).
   * `hashes` points at `count` chunk hashes (h1..hK). Returns false when the arguments do not
   * fit this walker (then every depth is 0).
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
    const maxSlots = this.depth.length;
    const n = slotCount < maxSlots ? slotCount : maxSlots;
    for (let s = 0; s < maxSlots; s++) this.depth[s] = 0;
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

    const all = this.set(0);
    memory.copy(all, candidates, <usize>(words * 8));
    // Chunk 1 first: a prompt nobody has seen costs a single read.
    const one = this.set(1);
    this.probe(1, one, all);
    if (this.empty(one)) return true;
    if (count === 1) {
      this.assign(one, 0, 1);
      return true;
    }
    const last = this.set(2);
    this.probe(count, last, one);
    this.assign(last, 0, count);
    this.resolve(1, count, one, last, 3);
    return true;
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

  /** S(k) ∩ within → out. */
  private probe(k: i32, out: usize, within: usize): void {
    const words = this.words;
    memory.fill(out, 0, <usize>(words * 8));
    const h = load<u64>(this.hashes + ((<usize>(k - 1)) << 3));
    const src = this.source!;
    this.lookups++;
    if (!src.fetch(<u32>(h & <u64>(this.buckets - 1)))) return;
    const p = src.ptr;
    const len = src.len;
    if (len < 4) return;
    const count = <i32>load<u8>(p);
    const imageWords = <i32>load<u8>(p, 1);
    const entry = 16 + imageWords * 8;
    if (imageWords < 1 || 4 + count * entry > len) return;
    const copyWords = Math.min(imageWords, words);
    for (let i = 0; i < count; i++) {
      const e = p + 4 + <usize>(i * entry);
      if (load<u64>(e) !== h || load<u32>(e, 8) !== <u32>k) continue;
      for (let w = 0; w < copyWords; w++) {
        const at = <usize>(w * 8);
        store<u64>(out + at, load<u64>(e + 16 + at) & load<u64>(within + at));
      }
      return;
    }
  }

  /** depth[s] = d for every slot s in a (but not in b, when b != 0). */
  private assign(a: usize, b: usize, d: i32): void {
    const maxSlots = this.depth.length;
    for (let w = 0; w < this.words; w++) {
      let bits = load<u64>(a + <usize>(w * 8));
      if (b !== 0) bits &= ~load<u64>(b + <usize>(w * 8));
      while (bits !== 0) {
        const s = w * 64 + <i32>ctz(bits);
        if (s < maxSlots) this.depth[s] = d;
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
