// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// Encodes a prefix-index bucket's shared-data image (docs/wire-format.md §4.4) straight from the
// chunk table, for the control plane's publication. It writes the same bytes as the reference
// encoder (control-plane/src/index/bucket-image.ts encodeBucket; a property test holds them
// equal) without building a JavaScript object per chunk: publication used to spend 0.47 µs per
// chunk entry of every dirty bucket there (docs/scaling.md), most of the control plane's CPU at a
// few dozen ranks.
//
// Rows: a (chunk, tier) group — the slots whose best copy of the chunk is on that tier (a
// speculative route counts as a GPU copy) — is written as one 16-byte row per 32-slot segment it
// has a slot in. Most chunks are held by one slot, so a row costs 16 bytes whatever the fleet's
// size (a bitmap row cost 16 + slots/8: 116 bytes at 800 slots), and `ways` counts rows. The
// groups are kept in order: the shallowest first, then the better tier, then the most recently
// stored, then the smaller hash, a group's segments in ascending order — a total order over rows,
// of which the image holds the first `ways` (the reference's sort-and-slice). A full bucket that
// keeps its newest rows (ChunkTable.newestFirst) orders by the most recently stored first, then
// the shallowest, the better tier, the smaller hash.
import { ByteBuf } from "./byte-buf";
import { ChunkTable, GATE_KEY_BYTES } from "./chunk-table";
import { put } from "./put";

const TIERS: u32 = 3;
const HEADER_BYTES: i32 = 4;
export const ROW_BYTES: i32 = 16;
/** Rows an image may hold (`count` is a u16; this bounds the encoder's scratch). */
export const MAX_ROWS: i32 = 4096;
/** Slots per row: a row's slot bits are one u32. */
const SEGMENT_SLOTS: u32 = 32;
/** The segment index is a u8: slots 0..8191. */
const MAX_SEGMENTS: u32 = 256;

// The kept groups, in keep order, and how many rows each takes.
/** The encoded bucket's chunks (ChunkTable.bucketRefs). */
const bucketChunks = new ByteBuf(256);
const keptRef = new StaticArray<u32>(MAX_ROWS + 1);
const keptTier = new StaticArray<u32>(MAX_ROWS + 1);
const keptRows = new StaticArray<i32>(MAX_ROWS + 1);
// One group's slot bits per segment, and the segments it touched.
const segBits = new StaticArray<u32>(<i32>MAX_SEGMENTS);
const segList = new StaticArray<u32>(<i32>MAX_SEGMENTS);
let segCount: i32 = 0;
/** The rows the last encode could keep (its bucket's ChunkTable.rowLimit), for gateKept. */
let keptLimit: i32 = 0;

/** The order of the bucket being encoded: newest first (ChunkTable.newestFirst) or shallowest. */
let newestOrder = false;

/**
 * Is group (depth da, tier ta, stamp sa, hash ha) kept before group b, in the shallowest-first
 * order or (newest) the most-recently-stored-first one? Both end on the hash: a total order.
 */
export function keyBefore(
  newest: bool,
  da: u32,
  ta: u32,
  sa: f64,
  ha: u64,
  db: u32,
  tb: u32,
  sb: f64,
  hb: u64,
): bool {
  if (newest) {
    if (sa !== sb) return sa > sb;
    if (da !== db) return da < db;
    if (ta !== tb) return ta < tb;
    return ha < hb;
  }
  if (da !== db) return da < db;
  if (ta !== tb) return ta < tb;
  if (sa !== sb) return sa > sb;
  return ha < hb;
}

/** Is row (a, ta) kept before row (b, tb)? */
function before(t: ChunkTable, a: u32, ta: u32, b: u32, tb: u32): bool {
  const ra = t.rec(a);
  const rb = t.rec(b);
  return keyBefore(
    newestOrder,
    t.depthAt(ra),
    ta,
    t.stampAt(ra),
    t.hashAt(ra),
    t.depthAt(rb),
    tb,
    t.stampAt(rb),
    t.hashAt(rb),
  );
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
  return bits;
}

// Stored unchecked (put): encode's `limit` keeps slot below MAX_SEGMENTS × SEGMENT_SLOTS, so s and
// segCount stay below MAX_SEGMENTS.
function addSlot(slot: u32): void {
  const s = slot / SEGMENT_SLOTS;
  const bits = unchecked(segBits[s]);
  if (bits === 0) {
    put(segList, segCount, s);
    segCount++;
  }
  put(segBits, s, bits | ((<u32>1) << (slot % SEGMENT_SLOTS)));
}

/**
 * Collects group (r, tier) into the segment scratch — every slot below `limit` whose best copy of
 * record r's chunk is on `tier` (and, on tier 0, its speculative routes) — and returns how many
 * segments it touched, in ascending order in segList.
 */
function collect(t: ChunkTable, r: usize, tier: u32, limit: u32, spec: usize, specCount: i32): i32 {
  for (let i = 0; i < segCount; i++) put<u32>(segBits, unchecked(segList[i]), 0);
  segCount = 0;
  const hash = t.hashAt(r);
  const h = t.holders(r);
  const n = t.holderCount(r);
  for (let i: u32 = 0; i < n; i++) {
    const slot = <u32>(load<u64>(h + ((<usize>i) << 3)) & 0xffff);
    if (slot < limit && bestTier(t, r, slot, hash, spec, specCount) === tier) addSlot(slot);
  }
  if (tier === 0) {
    for (let i = 0; i < specCount; i++) {
      const at = spec + ((<usize>i) << 4);
      const slot = load<u32>(at, 8);
      if (load<u64>(at) === hash && slot < limit) addSlot(slot);
    }
  }
  // Few segments per group (one for a chunk on one slot): insertion sort.
  for (let i = 1; i < segCount; i++) {
    const v = unchecked(segList[i]);
    let j = i;
    while (j > 0 && unchecked(segList[j - 1]) > v) {
      put(segList, j, unchecked(segList[j - 1]));
      j--;
    }
    put(segList, j, v);
  }
  return segCount;
}

/** Writes the row of the collected group's k-th segment (segList order) at `row`. */
function writeRow(row: usize, hash: u64, depth: u16, tier: u32, k: i32): void {
  const s = unchecked(segList[k]);
  store<u64>(row, hash);
  store<u16>(row, depth, 8);
  store<u8>(row, <u8>tier, 10);
  store<u8>(row, <u8>s, 11);
  store<u32>(row, unchecked(segBits[s]), 12);
}

/**
 * Inserts group (ref, tier) of `rows` rows among the `n` kept ones in keep order, then lets go of
 * the groups at the tail that lie wholly past the first `ways` rows; returns the new group count.
 * `total` (kept rows, the last group's possibly beyond `ways`) is in keptTotal.
 */
let keptTotal: i32 = 0;
function keep(t: ChunkTable, ref: u32, tier: u32, rows: i32, n: i32, ways: i32): i32 {
  // n ≤ ways ≤ MAX_ROWS (encode checks ways; the loop below trims groups past them), and the
  // arrays hold MAX_ROWS + 1: stored unchecked (put).
  let at = n;
  while (at > 0 && before(t, ref, tier, unchecked(keptRef[at - 1]), unchecked(keptTier[at - 1]))) at--;
  if (at === n && keptTotal >= ways) return n;
  for (let i = n; i > at; i--) {
    put(keptRef, i, unchecked(keptRef[i - 1]));
    put(keptTier, i, unchecked(keptTier[i - 1]));
    put(keptRows, i, unchecked(keptRows[i - 1]));
  }
  put(keptRef, at, ref);
  put(keptTier, at, tier);
  put(keptRows, at, rows);
  keptTotal += rows;
  n++;
  while (n > 1 && keptTotal - unchecked(keptRows[n - 1]) >= ways) {
    n--;
    keptTotal -= unchecked(keptRows[n]);
  }
  return n;
}

/**
 * Writes bucket `bucket`'s image to `out` (replacing its contents); returns its length, or -1
 * when `ways` or `slotWords` is out of range. `spec` holds the bucket's speculative routes;
 * slots at or above `slotWords` × 64 (or 8192) are not written.
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
  if (ways < 1 || ways > MAX_ROWS || slotWords < 1 || slotWords > 1024 || specCount < 0) return -1;
  const limit = min((<u32>slotWords) << 6, MAX_SEGMENTS * SEGMENT_SLOTS);
  // A bucket in full mode shows fewer rows (ChunkTable.setRowLimits).
  ways = t.rowLimit(bucket, ways);
  newestOrder = t.newestFirst(bucket);
  keptLimit = ways;
  let n = 0;
  keptTotal = 0;
  // The keep order is total (keyBefore ends on the hash), so the order the chunks come in does not matter.
  const chunks = t.bucketRefs(bucket, bucketChunks);
  for (let i = 0; i < chunks; i++) {
    const ref = load<u32>(bucketChunks.ptr + ((<usize>i) << 2));
    // Once `ways` rows are kept, a chunk whose best conceivable group (tier 0) does not sort
    // before the last kept one cannot enter: skip reading its holders. At hundreds of ranks a
    // bucket holds hundreds of chunks for its rows, and this is most of them.
    if (keptTotal >= ways && !before(t, ref, 0, unchecked(keptRef[n - 1]), unchecked(keptTier[n - 1])))
      continue;
    const r = t.rec(ref);
    const tiers = rowTiers(t, r, spec, specCount);
    for (let tier: u32 = 0; tier < TIERS; tier++) {
      if ((tiers & (1 << tier)) === 0) continue;
      const rows = collect(t, r, tier, limit, spec, specCount);
      if (rows > 0) n = keep(t, ref, tier, rows, n, ways);
    }
  }
  const count = keptTotal < ways ? keptTotal : ways;
  const len = HEADER_BYTES + count * ROW_BYTES;
  out.len = 0;
  out.reserve(len);
  const o = out.ptr;
  // Byte 1 (the bitmap width of the earlier format) is 0: a reader of that format finds no rows.
  store<u32>(o, (<u32>count) << 16);
  let row = o + <usize>HEADER_BYTES;
  let written = 0;
  for (let i = 0; i < n && written < count; i++) {
    const r = t.rec(unchecked(keptRef[i]));
    const tier = unchecked(keptTier[i]);
    const hash = t.hashAt(r);
    const depth = <u16>t.depthAt(r);
    const segs = collect(t, r, tier, limit, spec, specCount);
    for (let k = 0; k < segs && written < count; k++) {
      writeRow(row, hash, depth, tier, k);
      row += <usize>ROW_BYTES;
      written++;
    }
  }
  out.len = len;
  return len;
}

/**
 * After encodeBucketImage of bucket b with `ways` for publication: records its kept rows as the
 * table's gate for b (ChunkTable.setGate), so changes the publication cannot show leave b clean.
 * Reads the encoder's kept groups, so it must follow that encode.
 */
export function gateKept(t: ChunkTable, b: u32, ways: i32): void {
  // Fewer rows than the encode could keep: the bucket has room, every change can show.
  if (keptTotal < keptLimit) {
    t.setGate(b, ways, 0, 0, 0, 0, 0);
    return;
  }
  let n = 0;
  let rows = 0;
  while (rows < keptLimit) rows += unchecked(keptRows[n++]);
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
  const entry = <usize>t.gateEntry;
  let shown = 0;
  for (let i = 0; i < n; i++) {
    const r = t.rec(unchecked(keptRef[i]));
    const e = kept + <usize>i * entry;
    store<u64>(e, t.hashAt(r));
    if (entry !== <usize>GATE_KEY_BYTES) continue;
    // The group's key and the rows it shows (the last one's may be cut at the limit).
    const rows = min(unchecked(keptRows[i]), keptLimit - shown);
    shown += rows;
    writeGateKey(e, t.stampAt(r), t.depthAt(r), unchecked(keptTier[i]), rows);
  }
}

/** Writes a gate entry's key (after its hash): stamp f64, depth u32, rows shown u16, tier u8. */
export function writeGateKey(e: usize, stamp: f64, depth: u32, tier: u32, rows: i32): void {
  store<f64>(e, stamp, 8);
  store<u32>(e, depth, 16);
  store<u16>(e, <u16>rows, 20);
  store<u8>(e, <u8>tier, 22);
}

/**
 * Appends to `out` the rows the chunk `hash`, record `ref` (0: absent), has in an image with room
 * for every row (no speculative route in its bucket): its groups in tier order, each group's
 * segments ascending — the rows encodeBucketImage writes for it. Returns how many (0: absent, or
 * held by no slot).
 */
export function appendChunkRows(t: ChunkTable, ref: u32, hash: u64, slotWords: i32, out: ByteBuf): i32 {
  if (ref === 0) return 0;
  const r = t.rec(ref);
  const limit = min((<u32>slotWords) << 6, MAX_SEGMENTS * SEGMENT_SLOTS);
  const tiers = rowTiers(t, r, 0, 0);
  const depth = <u16>t.depthAt(r);
  let rows = 0;
  for (let tier: u32 = 0; tier < TIERS; tier++) {
    if ((tiers & (1 << tier)) === 0) continue;
    const segs = collect(t, r, tier, limit, 0, 0);
    out.reserve(segs * ROW_BYTES);
    let row = out.ptr + <usize>out.len;
    for (let k = 0; k < segs; k++) {
      writeRow(row, hash, depth, tier, k);
      row += <usize>ROW_BYTES;
    }
    out.len += segs * ROW_BYTES;
    rows += segs;
  }
  return rows;
}
