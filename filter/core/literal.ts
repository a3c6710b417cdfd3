// ASCII literals (JSON keys, role names) prepared once so a comparison is a length test and one
// u64 compare for the first eight bytes, plus a memory compare only for longer literals.

/** The first min(n, 8) bytes at p as a little-endian u64 (zero-padded); never reads past p+n. */
export function head8(p: usize, n: i32): u64 {
  if (n >= 8) return load<u64>(p);
  let v: u64 = 0;
  for (let i = n - 1; i >= 0; i--) v = (v << 8) | <u64>load<u8>(p + <usize>i);
  return v;
}

export class Literal {
  readonly bytes: ArrayBuffer;
  readonly ptr: usize;
  readonly len: i32;
  readonly head: u64;

  constructor(s: string) {
    const bytes = String.UTF8.encode(s);
    this.bytes = bytes;
    this.ptr = changetype<usize>(bytes);
    this.len = bytes.byteLength;
    this.head = head8(this.ptr, this.len);
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
