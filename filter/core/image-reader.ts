// A bounds-checked little-endian reader over bytes the control plane sent (shared-data
// images). Any read past the end clears `ok` and returns 0, so a decoder reads a whole
// record and checks `ok` once instead of guarding every field — and never traps.

export class ImageReader {
  pos: usize;
  end: usize;
  ok: bool = true;

  constructor(ptr: usize, len: i32) {
    this.pos = ptr;
    this.end = ptr + <usize>(len < 0 ? 0 : len);
  }

  @inline private take(n: usize): usize {
    const at = this.pos;
    if (!this.ok || at + n > this.end) {
      this.ok = false;
      return 0;
    }
    this.pos = at + n;
    return at;
  }

  u8(): u32 {
    const at = this.take(1);
    return at === 0 ? 0 : <u32>load<u8>(at);
  }
  u16(): u32 {
    const at = this.take(2);
    return at === 0 ? 0 : <u32>load<u16>(at);
  }
  i16(): i32 {
    const at = this.take(2);
    return at === 0 ? 0 : <i32>load<i16>(at);
  }
  u32(): u32 {
    const at = this.take(4);
    return at === 0 ? 0 : load<u32>(at);
  }
  i32(): i32 {
    const at = this.take(4);
    return at === 0 ? 0 : load<i32>(at);
  }
  u64(): u64 {
    const at = this.take(8);
    return at === 0 ? 0 : load<u64>(at);
  }
  f32(): f32 {
    const at = this.take(4);
    return at === 0 ? 0 : load<f32>(at);
  }

  /** A private copy of the next n bytes (empty when they are not all there). */
  bytes(n: u32): ArrayBuffer {
    const at = this.take(<usize>n);
    const out = new ArrayBuffer(at === 0 ? 0 : <i32>n);
    if (at !== 0) memory.copy(changetype<usize>(out), at, <usize>n);
    return out;
  }

  /** str16: u16 length + UTF-8 bytes, as a private copy. */
  str16Bytes(): ArrayBuffer {
    return this.bytes(this.u16());
  }

  /** str16 decoded to a string (invalid UTF-8 becomes U+FFFD; configuration only, never per request). */
  str16(): string {
    const b = this.str16Bytes();
    return String.UTF8.decode(b);
  }

  /** blob32: u32 length + bytes, as a private copy. */
  blob32(): ArrayBuffer {
    const n = this.u32();
    // A length past the end is malformed; checking first avoids allocating a huge buffer for it.
    if (<usize>n > this.end - this.pos) {
      this.ok = false;
      return new ArrayBuffer(0);
    }
    return this.bytes(n);
  }

  @inline atEnd(): bool {
    return this.ok && this.pos === this.end;
  }
}
