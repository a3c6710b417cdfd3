// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// The control plane's fleet-wide chunk index (control-plane/src/index/chunk-index.ts is its
// JavaScript face): chunk hash → the (slot, tier) holders with how many stored blocks on each
// produced it, the chunk's depth and LRU stamp. Lives in linear memory as fixed 40-byte records
// in a slab of segments that never move (record-slab.ts), found through a U64Map of refs whose
// keys are the records' own hashes (u64-map.ts). The map keeps its slots in bucket order, so a
// dirty bucket's chunks are one run of slots (bucketRefs) and are encoded without scanning the
// index or linking the records; no per-chunk object
// and no BigInt key. Speculative routes stay in JavaScript (few, short-lived, keyed by gateway
// reports); a record only carries a flag that some exist, so it is not dropped under them.
import { ByteBuf } from "./byte-buf";
import { RecordSlab } from "./record-slab";
import { U64Map } from "./u64-map";

// Record layout (bytes).
const R_HASH = 0; // u64
const R_STAMP = 8; // f64 ms
const R_DEPTH = 16; // u32 (FLAG_FREE: the next free record's ref, 0 at the end)
const R_COUNT = 20; // u16 holders
const R_FLAGS = 22; // u16
// INLINE × u64 holders; once a chunk had more (FLAG_EXT), a heap array of them and its capacity
// in their place. Sharing the bytes keeps a record at 40 bytes instead of 48: at 800 ranks the
// table holds ~17.6 M records, nearly all with one holder (docs/scaling.md "Memory").
const R_INLINE = 24;
const R_EXT = 24; // u32 (FLAG_EXT)
const R_EXTCAP = 28; // u32 (FLAG_EXT)
const INLINE: u32 = 2;
export const RECORD_BYTES: u32 = 40;

const FLAG_SPECULATED: u16 = 1;
/** The record is on the free list (dropped): rehashing and dispose skip it. */
const FLAG_FREE: u16 = 2;
/** The holders are in a heap array (R_EXT), not inline. */
const FLAG_EXT: u16 = 4;

// Per-bucket gate (setGate): row groups kept u32 (GATE_OPEN: not gated; 0: room), the last kept row's depth u32,
// tier u32, reserved u32, stamp f64, hash u64, then `gateWays` × the kept groups in keep order:
// their chunk hash u64 — and where full buckets keep their newest rows (GATE_KEY_BYTES entries),
// the group's stamp f64, depth u32, tier u8, rows shown u8, so publication patches the kept rows
// from the gate alone (bucket-journal.ts publishKept).
const G_COUNT = 0;
const G_DEPTH = 4;
const G_TIER = 8;
const G_STAMP = 16;
const G_HASH = 24;
const G_KEPT = 32;
const GATE_OPEN: u32 = 0xffffffff;
/** Bytes of a kept group's gate entry: its hash; with its key and rows (keepNewest). */
const GATE_HASH_BYTES: i32 = 8;
export const GATE_KEY_BYTES: i32 = 24;

// The change log: per changed chunk of a bucket with room, {hash u64, previous entry of the same
// bucket (index + 1; 0 none) u32, the chunk's record ref u32}. Past MAX_CHANGES entries a change
// goes the full way. The ref spares publication a lookup of the hash (changeRecord): ~333,000
// changed chunks a second at 800 ranks, each a probe of a 128 MiB map.
const CHANGE_BYTES: i32 = 16;
/**
 * A chunk whose chain a store continues gets a new stamp only when its own is older than this
 * (refresh): a chain in steady use is walked once a second at most, and its stamps lag by at
 * most that, far inside the view's horizon (docs/scaling.md).
 */
const REFRESH_MS: f64 = 1000;
const MAX_CHANGES: i32 = 1 << 22;
/** writeBucket's refs. */
const scratchRefs = new ByteBuf(256);

/** A holder: slot (16 bits) | tier (8 bits) << 16 | count (32 bits) << 32. */
function holderKey(slot: u32, tier: u32): u64 {
  return <u64>(slot & 0xffff) | ((<u64>(tier & 0xff)) << 16);
}

/** The chunk count past which a bucket goes to full mode: `ways` and a band of ways / 4. */
function fullModeEntry(ways: i32): i32 {
  const band = ways >> 2;
  return ways + (band > 1 ? band : 1);
}

@unmanaged
export class ChunkTable {
  map: U64Map;
  slab: RecordSlab = new RecordSlab(RECORD_BYTES);
  /** Refs handed out so far (records 1..recTop: live, or on the free list). */
  recTop: u32 = 0;
  freeHead: u32 = 0;
  dirtyBits: usize;
  dirty: ByteBuf = new ByteBuf(256);
  mask: u32;
  /** Heap bytes of holder arrays beyond the inline two. */
  extBytes: usize = 0;
  /** Per-bucket gates (0 until the first setGate) and the row count they were made for. */
  gates: usize = 0;
  /**
   * Per bucket (f64 each): its gate's last kept stamp while the gate keeps a full bucket's newest
   * rows, else NaN — a copy of what touched asks the gate for on every chunk change, in 512 KiB
   * instead of a cold line of the gates' 96 MiB (setGate, touched).
   */
  keptStamps: usize;
  gateWays: i32 = 0;
  /** Bytes per kept group in a gate: GATE_HASH_BYTES, or GATE_KEY_BYTES while full buckets keep their newest. */
  gateEntry: i32 = GATE_HASH_BYTES;
  /**
   * The chunks changed since the last publication in buckets whose image had room (so the
   * publication can patch their rows alone instead of encoding the bucket: every chunk of the
   * bucket is in the image), as a log with a per-bucket list; `fullBits` marks the dirty buckets
   * that need a whole encode (no room, never published, or changed without a chunk named).
   */
  changes: ByteBuf = new ByteBuf(1024);
  changeHeads: usize;
  fullBits: usize;
  /** Chunks per bucket (u32 each): what decides a bucket's full mode. */
  counts: usize;
  /** Per bucket: in full mode (rowLimit), one bit each. */
  modeBits: usize;
  /** setRowLimits: the rows a bucket shows while its chunks fit (0: no modes), and when full. */
  modeWays: i32 = 0;
  fullRows: i32 = 0;
  /** setRowLimits: a bucket in full mode keeps its newest rows (true) or its shallowest. */
  keepNewest: bool = false;

  constructor(public buckets: u32) {
    this.mask = buckets - 1;
    this.map = new U64Map(RECORD_BYTES, R_HASH, <u32>ctz(buckets));
    const bits = (<usize>buckets + 7) >> 3;
    this.dirtyBits = heap.alloc(bits);
    memory.fill(this.dirtyBits, 0, bits);
    this.fullBits = heap.alloc(bits);
    memory.fill(this.fullBits, 0, bits);
    this.changeHeads = heap.alloc((<usize>buckets) << 2);
    memory.fill(this.changeHeads, 0, (<usize>buckets) << 2);
    this.counts = heap.alloc((<usize>buckets) << 2);
    memory.fill(this.counts, 0, (<usize>buckets) << 2);
    this.modeBits = heap.alloc(bits);
    memory.fill(this.modeBits, 0, bits);
    this.keptStamps = heap.alloc((<usize>buckets) << 3);
    this.clearKeptStamps();
  }

  private clearKeptStamps(): void {
    for (let i: u32 = 0; i < this.buckets; i++) store<f64>(this.keptStamps + ((<usize>i) << 3), NaN);
  }

  /** Gives back everything the table holds, itself included. */
  dispose(): void {
    for (let ref: u32 = 1; ref <= this.recTop; ref++) {
      const r = this.rec(ref);
      // Live records only: a dropped one (on the free list) already gave its holder array back.
      const flags = load<u16>(r + R_FLAGS);
      if ((flags & FLAG_EXT) !== 0 && (flags & FLAG_FREE) === 0) heap.free(<usize>load<u32>(r + R_EXT));
    }
    this.slab.dispose();
    heap.free(this.dirtyBits);
    heap.free(this.fullBits);
    heap.free(this.changeHeads);
    heap.free(this.counts);
    heap.free(this.modeBits);
    heap.free(this.changes.ptr);
    heap.free(changetype<usize>(this.changes));
    if (this.gates !== 0) heap.free(this.gates);
    heap.free(this.keptStamps);
    heap.free(this.dirty.ptr);
    heap.free(changetype<usize>(this.dirty));
    this.map.dispose();
    heap.free(changetype<usize>(this));
  }

  @inline rec(ref: u32): usize {
    return RecordSlab.at(this.slab.segments, RECORD_BYTES, ref);
  }

  @inline bucketOf(hash: u64): u32 {
    return <u32>hash & this.mask;
  }

  get size(): u32 {
    return this.map.size;
  }

  get bytes(): usize {
    return (
      this.map.bytes +
      this.slab.bytes +
      this.extBytes +
      ((<usize>this.buckets) << 4) +
      <usize>this.changes.cap
    );
  }

  /**
   * The rows publication may show per bucket: its first `ways` rows (the keep order's), and only
   * its first `fullRows` once it is full — past fullEntry() chunks, until it is down to fullExit().
   * `newest`: a full bucket keeps its most recently stored rows (newestFirst), full past `ways`
   * chunks; publication patches it from its gate, so it may show all `ways` rows. Otherwise it
   * keeps its shallowest, full past fullModeEntry(ways) chunks until it is down to `ways`: the band
   * of ways / 4 keeps full mode to fleets whose buckets are full on average (at 128 ranks, 43
   * chunks a bucket on average, the ~1 % of buckets over 60 lose only their deepest rows, where
   * showing them 8 rows lost 4–6 % of the view's requests), and fullRows is small because such a
   * bucket re-encodes whenever a change reaches its shown rows, about twice per shown row and
   * cache lifetime, walking every chunk it indexes (60 rows cost 7.5× what 8 did,
   * docs/scaling.md). A change of limits puts every bucket in the mode its count says.
   */
  setRowLimits(ways: i32, fullRows: i32, newest: bool = false): void {
    if (ways === this.modeWays && fullRows === this.fullRows && newest === this.keepNewest) return;
    const reorder = newest !== this.keepNewest;
    this.modeWays = ways;
    this.fullRows = fullRows;
    this.keepNewest = newest;
    for (let b: u32 = 0; b < this.buckets; b++) {
      const full = load<u32>(this.counts + ((<usize>b) << 2)) > <u32>this.fullEntry();
      if (full !== this.inFullMode(b)) {
        this.setMode(b, full);
        // Its rows change unless both modes show the same rows in the same order.
        if (fullRows < ways || newest || reorder) this.markDirty(b);
      } else if (full && reorder) this.markDirty(b);
    }
  }

  /**
   * Does bucket b keep its newest rows first (full mode with setRowLimits' `newest`)? Then the keep
   * order is the most recently stored first, then the shallowest, the better tier, the smaller
   * hash (bucket-encode.ts). Why: past ~150 full caches a bucket indexes more chunks than any
   * gateway budget shows, and its shallowest rows are mostly the first chunks of prompts nobody
   * asks for again (unique prompts), while the prefixes requests reuse were stored or extended
   * recently; keeping newest shows every bucket's last cache-lifetime share (docs/scaling.md).
   */
  @inline newestFirst(b: u32): bool {
    return this.keepNewest && this.modeWays !== 0 && this.inFullMode(b);
  }

  /**
   * Past how many chunks a bucket goes to full mode: fullModeEntry(ways) when full buckets keep
   * their shallowest; `ways` when they keep their newest, since a bucket with more chunks than
   * rows loses its deepest ones otherwise — the deep prefixes of long prompts (a 6k-token system
   * prompt is ~290 chunks deep), which is what newest keeps for them.
   */
  fullEntry(): i32 {
    return this.keepNewest ? this.modeWays : fullModeEntry(this.modeWays);
  }

  /** Back from full mode at this many chunks: `ways`, or ways − ways / 4 when full buckets keep their newest. */
  fullExit(): i32 {
    if (!this.keepNewest) return this.modeWays;
    const band = this.modeWays >> 2;
    return this.modeWays - (band > 1 ? band : 1);
  }

  /** The rows bucket b's image may hold: `ways`, or the full mode's row count. */
  rowLimit(b: u32, ways: i32): i32 {
    if (this.modeWays === 0 || !this.inFullMode(b)) return ways;
    return this.fullRows < ways ? this.fullRows : ways;
  }

  @inline private inFullMode(b: u32): bool {
    return (load<u8>(this.modeBits + (<usize>b >> 3)) & ((<u8>1) << (<u8>(b & 7)))) !== 0;
  }

  private setMode(b: u32, full: bool): void {
    const at = this.modeBits + (<usize>b >> 3);
    const bit = (<u8>1) << (<u8>(b & 7));
    store<u8>(at, full ? load<u8>(at) | bit : load<u8>(at) & ~bit);
  }

  /** Counts a chunk into or out of bucket b, switching its mode (and dirtying it) at the edges. */
  private countIn(b: u32, delta: i32): void {
    const at = this.counts + ((<usize>b) << 2);
    const m = <i32>load<u32>(at) + delta;
    store<u32>(at, <u32>m);
    const ways = this.modeWays;
    if (ways === 0) return;
    if (
      delta > 0
        ? m === this.fullEntry() + 1 && !this.inFullMode(b)
        : m === this.fullExit() && this.inFullMode(b)
    ) {
      this.setMode(b, delta > 0);
      // The rows it may show changed (none when full mode shows as many in the same order).
      if (this.fullRows < ways || this.keepNewest) this.markDirty(b);
    }
  }

  /** Dirties the bucket for a whole encode at the next publication. */
  markDirty(bucket: u32): void {
    const at = this.fullBits + (<usize>bucket >> 3);
    store<u8>(at, load<u8>(at) | ((<u8>1) << (<u8>(bucket & 7))));
    this.markChanged(bucket);
  }

  /** Does the bucket's next publication need a whole encode (markDirty)? */
  @inline needsFull(bucket: u32): bool {
    return (load<u8>(this.fullBits + (<usize>bucket >> 3)) & ((<u8>1) << (<u8>(bucket & 7)))) !== 0;
  }

  /** The newest change logged for the bucket (index + 1; 0 none); older ones by changeNext. */
  @inline changeHead(bucket: u32): u32 {
    return load<u32>(this.changeHeads + ((<usize>bucket) << 2));
  }

  @inline changeHash(change: u32): u64 {
    return load<u64>(this.changes.ptr + <usize>(change - 1) * <usize>CHANGE_BYTES);
  }

  @inline changeNext(change: u32): u32 {
    return load<u32>(this.changes.ptr + <usize>(change - 1) * <usize>CHANGE_BYTES, 8);
  }

  /**
   * The record of a logged change's chunk (find's answer for its hash), or 0 when the chunk is
   * gone. The ref logged with the change holds the chunk unless it was dropped since — freed,
   * perhaps reused for another chunk — so it is taken only when the record there is live and
   * holds the hash; otherwise the chunk is looked up (it may be back, under another ref).
   */
  changeRecord(change: u32, hash: u64): u32 {
    const ref = load<u32>(this.changes.ptr + <usize>(change - 1) * <usize>CHANGE_BYTES, 12);
    const r = this.rec(ref);
    if ((load<u16>(r + R_FLAGS) & FLAG_FREE) === 0 && load<u64>(r + R_HASH) === hash) return ref;
    return this.find(hash);
  }

  /** The bucket was published: its changes and its whole-encode mark are spent. */
  published(bucket: u32): void {
    store<u32>(this.changeHeads + ((<usize>bucket) << 2), 0);
    const at = this.fullBits + (<usize>bucket >> 3);
    store<u8>(at, load<u8>(at) & ~((<u8>1) << (<u8>(bucket & 7))));
  }

  /** After a publication: forgets every logged change (of buckets published or not). */
  clearChanges(): void {
    const n = this.changes.len / CHANGE_BYTES;
    for (let i = 0; i < n; i++) {
      const b = this.bucketOf(load<u64>(this.changes.ptr + <usize>i * <usize>CHANGE_BYTES));
      // A bucket taken dirty but not published keeps its dirtiness only as a whole encode.
      if (this.changeHead(b) !== 0) {
        store<u32>(this.changeHeads + ((<usize>b) << 2), 0);
        const at = this.fullBits + (<usize>b >> 3);
        store<u8>(at, load<u8>(at) | ((<u8>1) << (<u8>(b & 7))));
      }
    }
    this.changes.len = 0;
  }

  /** Did bucket b's last publication leave room for more rows (gate recorded, 0 groups)? */
  @inline hasRoom(b: u32): bool {
    if (this.gates === 0) return false;
    return load<u32>(this.gate(b) + G_COUNT) === 0;
  }

  /** Bucket b's gate: its kept groups (0: room; GATE_OPEN: none yet), last kept key, kept hashes. */
  @inline private gate(b: u32): usize {
    return this.gates + <usize>b * <usize>(G_KEPT + this.gateWays * this.gateEntry);
  }

  /** Bucket b's kept groups' entries (GATE_KEY_BYTES each while full buckets keep their newest). */
  @inline gateKept(b: u32): usize {
    return this.gate(b) + G_KEPT;
  }

  /** Row groups bucket b's last publication kept while full (0: it had room or none is recorded). */
  keptGroups(b: u32): u32 {
    if (this.gates === 0) return 0;
    const n = load<u32>(this.gate(b) + G_COUNT);
    return n === GATE_OPEN ? 0 : n;
  }

  /** The last kept group's sort key, as setGate recorded it. */
  @inline gateDepth(b: u32): u32 {
    return load<u32>(this.gate(b) + G_DEPTH);
  }

  @inline gateTier(b: u32): u32 {
    return load<u32>(this.gate(b) + G_TIER);
  }

  @inline gateStamp(b: u32): f64 {
    return load<f64>(this.gate(b) + G_STAMP);
  }

  @inline gateHash(b: u32): u64 {
    return load<u64>(this.gate(b) + G_HASH);
  }

  /**
   * Is bucket b full, keeping its newest rows, with its kept rows recorded? Then a change that can
   * show is logged like one in a bucket with room, and publication patches the kept rows
   * (bucket-journal.ts publishKept) instead of encoding the bucket: with newest first every store
   * shows, and a whole encode walks every chunk of the bucket (docs/scaling.md item 2).
   */
  @inline patchesKept(b: u32): bool {
    return this.newestFirst(b) && this.keptGroups(b) !== 0;
  }

  private logChange(b: u32, hash: u64, ref: u32): void {
    const c = this.changes;
    c.reserve(CHANGE_BYTES);
    const o = c.ptr + <usize>c.len;
    store<u64>(o, hash);
    store<u32>(o, this.changeHead(b), 8);
    store<u32>(o, ref, 12);
    c.len += CHANGE_BYTES;
    store<u32>(this.changeHeads + ((<usize>b) << 2), <u32>(c.len / CHANGE_BYTES));
  }

  /** Adds the bucket to the dirty list (once). */
  private markChanged(bucket: u32): void {
    const at = this.dirtyBits + (<usize>bucket >> 3);
    const bit: u32 = 1 << (bucket & 7);
    const b = <u32>load<u8>(at);
    if ((b & bit) !== 0) return;
    store<u8>(at, <u8>(b | bit));
    this.dirty.appendI32(<i32>bucket);
  }

  /**
   * Records what bucket b's publication kept (bucket-encode.ts gateKept): `n` row groups filling
   * its `ways` rows (0: it had room), the last kept group's sort key, and the kept groups' chunks
   * written at the address returned. From then on a change
   * to one of the bucket's chunks dirties it only when the publication could show it (touched).
   * Why: at hundreds of ranks a bucket indexes hundreds of chunks and keeps 8 rows, so most KV
   * events change chunks no gateway sees, and re-encoding their bucket read every chunk of it
   * for nothing (docs/scaling.md).
   */
  setGate(b: u32, ways: i32, n: i32, depth: u32, tier: u32, stamp: f64, hash: u64): usize {
    const entry = this.keepNewest ? GATE_KEY_BYTES : GATE_HASH_BYTES;
    const stride = <usize>(G_KEPT + ways * entry);
    if (this.gates === 0 || this.gateWays !== ways || this.gateEntry !== entry) {
      if (this.gates !== 0) heap.free(this.gates);
      const bytes = <usize>this.buckets * stride;
      this.gates = heap.alloc(bytes);
      // Every bucket open until its first publication with this geometry.
      for (let i: u32 = 0; i < this.buckets; i++) store<u32>(this.gates + <usize>i * stride, GATE_OPEN);
      this.gateWays = ways;
      this.gateEntry = entry;
      this.clearKeptStamps();
    }
    const g = this.gates + <usize>b * stride;
    store<u32>(g + G_COUNT, <u32>n);
    store<u32>(g + G_DEPTH, depth);
    store<u32>(g + G_TIER, tier);
    store<f64>(g + G_STAMP, stamp);
    store<u64>(g + G_HASH, hash);
    store<f64>(this.keptStamps + ((<usize>b) << 3), n !== 0 && this.newestFirst(b) ? stamp : NaN);
    return g + G_KEPT;
  }

  /**
   * Can a change to record r's chunk alter what bucket b's last publication kept? Yes when the
   * bucket had room, when the chunk is kept, or when the chunk's best conceivable row (its depth
   * on tier 0 with its stamp) sorts before the last kept row. Otherwise the kept rows are the
   * same after the change (they are the first `ways` of a total order, and only this chunk's rows
   * moved, all still after them), so the publication would not change.
   */
  visible(b: u32, r: usize): bool {
    if (this.gates === 0) return true;
    const g = this.gate(b);
    const n = load<u32>(g + G_COUNT);
    // 0: the bucket had room for more rows, so any change can show.
    if (n === GATE_OPEN || n === 0) return true;
    const stamp = load<f64>(r + R_STAMP);
    const lastStamp = load<f64>(g + G_STAMP);
    // Newest first, a chunk stored after the last kept row sorts before it, kept or not: answered
    // without reading the kept hashes (up to `ways` × 16 bytes, cold: most stores land here).
    if (stamp > lastStamp && this.newestFirst(b)) return true;
    const hash = load<u64>(r + R_HASH);
    const entry = <usize>this.gateEntry;
    for (let i: u32 = 0; i < n; i++) if (load<u64>(g + G_KEPT + <usize>i * entry) === hash) return true;
    const depth = load<u32>(r + R_DEPTH);
    const lastDepth = load<u32>(g + G_DEPTH);
    // The gate was made in the bucket's current order: a change of mode re-encodes it whole.
    if (this.newestFirst(b)) {
      if (stamp !== lastStamp) return stamp > lastStamp;
      if (depth !== lastDepth) return depth < lastDepth;
    } else {
      if (depth !== lastDepth) return depth < lastDepth;
      if (load<u32>(g + G_TIER) !== 0) return true;
      if (stamp !== lastStamp) return stamp > lastStamp;
      return hash < load<u64>(g + G_HASH);
    }
    if (load<u32>(g + G_TIER) !== 0) return true;
    return hash < load<u64>(g + G_HASH);
  }

  /**
   * Marks r's bucket dirty if the change to r's chunk can show in its publication (visible): in a
   * bucket with room or one that patches its kept rows (patchesKept), as a change of this chunk's
   * rows alone, otherwise for a whole encode.
   */
  touched(ref: u32, r: usize): void {
    const hash = load<u64>(r + R_HASH);
    const b = this.bucketOf(hash);
    if (!this.needsFull(b) && this.changes.len < MAX_CHANGES * CHANGE_BYTES) {
      // A full bucket keeping its newest rows, its kept rows recorded: patchesKept, known from
      // keptStamps without reading the gate. Every kept chunk was stamped at or after the last
      // kept row, and a record's stamp never goes back (add), so a chunk stamped before it is not
      // kept and sorts after it, and one stamped after it sorts before: only a tie needs the
      // gate (visible). Most changes at hundreds of ranks are stores (now) or removals (the oldest).
      const last = load<f64>(this.keptStamps + ((<usize>b) << 3));
      // biome-ignore lint/suspicious/noGlobalIsNan: AssemblyScript's isNaN is the f64 builtin (no coercion).
      if (!isNaN(last) && this.newestFirst(b)) {
        const stamp = load<f64>(r + R_STAMP);
        if (stamp === last ? this.visible(b, r) : stamp > last) {
          this.logChange(b, hash, ref);
          this.markChanged(b);
        }
        return;
      }
      if (this.hasRoom(b)) {
        this.logChange(b, hash, ref);
        this.markChanged(b);
        return;
      }
      if (this.patchesKept(b)) {
        if (this.visible(b, r)) {
          this.logChange(b, hash, ref);
          this.markChanged(b);
        }
        return;
      }
    }
    if (this.visible(b, r)) this.markDirty(b);
  }

  /** Moves the dirty bucket list (in first-dirtied order, as u32s) to `out` and clears it. */
  takeDirty(out: ByteBuf): i32 {
    const n = this.dirty.len >> 2;
    out.len = 0;
    out.append(this.dirty.ptr, this.dirty.len);
    for (let i = 0; i < n; i++) {
      const b = load<u32>(this.dirty.ptr + ((<usize>i) << 2));
      store<u8>(this.dirtyBits + (<usize>b >> 3), 0);
    }
    this.dirty.len = 0;
    return n;
  }

  find(hash: u64): u32 {
    return this.map.get(hash, this.slab.segments);
  }

  /**
   * Loads what adding `hash` reads first (its map slot and its bucket's chunk count) and returns
   * it, to be thrown away: a caller about to add many chunks touches them all first, so their
   * cache misses overlap instead of coming one at a time.
   */
  touch(hash: u64): u32 {
    return this.map.touch(hash) ^ load<u32>(this.counts + ((<usize>this.bucketOf(hash)) << 2));
  }

  /** Doubles the map, re-inserting the live records in slab order (u64-map.ts: sequential reads). */
  private growMap(): void {
    const map = this.map;
    map.reset(map.cap << 1);
    for (let ref: u32 = 1; ref <= this.recTop; ref++) {
      const r = this.rec(ref);
      if ((load<u16>(r + R_FLAGS) & FLAG_FREE) === 0) map.insertNew(load<u64>(r + R_HASH), ref);
    }
  }

  /** The chunk's record, created (no holder, not dirty) when absent. */
  ensure(hash: u64, depth: u32, nowMs: f64): u32 {
    // One probe finds the chunk or the slot a new one goes in.
    if (this.map.full()) this.growMap();
    const slot = this.map.slotOf(hash, this.slab.segments);
    let ref = this.map.refAt(slot);
    if (ref !== 0) return ref;
    if (this.freeHead !== 0) {
      ref = this.freeHead;
      this.freeHead = load<u32>(this.rec(ref) + R_DEPTH);
    } else {
      this.slab.reserve(this.recTop + 1);
      ref = ++this.recTop;
    }
    const r = this.rec(ref);
    store<u64>(r + R_HASH, hash);
    store<f64>(r + R_STAMP, nowMs);
    store<u32>(r + R_DEPTH, depth);
    store<u16>(r + R_COUNT, 0);
    store<u16>(r + R_FLAGS, 0);
    this.map.fill(slot, hash, ref);
    this.countIn(this.bucketOf(hash), 1);
    return ref;
  }

  @inline hashAt(r: usize): u64 {
    return load<u64>(r + R_HASH);
  }

  @inline depthAt(r: usize): u32 {
    return load<u32>(r + R_DEPTH);
  }

  /** The chunk's LRU stamp (ms): when a slot last stored it. */
  @inline stampAt(r: usize): f64 {
    return load<f64>(r + R_STAMP);
  }

  /**
   * Writes the refs (u32) of bucket `bucket`'s chunks to out (replacing its contents), in the
   * map's slot order; returns how many. One pass over the bucket's run of slots (U64Map.bucketFirst),
   * reading each record there for its hash: the bucket's own, which the caller reads next, and
   * the few of a neighbouring bucket placed in the run.
   */
  bucketRefs(bucket: u32, out: ByteBuf): i32 {
    bucket &= this.mask;
    const map = this.map;
    const first = map.bucketFirst(bucket);
    const span = map.bucketSpan();
    out.len = 0;
    let n = 0;
    // At most every slot once: the map always has an empty slot (full() grows it at 70 %).
    for (let k: u32 = 0; k < map.cap; k++) {
      const ref = map.refAt((first + k) & map.mask);
      // An empty slot at the span's end or past it ends the run a key of the bucket could be in.
      if (ref === 0) {
        if (k + 1 >= span) break;
        continue;
      }
      if (this.bucketOf(load<u64>(this.rec(ref) + R_HASH)) !== bucket) continue;
      out.reserve((n + 1) << 2);
      store<u32>(out.ptr + ((<usize>n) << 2), ref);
      n++;
    }
    out.len = n << 2;
    return n;
  }

  @inline holders(r: usize): usize {
    return (load<u16>(r + R_FLAGS) & FLAG_EXT) !== 0 ? <usize>load<u32>(r + R_EXT) : r + R_INLINE;
  }

  @inline holderCount(r: usize): u32 {
    return load<u16>(r + R_COUNT);
  }

  /** Index of the (slot, tier) holder in r, or -1. */
  holderAt(r: usize, slot: u32, tier: u32): i32 {
    const key = holderKey(slot, tier);
    const h = this.holders(r);
    const n = this.holderCount(r);
    for (let i: u32 = 0; i < n; i++)
      if ((load<u64>(h + ((<usize>i) << 3)) & 0xffffffff) === key) return <i32>i;
    return -1;
  }

  add(hash: u64, depth: u32, slot: u32, tier: u32, nowMs: f64): void {
    const ref = this.ensure(hash, depth, nowMs);
    const r = this.rec(ref);
    const i = this.holderAt(r, slot, tier);
    if (i >= 0) {
      const at = this.holders(r) + ((<usize>i) << 3);
      store<u64>(at, load<u64>(at) + ((<u64>1) << 32));
    } else {
      const n = this.holderCount(r);
      let h = this.holders(r);
      const flags = load<u16>(r + R_FLAGS);
      const ext = (flags & FLAG_EXT) !== 0;
      const cap = ext ? load<u32>(r + R_EXTCAP) : INLINE;
      if (n === cap) {
        const newCap = cap << 1;
        const grown = heap.alloc((<usize>newCap) << 3);
        memory.copy(grown, h, (<usize>n) << 3);
        if (ext) heap.free(h);
        this.extBytes += ((<usize>newCap) << 3) - (ext ? (<usize>cap) << 3 : 0);
        // Over the inline holders, copied out above.
        store<u32>(r + R_EXT, <u32>grown);
        store<u32>(r + R_EXTCAP, newCap);
        store<u16>(r + R_FLAGS, flags | FLAG_EXT);
        h = grown;
      }
      store<u64>(h + ((<usize>n) << 3), holderKey(slot, tier) | ((<u64>1) << 32));
      store<u16>(r + R_COUNT, <u16>(n + 1));
    }
    // The last store: a store at an earlier time (the wall clock stepped back) leaves a later
    // stamp as it is, so a record's stamp never goes back (touched's reading of keptStamps
    // relies on it).
    if (nowMs > load<f64>(r + R_STAMP)) store<f64>(r + R_STAMP, nowMs);
    // A new holder changes the image; a repeat store only refreshes the LRU stamp, which
    // matters for eviction order, so it dirties the bucket too — when the publication can show it.
    this.touched(ref, r);
  }

  /**
   * A store continued the chain this chunk is on (block-table.ts refreshChain): its stamp becomes
   * `nowMs` unless it is within REFRESH_MS of it already. False when it was (or the chunk is not
   * indexed): the chain above it is as fresh, and the walk stops.
   */
  refresh(hash: u64, nowMs: f64): bool {
    const ref = this.map.get(hash, this.slab.segments);
    if (ref === 0) return false;
    const r = this.rec(ref);
    if (load<f64>(r + R_STAMP) >= nowMs - REFRESH_MS) return false;
    store<f64>(r + R_STAMP, nowMs);
    this.touched(ref, r);
    return true;
  }

  remove(hash: u64, slot: u32, tier: u32): void {
    const found = this.map.slotOf(hash, this.slab.segments);
    const ref = this.map.refAt(found);
    if (ref === 0) return;
    const r = this.rec(ref);
    const i = this.holderAt(r, slot, tier);
    if (i < 0) return;
    const h = this.holders(r);
    const at = h + ((<usize>i) << 3);
    const v = load<u64>(at);
    if (v >> 32 > 1) {
      store<u64>(at, v - ((<u64>1) << 32));
      return;
    }
    const n = this.holderCount(r) - 1;
    store<u64>(at, load<u64>(h + ((<usize>n) << 3)));
    store<u16>(r + R_COUNT, <u16>n);
    // Before the record may be dropped: the gate reads its depth, stamp and hash.
    this.touched(ref, r);
    // touched changes no slot of the map: `found` still holds the chunk.
    if (this.unused(r)) this.drop(ref, found);
  }

  @inline private unused(r: usize): bool {
    return this.holderCount(r) === 0 && (load<u16>(r + R_FLAGS) & FLAG_SPECULATED) === 0;
  }

  /** Drops the record when it has no holder and no speculative route. */
  dropIfEmpty(ref: u32): bool {
    const r = this.rec(ref);
    if (!this.unused(r)) return false;
    this.drop(ref, this.map.slotOf(load<u64>(r + R_HASH), this.slab.segments));
    return true;
  }

  /** Drops record `ref`, found at the map's slot `at`. */
  private drop(ref: u32, at: u32): void {
    const r = this.rec(ref);
    const hash = load<u64>(r + R_HASH);
    if ((load<u16>(r + R_FLAGS) & FLAG_EXT) !== 0) {
      heap.free(<usize>load<u32>(r + R_EXT));
      this.extBytes -= (<usize>load<u32>(r + R_EXTCAP)) << 3;
    }
    this.map.deleteAt(at, this.slab.segments);
    this.countIn(this.bucketOf(hash), -1);
    store<u16>(r + R_FLAGS, FLAG_FREE);
    store<u32>(r + R_DEPTH, this.freeHead);
    this.freeHead = ref;
  }

  setSpeculated(ref: u32, on: bool): void {
    const r = this.rec(ref);
    const f = load<u16>(r + R_FLAGS);
    store<u16>(r + R_FLAGS, on ? f | FLAG_SPECULATED : f & ~FLAG_SPECULATED);
  }

  /**
   * Appends record `ref` to out as: hash u64, stamp f64, depth u32, holder count u32, then the
   * holders (u64 each: slot | tier << 16 | count << 32).
   */
  write(ref: u32, out: ByteBuf): void {
    const r = this.rec(ref);
    const n = this.holderCount(r);
    out.reserve(24 + ((<i32>n) << 3));
    const o = out.ptr + <usize>out.len;
    store<u64>(o, load<u64>(r + R_HASH));
    store<f64>(o + 8, load<f64>(r + R_STAMP));
    store<u32>(o + 16, load<u32>(r + R_DEPTH));
    store<u32>(o + 20, n);
    memory.copy(o + 24, this.holders(r), (<usize>n) << 3);
    out.len += 24 + ((<i32>n) << 3);
  }

  /** Writes every record of a bucket to out (see write), in bucketRefs' order; returns how many. */
  writeBucket(bucket: u32, out: ByteBuf): i32 {
    const n = this.bucketRefs(bucket, scratchRefs);
    out.len = 0;
    for (let i = 0; i < n; i++) this.write(load<u32>(scratchRefs.ptr + ((<usize>i) << 2)), out);
    return n;
  }
}
