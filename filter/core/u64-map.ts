// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// u64 → u32 open addressing (linear probing, backward-shift deletion: no tombstones, so a long
// churn of inserts and removals never degrades probes). The value 0 means "empty slot", so
// callers store pointers or index + 1. Keys are mixed (Fibonacci hashing) before probing:
// engine block hashes can be sequential (hash = base + i), which would cluster otherwise.
//
// Unmanaged and heap-allocated: the control plane's index lives here for the process's life,
// and keeping it out of the GC keeps per-entry cost at 12 bytes a slot. (Maps whose values are
// records holding their own key are block-map.ts's, with a fingerprint per slot.)

const MIN_CAP: u32 = 16;

@unmanaged
export class U64Map {
  keys: usize = 0;
  vals: usize = 0;
  cap: u32 = 0;
  mask: u32 = 0;
  size: u32 = 0;

  constructor() {
    this.alloc(MIN_CAP);
  }

  private alloc(cap: u32): void {
    this.keys = heap.alloc((<usize>cap) << 3);
    this.vals = heap.alloc((<usize>cap) << 2);
    memory.fill(this.vals, 0, (<usize>cap) << 2);
    this.cap = cap;
    this.mask = cap - 1;
  }

  @inline home(key: u64): u32 {
    return <u32>((key * 0x9e3779b97f4a7c15) >> 32) & this.mask;
  }

  /** The value of key, or 0. */
  get(key: u64): u32 {
    let i = this.home(key);
    while (true) {
      const v = load<u32>(this.vals + ((<usize>i) << 2));
      if (v === 0) return 0;
      if (this.keyAt(i) === key) return v;
      i = (i + 1) & this.mask;
    }
  }

  /** Inserts or overwrites (value ≠ 0). */
  set(key: u64, value: u32): void {
    // Grow at 70% load: linear probing stays short, and the table costs ~20 bytes an entry.
    if ((this.size + 1) * 10 > this.cap * 7) this.grow();
    let i = this.home(key);
    while (true) {
      const at = this.vals + ((<usize>i) << 2);
      const v = load<u32>(at);
      if (v === 0) {
        store<u64>(this.keys + ((<usize>i) << 3), key);
        store<u32>(at, value);
        this.size++;
        return;
      }
      if (this.keyAt(i) === key) {
        store<u32>(at, value);
        return;
      }
      i = (i + 1) & this.mask;
    }
  }

  /** Removes key; false when it was absent. */
  delete(key: u64): bool {
    const mask = this.mask;
    let i = this.home(key);
    while (true) {
      const v = load<u32>(this.vals + ((<usize>i) << 2));
      if (v === 0) return false;
      if (this.keyAt(i) === key) break;
      i = (i + 1) & mask;
    }
    // Backward shift: pull later members of the run into the hole when their home allows it.
    let hole = i;
    let j = (i + 1) & mask;
    while (true) {
      const v = load<u32>(this.vals + ((<usize>j) << 2));
      if (v === 0) break;
      const k = this.keyAt(j);
      const h = this.home(k);
      // k may move to the hole unless its home lies cyclically in (hole, j].
      if (((j - h) & mask) >= ((j - hole) & mask)) {
        store<u64>(this.keys + ((<usize>hole) << 3), k);
        store<u32>(this.vals + ((<usize>hole) << 2), v);
        hole = j;
      }
      j = (j + 1) & mask;
    }
    store<u32>(this.vals + ((<usize>hole) << 2), 0);
    this.size--;
    return true;
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldVals = this.vals;
    const oldCap = this.cap;
    this.alloc(oldCap << 1);
    this.size = 0;
    for (let i: u32 = 0; i < oldCap; i++) {
      const v = load<u32>(oldVals + ((<usize>i) << 2));
      if (v !== 0) this.set(load<u64>(oldKeys + ((<usize>i) << 3)), v);
    }
    heap.free(oldKeys);
    heap.free(oldVals);
  }

  /** Empties the map and gives its memory back (down to the minimum size). */
  clear(): void {
    heap.free(this.keys);
    heap.free(this.vals);
    this.alloc(MIN_CAP);
    this.size = 0;
  }

  /** Gives back the map's memory, itself included. */
  dispose(): void {
    heap.free(this.keys);
    heap.free(this.vals);
    heap.free(changetype<usize>(this));
  }

  /** Slot i's value (0: empty) and key, for iteration over 0 ≤ i < cap. */
  @inline valueAt(i: u32): u32 {
    return load<u32>(this.vals + ((<usize>i) << 2));
  }

  @inline keyAt(i: u32): u64 {
    return load<u64>(this.keys + ((<usize>i) << 3));
  }

  /** Bytes held (both arrays). */
  get bytes(): usize {
    return <usize>this.cap * 12;
  }
}
