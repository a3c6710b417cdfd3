// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// Engine block hash → block record (block-table.ts): open addressing over u32 record pointers,
// the key read from the record (its u64 at KEY_OFFSET), like U64Map with a key offset. Records
// are 16-byte aligned (record-pool.ts carves them in 16-byte granules from heap blocks, or takes
// a heap block, which TLSF aligns so: AL_BITS), so each slot keeps in the pointer's low 4 bits
// the member's distance from its home slot (15: 15 or more). A probe reads a record's key only
// where a member shares the key's home, and a deletion places the members after the hole without
// reading their records (it read one each while the 4 bits were a fingerprint: a cache miss per
// member, at every block a removal drops). Without them every occupied slot a lookup passed cost
// a load from a record somewhere in the heap: the index's new blocks all miss the map, and at
// 50–70 % load a miss passes one to three occupied slots (issue 31: the block map was the largest
// cost of applying a batch).
//
// Linear probing, backward-shift deletion (no tombstones), growth at 70 % load, Fibonacci mixing
// (engine block hashes can be sequential).

const MIN_CAP: u32 = 16;
/** The record's key (block-table.ts B_HASH). */
const KEY_OFFSET: usize = 8;
/** The pointer's low bits, which hold the member's distance from its home; FAR: 15 or more. */
const DIST_MASK: u32 = 15;
const FAR: u32 = 15;
/** Records whose keys grow() loads together before inserting them (see there). */
const GROW_GROUP: u32 = 16;
/** grow()'s gathered records and their keys. */
const growRecs = heap.alloc(GROW_GROUP << 2);
const growKeys = heap.alloc(GROW_GROUP << 3);

@unmanaged
export class BlockMap {
  vals: usize = 0;
  cap: u32 = 0;
  mask: u32 = 0;
  size: u32 = 0;
  /** The empty slot where the last get() that found nothing stopped (insertMissed). */
  missAt: u32 = 0;
  /** The slot where the last get() that found its key found it (deleteAt). */
  hitAt: u32 = 0;

  constructor() {
    this.alloc(MIN_CAP);
  }

  private alloc(cap: u32): void {
    this.vals = heap.alloc((<usize>cap) << 2);
    memory.fill(this.vals, 0, (<usize>cap) << 2);
    this.cap = cap;
    this.mask = cap - 1;
  }

  /** The mixed key: its high 32 bits pick the home slot. */
  @inline private static mix(key: u64): u64 {
    return key * 0x9e3779b97f4a7c15;
  }

  /** A slot's value for record `rec` placed `dist` slots past its home. */
  @inline private static slotValue(rec: usize, dist: u32): u32 {
    return <u32>rec | (dist < FAR ? dist : FAR);
  }

  /** The home of the member v at slot i: from its distance, or from its key when that is FAR. */
  @inline private homeAt(i: u32, v: u32): u32 {
    const d = v & DIST_MASK;
    return d < FAR
      ? (i - d) & this.mask
      : this.home(BlockMap.mix(load<u64>(<usize>(v & ~DIST_MASK) + KEY_OFFSET)));
  }

  @inline private home(mixed: u64): u32 {
    return <u32>(mixed >> 32) & this.mask;
  }

  /**
   * Loads key's home slot and returns it, to be thrown away: a caller about to look up many keys
   * touches them all first, so their cache misses overlap instead of coming one at a time.
   */
  @inline touch(key: u64): u32 {
    return load<u32>(this.vals + ((<usize>this.home(BlockMap.mix(key))) << 2));
  }

  /** The record of key, or 0. */
  get(key: u64): usize {
    let i = this.home(BlockMap.mix(key));
    let dist: u32 = 0;
    while (true) {
      const v = load<u32>(this.vals + ((<usize>i) << 2));
      if (v === 0) {
        this.missAt = i;
        return 0;
      }
      // Only a member at the distance this key would have can be this key.
      if ((v & DIST_MASK) === (dist < FAR ? dist : FAR)) {
        const rec = <usize>(v & ~DIST_MASK);
        if (load<u64>(rec + KEY_OFFSET) === key) {
          this.hitAt = i;
          return rec;
        }
      }
      i = (i + 1) & this.mask;
      dist++;
    }
  }

  /** Would one more key take the map past its load limit (set and insertMissed grow it first)? */
  @inline full(): bool {
    return (this.size + 1) * 10 > this.cap * 7;
  }

  /** Inserts record `rec` (16-byte aligned, its key already written) or replaces the record of its key. */
  set(rec: usize): void {
    if (this.full()) this.grow();
    const key = load<u64>(rec + KEY_OFFSET);
    let i = this.home(BlockMap.mix(key));
    let dist: u32 = 0;
    while (true) {
      const at = this.vals + ((<usize>i) << 2);
      const v = load<u32>(at);
      const value = BlockMap.slotValue(rec, dist);
      if (v === 0) {
        store<u32>(at, value);
        this.size++;
        return;
      }
      if (
        (v & DIST_MASK) === (value & DIST_MASK) &&
        load<u64>(<usize>(v & ~DIST_MASK) + KEY_OFFSET) === key
      ) {
        store<u32>(at, value);
        return;
      }
      i = (i + 1) & this.mask;
      dist++;
    }
  }

  /**
   * Inserts record `rec` (16-byte aligned, its key written) whose key the last get() did not
   * find, the map unchanged since: into the slot that get() stopped at, without probing again —
   * unless the map must grow first.
   */
  @inline insertMissed(rec: usize): void {
    if (this.full()) {
      this.set(rec);
      return;
    }
    const home = this.home(BlockMap.mix(load<u64>(rec + KEY_OFFSET)));
    const at = this.missAt;
    store<u32>(this.vals + ((<usize>at) << 2), BlockMap.slotValue(rec, (at - home) & this.mask));
    this.size++;
  }

  /**
   * Empties slot i, which holds a key (the last get() found it there, hitAt, the map unchanged
   * since): a caller that just looked the key up need not probe for it again.
   */
  deleteAt(i: u32): void {
    const mask = this.mask;
    // Backward shift: pull later members of the run into the hole when their home allows it.
    let hole = i;
    let j = (i + 1) & mask;
    while (true) {
      const v = load<u32>(this.vals + ((<usize>j) << 2));
      if (v === 0) break;
      const h = this.homeAt(j, v);
      // The member may move to the hole unless its home lies cyclically in (hole, j].
      if (((j - h) & mask) >= ((j - hole) & mask)) {
        store<u32>(
          this.vals + ((<usize>hole) << 2),
          BlockMap.slotValue(<usize>(v & ~DIST_MASK), (hole - h) & mask),
        );
        hole = j;
      }
      j = (j + 1) & mask;
    }
    store<u32>(this.vals + ((<usize>hole) << 2), 0);
    this.size--;
  }

  /**
   * Doubles the table. Every key must be read from its record, a cache miss each (records lie
   * all over the heap), so the records go in groups: their keys are loaded in one loop, whose
   * loads do not depend on each other and so overlap, then inserted.
   */
  grow(): void {
    const oldVals = this.vals;
    const oldCap = this.cap;
    this.alloc(oldCap << 1);
    let i: u32 = 0;
    while (i < oldCap) {
      let n: u32 = 0;
      while (i < oldCap && n < GROW_GROUP) {
        const v = load<u32>(oldVals + ((<usize>i) << 2));
        i++;
        if (v === 0) continue;
        store<u32>(growRecs + ((<usize>n) << 2), v);
        n++;
      }
      for (let k: u32 = 0; k < n; k++) {
        const v = load<u32>(growRecs + ((<usize>k) << 2));
        store<u64>(growKeys + ((<usize>k) << 3), load<u64>(<usize>(v & ~DIST_MASK) + KEY_OFFSET));
      }
      for (let k: u32 = 0; k < n; k++)
        this.place(
          load<u64>(growKeys + ((<usize>k) << 3)),
          <usize>(load<u32>(growRecs + ((<usize>k) << 2)) & ~DIST_MASK),
        );
    }
    heap.free(oldVals);
  }

  /**
   * Doubles the table, empty, keeping the count: the caller puts every record back (putBack). For
   * a caller that can list its records faster than grow() reads them from the slots
   * (BlockTable.growMap walks them in address order).
   */
  clearDoubled(): void {
    const old = this.vals;
    this.alloc(this.cap << 1);
    heap.free(old);
  }

  /** Puts record `rec` back after clearDoubled (its key absent from the table). */
  @inline putBack(rec: usize): void {
    this.place(load<u64>(rec + KEY_OFFSET), rec);
  }

  /** Puts record `rec` of a key known to be absent at the first free slot from its home. */
  @inline private place(key: u64, rec: usize): void {
    const mask = this.mask;
    const home = this.home(BlockMap.mix(key));
    let j = home;
    while (load<u32>(this.vals + ((<usize>j) << 2)) !== 0) j = (j + 1) & mask;
    store<u32>(this.vals + ((<usize>j) << 2), BlockMap.slotValue(rec, (j - home) & mask));
  }

  /** Empties the map and gives its memory back (down to the minimum size). */
  clear(): void {
    heap.free(this.vals);
    this.alloc(MIN_CAP);
    this.size = 0;
  }

  /** Gives back the map's memory, itself included. */
  dispose(): void {
    heap.free(this.vals);
    heap.free(changetype<usize>(this));
  }

  /** Slot i's record (0: empty), for iteration over 0 ≤ i < cap. */
  @inline recordAt(i: u32): usize {
    return <usize>(load<u32>(this.vals + ((<usize>i) << 2)) & ~DIST_MASK);
  }

  /** Bytes held. */
  get bytes(): usize {
    return (<usize>this.cap) << 2;
  }
}
