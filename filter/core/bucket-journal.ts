// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// What the control plane has published of the prefix-index buckets, kept in linear memory: each
// bucket's image as gateways hold it, the version it got, and a journal of the patches that
// led there (docs/wire-format.md §5.1). The sync log serves buckets from here.
//
// Why in the core: publication ran ~20 µs of JavaScript per dirty bucket (a Uint8Array per image
// and patch, a log object per key and per patch, and the garbage they made) for ~2 µs of encoding
// (docs/scaling.md). Here a publish interval is one call whatever the number of dirty buckets,
// and nothing per bucket is allocated.
//
// The journal is a ring of patch records. Each record names the previous record of its bucket,
// so serving a gateway at version V walks a bucket's chain back to V and joins the patches newer
// than V. A chain starts where the bucket went out whole (`chainFrom`); a record the ring has
// overwritten since ends it. A gateway the chain does not reach back to, or whose joined patch
// would not be smaller than the image, gets the image: only bytes are at stake, never
// correctness, so the ring's size is a trade of memory for sync volume.
import {
  appendChunkRows,
  encodeBucketImage,
  gateKept,
  keyBefore,
  MAX_ROWS,
  ROW_BYTES,
  writeGateKey,
} from "./bucket-encode";
import { BUCKET_KEY_MAX, writeBucketKey } from "./bucket-key";
import { appendDrop, appendPut, applyBucketPatch, diffBucket, findRow, PATCH_HEADER } from "./bucket-patch";
import { ByteBuf } from "./byte-buf";
import { ChunkTable, GATE_KEY_BYTES } from "./chunk-table";
import { put } from "./put";
import { PATCH_BIT } from "./sync-page";

const IMAGE_HEADER: i32 = 4;
// Record: previous record of the bucket (logical position + 1; 0 none) u64, version f64,
// op bytes u32, op count u32, then the ops (a patch without its header), padded to 8 bytes.
const REC_PREV = 0;
const REC_VERSION = 8;
const REC_LEN = 16;
const REC_OPS = 20;
const REC_HEADER: u64 = 24;
/** A joined patch gathers at most this many records; a bucket changed more often goes whole. */
const MAX_JOIN: i32 = 256;
const MAX_OPS: u32 = 0xffff;

/** Distinct chunks one bucket's patch by changes may name; a bucket changed more goes whole. */
const MAX_CHANGED: i32 = 256;

const freshBuf = new ByteBuf(256);
const chunkRows = new ByteBuf(256);
const changedHashes = new StaticArray<u64>(MAX_CHANGED);
/** freshGroups' changed chunks' records (0: gone), beside changedHashes. */
const changedRefs = new StaticArray<u32>(MAX_CHANGED);
const patchBuf = new ByteBuf(256);
const patchedBuf = new ByteBuf(256);
const joinAt = new StaticArray<u64>(MAX_JOIN);

/** Appends bucket b's shared-data key as a sync entry's key: u16 length, then the bytes. */
function appendBucketKey(out: ByteBuf, b: u32): void {
  out.reserve(2 + BUCKET_KEY_MAX);
  const o = out.ptr + <usize>out.len;
  const len = writeBucketKey(o + 2, b);
  store<u16>(o, <u16>len);
  out.len += 2 + len;
}

/** publishFront: its case does not apply, so publishKept merges. */
const NOT_FRONT: i32 = -2;

/** Changed chunks' row groups publishKept places at most; more go whole. */
const MAX_FRESH: i32 = 1024;
// publishKept's changed chunks' groups (rows at fFirst in chunkRows) and their keys, in key order.
const fStamp = new StaticArray<f64>(MAX_FRESH);
const fDepth = new StaticArray<u32>(MAX_FRESH);
const fTier = new StaticArray<u32>(MAX_FRESH);
const fHash = new StaticArray<u64>(MAX_FRESH);
const fFirst = new StaticArray<i32>(MAX_FRESH);
const fRows = new StaticArray<i32>(MAX_FRESH);
const fOrder = new StaticArray<i32>(MAX_FRESH);
// The groups the new image shows, in keep order: from the gate (index ≥ 0) or fresh (−1 − index),
// and the rows each shows; then the new gate's entries, written before they replace the old.
const shownSrc = new StaticArray<i32>(MAX_ROWS + 1);
const shownTake = new StaticArray<i32>(MAX_ROWS + 1);
const newGate = new ByteBuf(1024);

function gateStamp(e: usize): f64 {
  return load<f64>(e, 8);
}
function gateDepth(e: usize): u32 {
  return load<u32>(e, 16);
}
function gateRows(e: usize): i32 {
  return <i32>load<u16>(e, 20);
}
function gateTier(e: usize): u32 {
  return <u32>load<u8>(e, 22);
}

/** Is fresh group i before fresh group j in the newest-first order? */
function freshBefore(i: i32, j: i32): bool {
  return keyBefore(
    true,
    unchecked(fDepth[i]),
    unchecked(fTier[i]),
    unchecked(fStamp[i]),
    unchecked(fHash[i]),
    unchecked(fDepth[j]),
    unchecked(fTier[j]),
    unchecked(fStamp[j]),
    unchecked(fHash[j]),
  );
}

/** Is gate entry e before fresh group j? */
function gateBefore(e: usize, j: i32): bool {
  return keyBefore(
    true,
    gateDepth(e),
    gateTier(e),
    gateStamp(e),
    load<u64>(e),
    unchecked(fDepth[j]),
    unchecked(fTier[j]),
    unchecked(fStamp[j]),
    unchecked(fHash[j]),
  );
}

/** Is `h` among the first `n` changed hashes? */
function isChanged(h: u64, n: i32): bool {
  for (let k = 0; k < n; k++) if (unchecked(changedHashes[k]) === h) return true;
  return false;
}

/** How many rows of chunk h's group on key's tier have a lower segment than key's, among n at held. */
function segmentRank(held: usize, n: i32, h: u64, key: u16): i32 {
  let rank = 0;
  for (let i = 0; i < n; i++) {
    const row = held + <usize>(IMAGE_HEADER + i * ROW_BYTES);
    const k = load<u16>(row, 10);
    if (load<u64>(row) === h && (k & 0xff) === (key & 0xff) && k >> 8 < key >> 8) rank++;
  }
  return rank;
}

/** Index of the row with (tier, segment) `key` among `m` rows at p (no header), or -1. */
function rowWith(p: usize, m: i32, key: u16): i32 {
  for (let j = 0; j < m; j++) if (load<u16>(p + <usize>(j * ROW_BYTES), 10) === key) return j;
  return -1;
}

@unmanaged
export class BucketJournal {
  /** Bytes a bucket's image can take: 4 + ways rows of ROW_BYTES. */
  stride: i32;
  images: usize;
  /** Per bucket: the image's length (i32), -1 before its first publication. */
  lens: usize;
  /** Per bucket: the version of its image (f64). */
  versions: usize;
  /** Per bucket: the version of the image its first journaled patch applies to (f64). */
  chainFrom: usize;
  /** Per bucket: logical position + 1 of its newest record in the ring (u64; 0 none). */
  last: usize;
  ring: usize;
  /** Logical end of everything written to the ring (positions only grow; physical = pos % cap). */
  head: u64 = 0;
  /** Buckets whose image the last publishDirty changed, in version order (u32 each). */
  changed: ByteBuf = new ByteBuf(1024);
  /** The last serve's joined patch. */
  served: ByteBuf = new ByteBuf(1024);
  /** The last writeEntries' sync-page entries, and whether one of them is a patch. */
  page: ByteBuf = new ByteBuf(1024);
  pagePatched: bool = false;

  constructor(
    public buckets: u32,
    public ways: i32,
    public slotWords: i32,
    public cap: u64,
    /** Rows a bucket in full mode shows (ChunkTable.setRowLimits). */
    public fullRows: i32,
    /** A bucket in full mode keeps its newest rows, not its shallowest (ChunkTable.setRowLimits). */
    public fullNewest: bool = false,
  ) {
    this.stride = IMAGE_HEADER + ways * ROW_BYTES;
    const n = <usize>buckets;
    this.images = heap.alloc(n * <usize>this.stride);
    this.lens = heap.alloc(n << 2);
    memory.fill(this.lens, 0xff, n << 2);
    this.versions = heap.alloc(n << 3);
    memory.fill(this.versions, 0, n << 3);
    this.chainFrom = heap.alloc(n << 3);
    memory.fill(this.chainFrom, 0, n << 3);
    this.last = heap.alloc(n << 3);
    memory.fill(this.last, 0, n << 3);
    this.ring = heap.alloc(<usize>cap);
  }

  dispose(): void {
    heap.free(this.images);
    heap.free(this.lens);
    heap.free(this.versions);
    heap.free(this.chainFrom);
    heap.free(this.last);
    heap.free(this.ring);
    heap.free(this.changed.ptr);
    heap.free(changetype<usize>(this.changed));
    heap.free(this.served.ptr);
    heap.free(changetype<usize>(this.served));
    heap.free(this.page.ptr);
    heap.free(changetype<usize>(this.page));
    heap.free(changetype<usize>(this));
  }

  /** Is chunk h's group on `tier` among the gate's groups from..groups − 1 (entries at gk)? Inlined: it runs per image row. */
  @inline private static inGroups(gk: usize, from: i32, groups: i32, h: u64, tier: u32): bool {
    for (let g = from; g < groups; g++) {
      const e = gk + <usize>g * <usize>GATE_KEY_BYTES;
      if (load<u64>(e) === h && gateTier(e) === tier) return true;
    }
    return false;
  }

  @inline image(b: u32): usize {
    return this.images + <usize>b * <usize>this.stride;
  }

  @inline imageLen(b: u32): i32 {
    return load<i32>(this.lens + ((<usize>b) << 2));
  }

  @inline version(b: u32): f64 {
    return load<f64>(this.versions + ((<usize>b) << 3));
  }

  /**
   * Publishes the buckets `dirty` lists (n × u32) from table `t`: encodes each, and where its
   * rows changed, patches the held image (journaling the patch) or replaces it, giving it the
   * next version from `firstVersion` on. `spec` holds speculative routes in the order of the
   * dirty list, {hash u64, slot u32, bucket u32} each. Returns how many changed (listed in
   * `changed`), or -1 for a geometry the image cannot state.
   */
  publishDirty(t: ChunkTable, dirty: usize, n: i32, spec: usize, specCount: i32, firstVersion: f64): i32 {
    this.changed.len = 0;
    t.setRowLimits(this.ways, this.fullRows, this.fullNewest);
    let version = firstVersion;
    let s = 0;
    for (let i = 0; i < n; i++) {
      const b = load<u32>(dirty + ((<usize>i) << 2));
      // This bucket's speculative routes are the run of entries naming it at the cursor.
      const from = s;
      while (s < specCount && load<u32>(spec + ((<usize>s) << 4), 12) === b) s++;
      const r = this.publishOne(t, b, spec + ((<usize>from) << 4), s - from, version);
      if (r < 0) return -1;
      if (r === 0) continue;
      this.changed.appendI32(<i32>b);
      version += 1;
    }
    t.clearChanges();
    return this.changed.len >> 2;
  }

  /** 1 when bucket b's image changed (and took `version`), 0 when its rows are as held, -1 on error. */
  publishOne(t: ChunkTable, b: u32, spec: usize, specCount: i32, version: f64): i32 {
    if (specCount === 0 && this.imageLen(b) >= 0 && !t.needsFull(b) && t.changeHead(b) !== 0) {
      const r = this.publishChanges(t, b, version);
      if (r >= 0) {
        t.published(b);
        return r;
      }
    }
    t.published(b);
    const freshLen = encodeBucketImage(t, b, this.ways, this.slotWords, spec, specCount, freshBuf);
    if (freshLen < 0) return -1;
    gateKept(t, b, this.ways);
    const held = this.image(b);
    const heldLen = this.imageLen(b);
    if (heldLen >= 0) {
      const patchLen = diffBucket(held, heldLen, freshBuf.ptr, freshLen, patchBuf);
      if (patchLen === 0) return 0;
      if (patchLen > 0 && patchLen < freshLen) {
        const n = applyBucketPatch(held, heldLen, patchBuf.ptr, patchLen, patchedBuf);
        if (n >= 0 && n <= this.stride) {
          memory.copy(held, patchedBuf.ptr, <usize>n);
          store<i32>(this.lens + ((<usize>b) << 2), n);
          this.journal(b, patchBuf.ptr, patchLen, version);
          store<f64>(this.versions + ((<usize>b) << 3), version);
          return 1;
        }
      }
    }
    // Whole: nothing held yet, or a patch no smaller than the image. The chain starts again here.
    memory.copy(held, freshBuf.ptr, <usize>freshLen);
    store<i32>(this.lens + ((<usize>b) << 2), freshLen);
    store<f64>(this.versions + ((<usize>b) << 3), version);
    store<f64>(this.chainFrom + ((<usize>b) << 3), version);
    store<u64>(this.last + ((<usize>b) << 3), 0);
    return 1;
  }

  /**
   * Publishes bucket b from its logged changes alone (ChunkTable.touched): its held image had
   * room for every row of the bucket's chunks, so the rows the keep rule keeps are all of them,
   * and only the changed chunks' rows can differ. The patch is made against the held image chunk
   * by chunk — drops of rows a chunk no longer has, puts of rows that are new or changed — at a
   * cost in the changes and the image's rows, where a whole encode walks every chunk the bucket
   * indexes. 1 when the image changed, 0 when not; -1 when the bucket must be encoded whole (it
   * would fill up, so the keep rule and the gate must decide; or too much changed).
   */
  publishChanges(t: ChunkTable, b: u32, version: f64): i32 {
    if (!t.hasRoom(b)) return t.patchesKept(b) ? this.publishKept(t, b, version) : -1;
    const held = this.image(b);
    const n = <i32>load<u16>(held, 2);
    const patch = patchBuf;
    patch.len = 0;
    patch.reserve(PATCH_HEADER);
    patch.len = PATCH_HEADER;
    let ops = 0;
    let rows = n;
    let distinct = 0;
    for (let c = t.changeHead(b); c !== 0; c = t.changeNext(c)) {
      const h = t.changeHash(c);
      let seen = false;
      for (let i = 0; i < distinct; i++) if (unchecked(changedHashes[i]) === h) seen = true;
      if (seen) continue;
      if (distinct === MAX_CHANGED) return -1; // and so put stays in bounds
      put(changedHashes, distinct, h);
      distinct++;
      chunkRows.len = 0;
      const m = appendChunkRows(t, t.changeRecord(c, h), h, this.slotWords, chunkRows);
      const fresh = chunkRows.ptr;
      for (let i = 0; i < n; i++) {
        const row = held + <usize>(IMAGE_HEADER + i * ROW_BYTES);
        if (load<u64>(row) !== h) continue;
        const key = load<u16>(row, 10);
        if (rowWith(fresh, m, key) >= 0) continue;
        appendDrop(patch, h, key);
        ops++;
        rows--;
      }
      for (let j = 0; j < m; j++) {
        const row = fresh + <usize>(j * ROW_BYTES);
        const i = findRow(held, n, h, load<u16>(row, 10));
        if (
          i >= 0 &&
          memory.compare(row, held + <usize>(IMAGE_HEADER + i * ROW_BYTES), <usize>ROW_BYTES) === 0
        )
          continue;
        appendPut(patch, row);
        ops++;
        if (i < 0) rows++;
      }
    }
    if (ops === 0) return 0;
    if (rows >= t.rowLimit(b, this.ways) || <u32>ops > MAX_OPS) return -1;
    return this.commitPatch(b, ops, version);
  }

  /**
   * Applies the `ops` ops in patchBuf to bucket b's held image, gives it `version` and journals
   * the patch; 1, or -1 when it does not apply (the caller encodes the bucket whole).
   */
  private commitPatch(b: u32, ops: i32, version: f64): i32 {
    const patch = patchBuf;
    const held = this.image(b);
    store<u16>(patch.ptr, 0);
    store<u16>(patch.ptr, <u16>ops, 2);
    const len = applyBucketPatch(held, this.imageLen(b), patch.ptr, patch.len, patchedBuf);
    if (len < 0 || len > this.stride) return -1;
    memory.copy(held, patchedBuf.ptr, <usize>len);
    store<i32>(this.lens + ((<usize>b) << 2), len);
    store<f64>(this.versions + ((<usize>b) << 3), version);
    if (patch.len < len) this.journal(b, patch.ptr, patch.len, version);
    else {
      // No smaller than the image: gateways behind this version get the image.
      store<f64>(this.chainFrom + ((<usize>b) << 3), version);
      store<u64>(this.last + ((<usize>b) << 3), 0);
    }
    return 1;
  }

  /**
   * Publishes full bucket b, which keeps its newest rows (ChunkTable.patchesKept), from its logged
   * changes and its gate, which lists the groups it shows in keep order with their keys: a chunk
   * not shown whose change was not logged sorts after the last shown group, so merging the gate's
   * groups of unchanged chunks with the changed chunks' groups now, up to `limit` rows, gives the
   * bucket's first `limit` rows — as long as the last of them does not sort after the last shown
   * before. The patch drops and puts what differs, at a cost in the image's rows and the changes,
   * where a whole encode walks every chunk the bucket indexes (hundreds at hundreds of ranks),
   * and the gate is rewritten from the merge. 1 when the image changed, 0 when not; -1 when the
   * bucket must be encoded whole (shown chunks lost rows that others must replace, or too much
   * changed).
   */
  publishKept(t: ChunkTable, b: u32, version: f64): i32 {
    const held = this.image(b);
    const n = <i32>load<u16>(held, 2);
    const limit = t.rowLimit(b, this.ways);
    if (n !== limit) return -1;
    const distinct = this.freshGroups(t, b);
    if (distinct < 0) return -1;
    {
      const r = this.publishFront(t, b, held, n, limit, distinct, version);
      if (r !== NOT_FRONT) return r;
    }
    const fresh = this.freshCount;
    // Merge the gate's groups (in keep order, changed chunks' left out) with the fresh ones.
    const gk = t.gateKept(b);
    const groups = <i32>t.keptGroups(b);
    const entry = <usize>GATE_KEY_BYTES;
    let gi = 0;
    let fi = 0;
    let shown = 0;
    let acc = 0;
    let lastGate = -1;
    while (acc < limit) {
      while (gi < groups && isChanged(load<u64>(gk + <usize>gi * entry), distinct)) gi++;
      let src: i32 = 0;
      let rows: i32 = 0;
      if (gi < groups && (fi === fresh || gateBefore(gk + <usize>gi * entry, unchecked(fOrder[fi])))) {
        src = gi;
        rows = gateRows(gk + <usize>gi * entry);
        lastGate = gi;
        gi++;
      } else if (fi < fresh) {
        const f = unchecked(fOrder[fi]);
        src = -1 - f;
        rows = unchecked(fRows[f]);
        fi++;
      } else break;
      const take = rows < limit - acc ? rows : limit - acc;
      // Each group takes at least one row, so shown < limit ≤ MAX_ROWS.
      put(shownSrc, shown, src);
      put(shownTake, shown, take);
      shown++;
      acc += take;
    }
    // Fewer rows than shown: chunks not shown would take the freed places; the encode finds them.
    if (acc < limit) return -1;
    // The new last group may not sort after the last shown before (the gate's key as it was then).
    const lastSrc = unchecked(shownSrc[shown - 1]);
    let lDepth: u32, lTier: u32, lStamp: f64, lHash: u64;
    if (lastSrc >= 0) {
      const e = gk + <usize>lastSrc * entry;
      lDepth = gateDepth(e);
      lTier = gateTier(e);
      lStamp = gateStamp(e);
      lHash = load<u64>(e);
    } else {
      const f = -1 - lastSrc;
      lDepth = unchecked(fDepth[f]);
      lTier = unchecked(fTier[f]);
      lStamp = unchecked(fStamp[f]);
      lHash = unchecked(fHash[f]);
    }
    if (
      keyBefore(
        true,
        t.gateDepth(b),
        t.gateTier(b),
        t.gateStamp(b),
        t.gateHash(b),
        lDepth,
        lTier,
        lStamp,
        lHash,
      )
    )
      return -1;
    const ops = this.keptPatch(held, n, gk, groups, distinct, shown, lastGate);
    this.writeGate(t, b, gk, shown, lDepth, lTier, lStamp, lHash);
    if (ops === 0) return 0;
    if (<u32>ops > MAX_OPS) return -1;
    return this.commitPatch(b, ops, version);
  }

  /**
   * publishKept's case at hundreds of ranks (nearly every publication there, docs/scaling.md):
   * changed chunks not shown before, whose groups all sort before the gate's first — chunks
   * stored after every shown row. The merge then puts their groups in front and takes as many
   * rows off the gate's end. This gives the merge's patch and gate without merging: one pass
   * over the gate's hashes (the chunks are not among them, the groups hold the image's rows) and
   * one over the image's (the drops), no call per group or row, and the gate shifted in place
   * instead of written twice. The result publishKept returns, or NOT_FRONT when the case does not
   * apply.
   */
  private publishFront(
    t: ChunkTable,
    b: u32,
    held: usize,
    n: i32,
    limit: i32,
    distinct: i32,
    version: f64,
  ): i32 {
    const fresh = this.freshCount;
    const gk = t.gateKept(b);
    const groups = <i32>t.keptGroups(b);
    if (fresh === 0 || groups === 0 || gateBefore(gk, unchecked(fOrder[fresh - 1]))) return NOT_FRONT;
    let rows = 0;
    for (let f = 0; f < fresh; f++) rows += unchecked(fRows[f]);
    if (rows >= limit) return NOT_FRONT;
    const entry = <usize>GATE_KEY_BYTES;
    let sum = 0;
    for (let g = 0; g < groups; g++) {
      const e = gk + <usize>g * entry;
      const h = load<u64>(e);
      for (let k = 0; k < distinct; k++) if (unchecked(changedHashes[k]) === h) return NOT_FRONT;
      sum += gateRows(e);
    }
    if (sum !== limit) return NOT_FRONT;
    // Off the end: the groups after lastGate whole, and `cut` rows of lastGate (its highest segments).
    let lastGate = groups - 1;
    let cut = rows;
    for (;;) {
      const r = gateRows(gk + <usize>lastGate * entry);
      if (cut < r) break;
      cut -= r;
      lastGate--;
    }
    const le = gk + <usize>lastGate * entry;
    const lHash = load<u64>(le);
    const lTier = gateTier(le);
    const lDepth = gateDepth(le);
    const lStamp = gateStamp(le);
    const keep = gateRows(le) - cut;
    const patch = patchBuf;
    patch.len = 0;
    patch.reserve(PATCH_HEADER);
    patch.len = PATCH_HEADER;
    let ops = 0;
    // Drops in the image's order, then puts in keep order: keptPatch's ops.
    for (let i = 0; i < n; i++) {
      const row = held + <usize>(IMAGE_HEADER + i * ROW_BYTES);
      const rh = load<u64>(row);
      const key = load<u16>(row, 10);
      const tier = <u32>(key & 0xff);
      const drop =
        cut > 0 && rh === lHash && tier === lTier
          ? segmentRank(held, n, rh, key) >= keep
          : BucketJournal.inGroups(gk, lastGate + 1, groups, rh, tier);
      if (drop) {
        appendDrop(patch, rh, key);
        ops++;
      }
    }
    for (let k = 0; k < fresh; k++) {
      const f = unchecked(fOrder[k]);
      const first = unchecked(fFirst[f]);
      for (let j = 0; j < unchecked(fRows[f]); j++) {
        appendPut(patch, chunkRows.ptr + <usize>((first + j) * ROW_BYTES));
        ops++;
      }
    }
    // The gate: the new groups, then the kept ones moved up (lastGate cut to `keep` rows).
    memory.copy(gk + <usize>fresh * entry, gk, <usize>(lastGate + 1) * entry);
    if (cut > 0) store<u16>(gk + <usize>(fresh + lastGate) * entry, <u16>keep, 20);
    for (let k = 0; k < fresh; k++) {
      const f = unchecked(fOrder[k]);
      const e = gk + <usize>k * entry;
      store<u64>(e, unchecked(fHash[f]));
      writeGateKey(e, unchecked(fStamp[f]), unchecked(fDepth[f]), unchecked(fTier[f]), unchecked(fRows[f]));
    }
    // The new last group is a gate group, so it does not sort after the last shown before.
    t.setGate(b, this.ways, fresh + lastGate + 1, lDepth, lTier, lStamp, lHash);
    if (<u32>ops > MAX_OPS) return -1;
    return this.commitPatch(b, ops, version);
  }

  /** Fresh groups freshGroups found. */
  private freshCount: i32 = 0;

  /**
   * The changed chunks of bucket b (into changedHashes; returns how many, -1 when too many) and
   * their row groups now (rows appended to chunkRows, keys in fStamp…, in key order in fOrder).
   */
  private freshGroups(t: ChunkTable, b: u32): i32 {
    let distinct = 0;
    for (let c = t.changeHead(b); c !== 0; c = t.changeNext(c)) {
      const h = t.changeHash(c);
      if (isChanged(h, distinct)) continue;
      if (distinct === MAX_CHANGED) return -1; // and so put stays in bounds
      put(changedRefs, distinct, t.changeRecord(c, h));
      put(changedHashes, distinct, h);
      distinct++;
    }
    chunkRows.len = 0;
    let f = 0;
    for (let k = 0; k < distinct; k++) {
      const h = unchecked(changedHashes[k]);
      const ref = unchecked(changedRefs[k]);
      if (ref === 0) continue;
      const r = t.rec(ref);
      const start = chunkRows.len / ROW_BYTES;
      const m = appendChunkRows(t, ref, h, this.slotWords, chunkRows);
      // appendChunkRows writes a chunk's groups in tier order, each one's segments ascending.
      for (let j = 0; j < m; j++) {
        const tier = <u32>load<u8>(chunkRows.ptr + <usize>((start + j) * ROW_BYTES), 10);
        if (j > 0 && tier === unchecked(fTier[f - 1])) {
          put(fRows, f - 1, unchecked(fRows[f - 1]) + 1);
          continue;
        }
        if (f === MAX_FRESH) return -1; // and so put stays in bounds (fOrder's j ≤ i < f, too)
        put(fStamp, f, t.stampAt(r));
        put(fDepth, f, t.depthAt(r));
        put(fTier, f, tier);
        put(fHash, f, h);
        put(fFirst, f, start + j);
        put(fRows, f, 1);
        f++;
      }
    }
    for (let i = 0; i < f; i++) {
      let j = i;
      while (j > 0 && freshBefore(i, unchecked(fOrder[j - 1]))) {
        put(fOrder, j, unchecked(fOrder[j - 1]));
        j--;
      }
      put(fOrder, j, i);
    }
    this.freshCount = f;
    return distinct;
  }

  /**
   * Writes to patchBuf the ops that turn the held image (n rows) into the merge's `shown` groups:
   * drops of the rows of gate groups past the last one shown (`lastGate`) or cut shorter, and of
   * changed chunks' rows no longer shown; puts of shown fresh rows that are new or differ.
   * Returns the op count.
   */
  private keptPatch(
    held: usize,
    n: i32,
    gk: usize,
    groups: i32,
    distinct: i32,
    shown: i32,
    lastGate: i32,
  ): i32 {
    const patch = patchBuf;
    patch.len = 0;
    patch.reserve(PATCH_HEADER);
    patch.len = PATCH_HEADER;
    const entry = <usize>GATE_KEY_BYTES;
    let ops = 0;
    // The last gate group shown may show fewer rows than before: its highest segments go.
    let cutHash: u64 = 0;
    let cutTier: u32 = 0;
    let cutKeep = -1;
    for (let k = shown - 1; k >= 0; k--) {
      if (unchecked(shownSrc[k]) !== lastGate) continue;
      const e = gk + <usize>lastGate * entry;
      if (unchecked(shownTake[k]) < gateRows(e)) {
        cutHash = load<u64>(e);
        cutTier = gateTier(e);
        cutKeep = unchecked(shownTake[k]);
      }
      break;
    }
    for (let i = 0; i < n; i++) {
      const row = held + <usize>(IMAGE_HEADER + i * ROW_BYTES);
      const h = load<u64>(row);
      const key = load<u16>(row, 10);
      let drop = false;
      if (isChanged(h, distinct)) drop = !this.freshShown(h, key, shown);
      else if (cutKeep >= 0 && h === cutHash && <u32>(key & 0xff) === cutTier)
        drop = segmentRank(held, n, h, key) >= cutKeep;
      else drop = BucketJournal.inGroups(gk, lastGate + 1, groups, h, <u32>(key & 0xff));
      if (drop) {
        appendDrop(patch, h, key);
        ops++;
      }
    }
    for (let k = 0; k < shown; k++) {
      const src = unchecked(shownSrc[k]);
      if (src >= 0) continue;
      const f = -1 - src;
      const take = unchecked(shownTake[k]);
      for (let j = 0; j < take; j++) {
        const row = chunkRows.ptr + <usize>((unchecked(fFirst[f]) + j) * ROW_BYTES);
        const i = findRow(held, n, load<u64>(row), load<u16>(row, 10));
        if (
          i >= 0 &&
          memory.compare(row, held + <usize>(IMAGE_HEADER + i * ROW_BYTES), <usize>ROW_BYTES) === 0
        )
          continue;
        appendPut(patch, row);
        ops++;
      }
    }
    return ops;
  }

  /** Is the row (h, key) among the shown rows of the merge's fresh groups? */
  private freshShown(h: u64, key: u16, shown: i32): bool {
    for (let k = 0; k < shown; k++) {
      const src = unchecked(shownSrc[k]);
      if (src >= 0 || unchecked(fHash[-1 - src]) !== h) continue;
      const f = -1 - src;
      for (let j = 0; j < unchecked(shownTake[k]); j++)
        if (load<u16>(chunkRows.ptr + <usize>((unchecked(fFirst[f]) + j) * ROW_BYTES), 10) === key)
          return true;
    }
    return false;
  }

  /** Rewrites bucket b's gate from the merge's shown groups and the new last group's key. */
  private writeGate(
    t: ChunkTable,
    b: u32,
    gk: usize,
    shown: i32,
    lDepth: u32,
    lTier: u32,
    lStamp: f64,
    lHash: u64,
  ): void {
    const entry = GATE_KEY_BYTES;
    newGate.len = 0;
    newGate.reserve(shown * entry);
    for (let k = 0; k < shown; k++) {
      const src = unchecked(shownSrc[k]);
      const e = newGate.ptr + <usize>(k * entry);
      if (src >= 0) {
        memory.copy(e, gk + <usize>(src * entry), <usize>entry);
        store<u16>(e, <u16>unchecked(shownTake[k]), 20);
      } else {
        const f = -1 - src;
        store<u64>(e, unchecked(fHash[f]));
        writeGateKey(
          e,
          unchecked(fStamp[f]),
          unchecked(fDepth[f]),
          unchecked(fTier[f]),
          unchecked(shownTake[k]),
        );
      }
    }
    const kept = t.setGate(b, this.ways, shown, lDepth, lTier, lStamp, lHash);
    memory.copy(kept, newGate.ptr, <usize>(shown * entry));
  }

  /** Appends bucket b's patch (header included at `patch`) to the ring as its newest record. */
  journal(b: u32, patch: usize, patchLen: i32, version: f64): void {
    const opsLen = <u64>(patchLen - PATCH_HEADER);
    const size = (REC_HEADER + opsLen + 7) & ~(<u64>7);
    const lastAt = this.last + ((<usize>b) << 3);
    if (size > this.cap) {
      // Never journaled: gateways behind this version get the image.
      store<f64>(this.chainFrom + ((<usize>b) << 3), version);
      store<u64>(lastAt, 0);
      return;
    }
    // A record never wraps: skip to the ring's start when it would not fit before the end.
    const at = this.head % this.cap;
    if (at + size > this.cap) this.head += this.cap - at;
    const pos = this.head;
    const r = this.ring + <usize>(pos % this.cap);
    store<u64>(r + REC_PREV, load<u64>(lastAt));
    store<f64>(r + REC_VERSION, version);
    store<u32>(r + REC_LEN, <u32>opsLen);
    store<u32>(r + REC_OPS, <u32>load<u16>(patch, 2));
    memory.copy(r + <usize>REC_HEADER, patch + <usize>PATCH_HEADER, <usize>opsLen);
    this.head = pos + size;
    store<u64>(lastAt, pos + 1);
  }

  /** Is the record at logical position `pos` still intact (not overwritten by the ring)? */
  @inline intact(pos: u64): bool {
    return pos + this.cap >= this.head;
  }

  /**
   * The patch that takes a gateway holding bucket b as of version `since` to its image, joined
   * into `served`; returns its length, or -1 when the gateway must get the image (the chain does
   * not reach back to `since`, or the patch would not be smaller).
   */
  serve(b: u32, since: f64): i32 {
    const imageLen = this.imageLen(b);
    if (imageLen < 0) return -1;
    let pos = load<u64>(this.last + ((<usize>b) << 3));
    let n = 0;
    let bytes: u64 = PATCH_HEADER;
    let ops: u32 = 0;
    let reached = false;
    while (pos !== 0) {
      const p = pos - 1;
      if (!this.intact(p)) break;
      const r = this.ring + <usize>(p % this.cap);
      if (load<f64>(r + REC_VERSION) <= since) {
        reached = true;
        break;
      }
      if (n === MAX_JOIN) return -1; // and so put stays in bounds
      put(joinAt, n, p);
      n++;
      bytes += <u64>load<u32>(r + REC_LEN);
      ops += load<u32>(r + REC_OPS);
      if (bytes >= <u64>imageLen || ops > MAX_OPS) return -1;
      pos = load<u64>(r + REC_PREV);
    }
    if (!reached && !(pos === 0 && load<f64>(this.chainFrom + ((<usize>b) << 3)) <= since)) return -1;
    if (n === 0) return -1;
    const out = this.served;
    out.len = 0;
    out.reserve(<i32>bytes);
    store<u16>(out.ptr, 0);
    store<u16>(out.ptr, <u16>ops, 2);
    out.len = PATCH_HEADER;
    // Oldest first: ops apply in the order they were published.
    for (let i = n - 1; i >= 0; i--) {
      const r = this.ring + <usize>(unchecked(joinAt[i]) % this.cap);
      out.append(r + <usize>REC_HEADER, <i32>load<u32>(r + REC_LEN));
    }
    return out.len;
  }

  /**
   * Writes the sync-page entries (docs/wire-format.md §5: key as u16 length and bytes, value as
   * u32 length — PATCH_BIT set for a patch — and bytes) of the `n` buckets listed at `ids`
   * (u32 each) for a gateway that holds them as of version `since`: the patch from there when
   * `patches` and the journal has it (serve), else the image. Stops before the entry that takes
   * the bytes past `budget`, unless it is the page's first (`first`: a page always carries one).
   * Returns how many it wrote, into `page`. Why here: a poll at hundreds of ranks carries tens of
   * thousands of buckets, and writing each from JavaScript cost a key string, its encoding and
   * several calls into the core per entry (docs/scaling.md).
   */
  writeEntries(ids: usize, n: i32, since: f64, patches: bool, budget: i32, first: bool): i32 {
    const out = this.page;
    out.len = 0;
    this.pagePatched = false;
    for (let i = 0; i < n; i++) {
      const b = load<u32>(ids + ((<usize>i) << 2));
      const start = out.len;
      appendBucketKey(out, b);
      const patchLen = patches ? this.serve(b, since) : -1;
      if (patchLen >= 0) {
        out.appendI32(<i32>(<u32>patchLen | PATCH_BIT));
        out.append(this.served.ptr, patchLen);
      } else {
        const len = this.imageLen(b);
        const bytes = len < 0 ? 0 : len;
        out.appendI32(bytes);
        out.append(this.image(b), bytes);
      }
      if ((!first || i > 0) && out.len > budget) {
        out.len = start;
        return i;
      }
      if (patchLen >= 0) this.pagePatched = true;
    }
    return n;
  }
}
