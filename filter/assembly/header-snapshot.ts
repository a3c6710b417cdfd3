// A request's headers read once (proxy_get_header_map_pairs) and looked up in place. The headers
// phase looks at some twenty names — routing headers to strip, rank headers, the priority, the
// secret, :path, :method, the request id — and the decision at the session header: one host call
// per name was most of the request path's host calls. Lookups answer from the copy; a name that
// is removed is marked so here; any other write to the map ends the snapshot (host.ts), since it
// would no longer say what the map holds.
/** Per entry: key offset, key length (-1: removed), value offset, value length (i32 each). */
const ENTRY: i32 = 4;

export class HeaderSnapshot {
  /** The pairs block the host returned (heap, outside the GC), or 0. */
  ptr: usize = 0;
  len: i32 = 0;
  count: i32 = 0;
  /** GC-managed (a snapshot lives with its stream): ENTRY words per header. */
  private entries: StaticArray<i32> = new StaticArray<i32>(ENTRY * 16);

  /**
   * Indexes a pairs block (u32 count, count × (u32 key length, u32 value length), then each key
   * and value followed by a NUL). False when the bytes are not exactly that: the caller then
   * reads the map call by call.
   */
  parse(ptr: usize, len: i32): bool {
    this.ptr = ptr;
    this.len = len;
    this.count = 0;
    if (len < 4) return false;
    const n = <i32>load<u32>(ptr);
    if (n < 0 || <i64>n * 8 + 4 > <i64>len) return false;
    if (this.entries.length < n * ENTRY) this.entries = new StaticArray<i32>(n * ENTRY);
    const e = changetype<usize>(this.entries);
    let at: i64 = 4 + <i64>n * 8;
    for (let i = 0; i < n; i++) {
      const k = <i64>load<u32>(ptr + 4 + <usize>i * 8);
      const v = <i64>load<u32>(ptr + 8 + <usize>i * 8);
      if (at + k + v + 2 > <i64>len) return false;
      const slot = e + <usize>(i * ENTRY * 4);
      store<i32>(slot, <i32>at);
      store<i32>(slot, <i32>k, 4);
      store<i32>(slot, <i32>(at + k + 1), 8);
      store<i32>(slot, <i32>v, 12);
      at += k + v + 2;
    }
    if (at !== <i64>len) return false;
    this.count = n;
    return true;
  }

  /** The index of the first entry at or after `from` named `name` (lower case), or -1. */
  find(name: ArrayBuffer, from: i32): i32 {
    const want = changetype<usize>(name);
    const wantLen = name.byteLength;
    for (let i = from; i < this.count; i++) {
      const slot = this.slot(i);
      if (load<i32>(slot, 4) !== wantLen) continue;
      if (memory.compare(this.ptr + <usize>load<i32>(slot), want, <usize>wantLen) === 0) return i;
    }
    return -1;
  }

  @inline private slot(i: i32): usize {
    return changetype<usize>(this.entries) + <usize>(i * ENTRY * 4);
  }

  valuePtr(i: i32): usize {
    return this.ptr + <usize>load<i32>(this.slot(i), 8);
  }

  valueLen(i: i32): i32 {
    return load<i32>(this.slot(i), 12);
  }

  /** Every entry named `name` reads as absent from now on (the map's copy was removed). */
  remove(name: ArrayBuffer): void {
    for (let i = this.find(name, 0); i >= 0; i = this.find(name, i + 1)) store<i32>(this.slot(i), -1, 4);
  }

  /** Forgets the block (its owner frees it). */
  clear(): void {
    this.ptr = 0;
    this.len = 0;
    this.count = 0;
  }
}
