// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// Encodes a prefix-index bucket's shared-data image (docs/wire-format.md §4.4) straight from the
// chunk table, for the control plane's publication. It writes the same bytes as the reference
// encoder (control-plane/src/index/bucket-image.ts encodeBucket; a property test holds them
// equal) without building a JavaScript object per chunk: publication used to spend 0.47 µs per
// chunk entry of every dirty bucket there (docs/scaling.md), most of the control plane's CPU at a
// few dozen ranks.
//
// Rows: one per (chunk, tier) that is some slot's best copy (a speculative route counts as a GPU
// copy). When more than `ways` rows fall into the bucket, the shallowest are kept, then the better
// tier, then the most recently stored, then the smaller hash — a total order, so keeping the
// first `ways` of it by insertion is the reference's sort-and-slice.
import { ByteBuf } from "./byte-buf";
import { ChunkTable } from "./chunk-table";

const TIERS: u32 = 3;
const HEADER_BYTES: i32 = 4;
/** `count` is a u8 in the image. */
const MAX_WAYS: i32 = 255;

const keptRef = new StaticArray<u32>(MAX_WAYS + 1);
const keptTier = new StaticArray<u32>(MAX_WAYS + 1);

/** Is row (a, ta) kept before row (b, tb)? */
function before(t: ChunkTable, a: u32, ta: u32, b: u32, tb: u32): bool {
  const ra = t.rec(a);
  const rb = t.rec(b);
  const da = t.depthAt(ra);
  const db = t.depthAt(rb);
  if (da !== db) return da < db;
  if (ta !== tb) return ta < tb;
  const sa = t.stampAt(ra);
  const sb = t.stampAt(rb);
  if (sa !== sb) return sa > sb;
  return t.hashAt(ra) < t.hashAt(rb);
}

/** Is `slot` speculatively routed the chunk `hash`? (spec: `specCount` × {hash u64, slot u32, pad u32}) */
function speculated(hash: u64, slot: u32, spec: usize, specCount: i32): bool {
  for (let i = 0; i < specCount; i++) {
    const at = spec + ((<usize>i) << 4);
    if (load<u64>(at) === hash && load<u32>(at, 8) === slot) return true;
  }
  return false;
}

/** The best (lowest) tier on which `slot` holds the chunk in record r, or TIERS when none. */
function bestTier(t: ChunkTable, r: usize, slot: u32, hash: u64, spec: usize, specCount: i32): u32 {
  if (specCount > 0 && speculated(hash, slot, spec, specCount)) return 0;
  const h = t.holders(r);
  const n = t.holderCount(r);
  let best = TIERS;
  for (let i: u32 = 0; i < n; i++) {
    const v = load<u64>(h + ((<usize>i) << 3));
    if (<u32>(v & 0xffff) !== slot) continue;
    const tier = <u32>((v >> 16) & 0xff);
    if (tier < best) best = tier;
  }
  return best;
}

/** Bit t set: some slot's best copy of record r's chunk is on tier t. */
function rowTiers(t: ChunkTable, r: usize, spec: usize, specCount: i32): u32 {
  const hash = t.hashAt(r);
  const h = t.holders(r);
  const n = t.holderCount(r);
  let bits: u32 = 0;
  for (let i: u32 = 0; i < n; i++) {
    const slot = <u32>(load<u64>(h + ((<usize>i) << 3)) & 0xffff);
    const best = bestTier(t, r, slot, hash, spec, specCount);
    if (best < TIERS) bits |= 1 << best;
  }
  for (let i = 0; i < specCount; i++) if (load<u64>(spec + ((<usize>i) << 4)) === hash) bits |= 1;
  // The reference gives a record without holders or routes one empty GPU row.
  return bits === 0 ? 1 : bits;
}

/** Inserts row (ref, tier) among the `n` kept ones in keep order; returns the new count (≤ ways). */
function keep(t: ChunkTable, ref: u32, tier: u32, n: i32, ways: i32): i32 {
  let at = n;
  while (at > 0 && before(t, ref, tier, unchecked(keptRef[at - 1]), unchecked(keptTier[at - 1]))) at--;
  if (at >= ways) return n;
  for (let i = n < ways ? n : ways - 1; i > at; i--) {
    keptRef[i] = keptRef[i - 1];
    keptTier[i] = keptTier[i - 1];
  }
  keptRef[at] = ref;
  keptTier[at] = tier;
  return n < ways ? n + 1 : n;
}

/** Sets the row's slot bits: every slot of record r whose best copy is on `tier`. */
function writeSlots(
  t: ChunkTable,
  r: usize,
  tier: u32,
  words: usize,
  slotWords: i32,
  spec: usize,
  specCount: i32,
): void {
  const hash = t.hashAt(r);
  const limit = (<u32>slotWords) << 6;
  const h = t.holders(r);
  const n = t.holderCount(r);
  for (let i: u32 = 0; i < n; i++) {
    const slot = <u32>(load<u64>(h + ((<usize>i) << 3)) & 0xffff);
    if (slot < limit && bestTier(t, r, slot, hash, spec, specCount) === tier) setBit(words, slot);
  }
  if (tier !== 0) return;
  for (let i = 0; i < specCount; i++) {
    const at = spec + ((<usize>i) << 4);
    const slot = load<u32>(at, 8);
    if (load<u64>(at) === hash && slot < limit) setBit(words, slot);
  }
}

function setBit(words: usize, slot: u32): void {
  const at = words + ((<usize>(slot >> 6)) << 3);
  store<u64>(at, load<u64>(at) | ((<u64>1) << (slot & 63)));
}

/**
 * Writes bucket `bucket`'s image to `out` (replacing its contents); returns its length, or -1
 * when `ways` or `slotWords` is out of range. `spec` holds the bucket's speculative routes.
 */
export function encodeBucketImage(
  t: ChunkTable,
  bucket: u32,
  ways: i32,
  slotWords: i32,
  spec: usize,
  specCount: i32,
  out: ByteBuf,
): i32 {
  if (ways < 1 || ways > MAX_WAYS || slotWords < 1 || slotWords > 255 || specCount < 0) return -1;
  let n = 0;
  let ref = t.firstIn(bucket);
  while (ref !== 0) {
    // Once `ways` rows are kept, a chunk whose best conceivable row (tier 0) does not sort before
    // the last kept one cannot enter: skip reading its holders. At hundreds of ranks a bucket
    // holds hundreds of chunks for 8 rows, and this is most of them.
    if (n === ways && !before(t, ref, 0, unchecked(keptRef[n - 1]), unchecked(keptTier[n - 1]))) {
      ref = t.nextIn(ref);
      continue;
    }
    const tiers = rowTiers(t, t.rec(ref), spec, specCount);
    for (let tier: u32 = 0; tier < TIERS; tier++)
      if ((tiers & (1 << tier)) !== 0) n = keep(t, ref, tier, n, ways);
    ref = t.nextIn(ref);
  }
  const rowBytes = 16 + (slotWords << 3);
  const len = HEADER_BYTES + n * rowBytes;
  out.len = 0;
  out.reserve(len);
  const o = out.ptr;
  memory.fill(o, 0, <usize>len);
  store<u8>(o, <u8>n);
  store<u8>(o, <u8>slotWords, 1);
  for (let i = 0; i < n; i++) {
    const r = t.rec(unchecked(keptRef[i]));
    const tier = unchecked(keptTier[i]);
    const row = o + <usize>(HEADER_BYTES + i * rowBytes);
    store<u64>(row, t.hashAt(r));
    store<u32>(row, t.depthAt(r), 8);
    store<u8>(row, <u8>tier, 12);
    writeSlots(t, r, tier, row + 16, slotWords, spec, specCount);
  }
  out.len = len;
  return len;
}

/**
 * After encodeBucketImage of bucket b with `ways` for publication: records its kept rows as the
 * table's gate for b (ChunkTable.setGate), so changes the publication cannot show leave b clean.
 * `n` is the image's row count.
 */
export function gateKept(t: ChunkTable, b: u32, ways: i32, n: i32): void {
  if (n === 0) {
    t.setGate(b, ways, 0, 0, 0, 0, 0);
    return;
  }
  const last = t.rec(unchecked(keptRef[n - 1]));
  const kept = t.setGate(
    b,
    ways,
    n,
    t.depthAt(last),
    unchecked(keptTier[n - 1]),
    t.stampAt(last),
    t.hashAt(last),
  );
  for (let i = 0; i < n; i++) store<u64>(kept + ((<usize>i) << 3), t.hashAt(t.rec(unchecked(keptRef[i]))));
}
