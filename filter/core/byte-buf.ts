// A growable byte buffer over raw memory. It is reused across requests so the hot path does not
// allocate; it only grows (doubling) when a request is larger than every earlier one. Callers
// bound every size they pass (the core never asks for more than its own limits), so growth can
// never exceed AssemblyScript's 1 GiB block limit and abort.
//
// Unmanaged (heap.alloc, never collected): every ByteBuf is a long-lived singleton, and a
// GC-managed object would cost shadow-stack spills in every hot method that touches one.

/** Copies below this size go word by word (ByteBuf.copyShort). */
const SHORT_COPY: usize = 512;

@unmanaged
export class ByteBuf {
  /**
   * Copies n bytes from src to dst, which must not overlap: 8-byte words, the last one ending at
   * n (it may rewrite bytes the one before wrote, with the same values); under 8 bytes, two
   * overlapping 4- or 2-byte words. For the short copies of the ingest path this beats
   * memory.copy, which the engine runs as a call out of Wasm (tens of nanoseconds each, several
   * per stored block: issue 31), and a byte loop for the last n % 8, whose exit the branch
   * predictor misses (a partial chunk's length is any).
   */
  @inline static copyShort(dst: usize, src: usize, n: usize): void {
    if (n >= SHORT_COPY) {
      memory.copy(dst, src, n);
      return;
    }
    if (n >= 8) {
      let i: usize = 0;
      for (; i + 8 < n; i += 8) store<u64>(dst + i, load<u64>(src + i));
      store<u64>(dst + n - 8, load<u64>(src + n - 8));
      return;
    }
    if (n >= 4) {
      const head = load<u32>(src);
      const tail = load<u32>(src + n - 4);
      store<u32>(dst, head);
      store<u32>(dst + n - 4, tail);
      return;
    }
    if (n >= 2) {
      const head = load<u16>(src);
      const tail = load<u16>(src + n - 2);
      store<u16>(dst, head);
      store<u16>(dst + n - 2, tail);
      return;
    }
    if (n === 1) store<u8>(dst, load<u8>(src));
  }

  ptr: usize;
  len: i32 = 0;
  cap: i32;

  constructor(initial: i32) {
    const cap = initial < 16 ? 16 : initial;
    this.ptr = heap.alloc(<usize>cap);
    this.len = 0;
    this.cap = cap;
  }

  /** Makes room for `extra` more bytes past `len`. */
  @inline reserve(extra: i32): void {
    if (this.len + extra > this.cap) this.grow(this.len + extra);
  }

  grow(need: i32): void {
    let cap = this.cap << 1;
    if (cap < need) cap = need;
    // heap.realloc keeps the contents; the old block is freed (nothing else points into it).
    this.ptr = heap.realloc(this.ptr, <usize>cap);
    this.cap = cap;
  }

  @inline append(src: usize, n: i32): void {
    this.reserve(n);
    memory.copy(this.ptr + <usize>this.len, src, <usize>n);
    this.len += n;
  }

  /** append for a short source outside this buffer (copyShort). */
  @inline appendShort(src: usize, n: i32): void {
    this.reserve(n);
    ByteBuf.copyShort(this.ptr + <usize>this.len, src, <usize>n);
    this.len += n;
  }

  @inline appendByte(b: u32): void {
    this.reserve(1);
    store<u8>(this.ptr + <usize>this.len, <u8>b);
    this.len += 1;
  }

  /** Appends the 32-bit little-endian value (tables of spans use this). */
  @inline appendI32(v: i32): void {
    this.reserve(4);
    store<i32>(this.ptr + <usize>this.len, v);
    this.len += 4;
  }
}
