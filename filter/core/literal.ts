// ASCII literals (JSON keys, role names) prepared once so a comparison is a length test and one
// u64 compare for the first eight bytes, plus a memory compare only for longer literals.

/** The first min(n, 8) bytes at p as a little-endian u64 (zero-padded); never reads past p+n. */
export function head8(p: usize, n: i32): u64 {
  if (n >= 8) return load<u64>(p);
  let v: u64 = 0;
  for (let i = n - 1; i >= 0; i--) v = (v << 8) | <u64>load<u8>(p + <usize>i);
  return v;
}

// Unmanaged: literals live for the whole program, and a GC-managed `this` would cost shadow-stack
// spills in the scanner's hot path.
@unmanaged
export class Literal {
  readonly ptr: usize;
  readonly len: i32;
  readonly head: u64;

  /** `s` must be ASCII (every use is a JSON key or a role name). */
  constructor(s: string) {
    const n = s.length;
    const size = max<i32>(n, 8);
    const ptr = heap.alloc(<usize>size);
    for (let i = 0; i < n; i++) store<u8>(ptr + <usize>i, <u8>s.charCodeAt(i));
    this.ptr = ptr;
    this.len = n;
    this.head = head8(ptr, n);
  }

  /** Do the n bytes at p, whose head8 is `head`, equal this literal? */
  @inline is(p: usize, n: i32, head: u64): bool {
    return (
      n === this.len &&
      head === this.head &&
      (n <= 8 || memory.compare(p + 8, this.ptr + 8, <usize>(n - 8)) === 0)
    );
  }

  /** Do the n bytes at p equal this literal? */
  equals(p: usize, n: i32): bool {
    return n === this.len && this.is(p, n, head8(p, n));
  }
}
