// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// u64 key → record ref (1-based index into a RecordSlab of fixed-size records that hold their own
// key, record-slab.ts), for the chunk table (chunk-table.ts). Open addressing over u32 slots: the ref in the low 28
// bits, the member's distance from its home slot in the high 4 (15: 15 or more), 0 for an empty
// slot. A probe reads a record's key only when the member's home is the key's (from the
// distance), so a key the map lacks — every new chunk — costs one cache miss (its slot) and
// seldom a record, and the map holds 4 bytes a slot instead of 12 (issue 31: the chunk map was a
// large part of applying a batch). A deletion places the members after the hole by their
// distances too, without reading their records (it read one per member while the 4 bits were a
// fingerprint of the key: a cache miss each, at every chunk a removal drops).
//
// Slots are ordered by bucket: a key's home is its bucket (its low `bucketBits` bits, as the
// chunk table buckets it) followed by its high bits, so a bucket's keys sit in one run of slots
// (bucketFirst), and the map is also the buckets' lists — the chunk records need no links, and
// dropping a chunk touches no other record (docs/scaling.md "Buckets in the chunk map's order").
// Keys must be well mixed in the bits used: chunk hashes are XXH64 outputs.
//
// The slab's segment table moves when it grows, so every call takes its current address. Growth is the caller's:
// it knows which records are live, and re-inserting them in slab order reads keys sequentially
// (rehashing in slot order would read one random record per key). Linear probing, backward-shift
// deletion (no tombstones, so a long churn of inserts and removals never degrades probes).
//
// Refs must stay below 2^28: a slab of 2^28 records is larger than a 32-bit memory can hold.
import { RecordSlab } from "./record-slab";

const MIN_CAP: u32 = 16;
const REF_MASK: u32 = 0x0fffffff;
const DIST_SHIFT: u32 = 28;
/** The distance kept in a slot saturates here: the home of such a member is read from its key. */
const FAR: u32 = 15;

@unmanaged
export class U64Map {
  vals: usize = 0;
  cap: u32 = 0;
  mask: u32 = 0;
  /** log2(cap): a home is the top capBits of a key's position. */
  capBits: u32 = 0;
  size: u32 = 0;

  /** Records are `stride` bytes with their u64 key at `keyOffset`; keys fall in 2^bucketBits buckets (≤ 2^28). */
  constructor(
    public stride: usize,
    public keyOffset: usize,
    public bucketBits: u32,
  ) {
    this.alloc(MIN_CAP);
  }

  private alloc(cap: u32): void {
    this.vals = heap.alloc((<usize>cap) << 2);
    memory.fill(this.vals, 0, (<usize>cap) << 2);
    this.cap = cap;
    this.mask = cap - 1;
    this.capBits = <u32>ctz(cap);
  }

  /**
   * Where the key sorts among 2^32 positions: its bucket (low bucketBits bits) on top, then its
   * high bits.
   */
  @inline private position(key: u64): u32 {
    const bucket = <u64>(<u32>key & (((<u32>1) << this.bucketBits) - 1));
    return <u32>(((bucket << 32) | (key >> 32)) >> this.bucketBits);
  }

  @inline private home(key: u64): u32 {
    return this.position(key) >> (32 - this.capBits);
  }

  /**
   * The slots bucket `b`'s keys start in: [first, first + span) holds every home of the bucket
   * (span 1 when buckets share a slot), and a key placed away from its home lies in the run of
   * full slots that continues it. So a scan from `first` that goes on past the span until an
   * empty slot meets every key of the bucket (and some of its neighbours': check each key's bucket).
   */
  @inline bucketFirst(b: u32): u32 {
    const top = <u32>(((<u64>b) << 32) >> this.bucketBits);
    return top >> (32 - this.capBits);
  }

  @inline bucketSpan(): u32 {
    return this.capBits > this.bucketBits ? (<u32>1) << (this.capBits - this.bucketBits) : 1;
  }

  @inline private keyOf(segments: usize, ref: u32): u64 {
    return load<u64>(RecordSlab.at(segments, this.stride, ref) + this.keyOffset);
  }

  /** Loads key's home slot and returns it, to be thrown away (BlockMap.touch: overlapping misses). */
  @inline touch(key: u64): u32 {
    return load<u32>(this.vals + ((<usize>this.home(key)) << 2));
  }

  /** A slot's value for `ref` placed `dist` slots past its home. */
  @inline private static slotValue(ref: u32, dist: u32): u32 {
    return ref | ((dist < FAR ? dist : FAR) << DIST_SHIFT);
  }

  /** The home of the member v at slot i: from its distance, or from its key when that is FAR. */
  @inline private homeAt(i: u32, v: u32, segments: usize): u32 {
    const d = v >>> DIST_SHIFT;
    return d < FAR ? (i - d) & this.mask : this.home(this.keyOf(segments, v & REF_MASK));
  }

  /** The slot holding key, or the empty slot where it would go (refAt tells which). */
  slotOf(key: u64, segments: usize): u32 {
    const h = this.home(key);
    let i = h;
    let dist: u32 = 0;
    while (true) {
      const v = load<u32>(this.vals + ((<usize>i) << 2));
      if (v === 0) return i;
      // Only a member at the distance this key would have can be this key.
      if (v >>> DIST_SHIFT === (dist < FAR ? dist : FAR) && this.keyOf(segments, v & REF_MASK) === key)
        return i;
      i = (i + 1) & this.mask;
      dist++;
    }
  }

  /** Slot i's ref (0: empty), for slotOf's answer and for iteration over 0 ≤ i < cap. */
  @inline refAt(i: u32): u32 {
    return load<u32>(this.vals + ((<usize>i) << 2)) & REF_MASK;
  }

  /** The ref of key, or 0. */
  get(key: u64, segments: usize): u32 {
    return this.refAt(this.slotOf(key, segments));
  }

  /** Whether one more key needs a larger table first (growth at 70 % load keeps probes short). */
  @inline full(): bool {
    return (this.size + 1) * 10 > this.cap * 7;
  }

  /** Puts `ref` for `key` in the empty slot slotOf found (no growth: check full() before slotOf). */
  fill(slot: u32, key: u64, ref: u32): void {
    store<u32>(this.vals + ((<usize>slot) << 2), U64Map.slotValue(ref, (slot - this.home(key)) & this.mask));
    this.size++;
  }

  /** Inserts a key known to be absent, without reading any record (rebuilding after reset). */
  insertNew(key: u64, ref: u32): void {
    const h = this.home(key);
    let i = h;
    while (load<u32>(this.vals + ((<usize>i) << 2)) !== 0) i = (i + 1) & this.mask;
    store<u32>(this.vals + ((<usize>i) << 2), U64Map.slotValue(ref, (i - h) & this.mask));
    this.size++;
  }

  /** Empties the map at `cap` slots (a power of two): the caller re-inserts its live records. */
  reset(cap: u32): void {
    heap.free(this.vals);
    this.alloc(cap < MIN_CAP ? MIN_CAP : cap);
    this.size = 0;
  }

  /**
   * Empties slot i, which holds a key (slotOf found it, the map unchanged since): the caller has
   * just looked the key up, so it is not probed for again. The records of the members after it
   * must still hold their keys (read only for a member FAR from its home).
   */
  deleteAt(i: u32, segments: usize): void {
    const mask = this.mask;
    // Backward shift: pull later members of the run into the hole when their home allows it.
    let hole = i;
    let j = (i + 1) & mask;
    while (true) {
      const v = load<u32>(this.vals + ((<usize>j) << 2));
      if (v === 0) break;
      const h = this.homeAt(j, v, segments);
      // The member may move to the hole unless its home lies cyclically in (hole, j].
      if (((j - h) & mask) >= ((j - hole) & mask)) {
        store<u32>(this.vals + ((<usize>hole) << 2), U64Map.slotValue(v & REF_MASK, (hole - h) & mask));
        hole = j;
      }
      j = (j + 1) & mask;
    }
    store<u32>(this.vals + ((<usize>hole) << 2), 0);
    this.size--;
  }

  /** Gives back the map's memory, itself included. */
  dispose(): void {
    heap.free(this.vals);
    heap.free(changetype<usize>(this));
  }

  /** Bytes held. */
  get bytes(): usize {
    return (<usize>this.cap) << 2;
  }
}
