// A growable little-endian writer for the shared-data images. Written here rather than taken
// from a library because the images are tiny, fixed-layout and must match the filter's
// AssemblyScript reader byte for byte; a general serializer would only add a schema layer.
const utf8 = new TextEncoder();

export class ByteWriter {
  #buf = new Uint8Array(256);
  #view = new DataView(this.#buf.buffer);
  #len = 0;

  /** Claims n bytes and returns their offset. Call it before touching #buf or #view: growing replaces both. */
  #reserve(n: number): number {
    if (this.#len + n > this.#buf.length) {
      const next = new Uint8Array(Math.max(this.#buf.length * 2, this.#len + n));
      next.set(this.#buf.subarray(0, this.#len));
      this.#buf = next;
      this.#view = new DataView(next.buffer);
    }
    const at = this.#len;
    this.#len += n;
    return at;
  }

  u8(v: number): this {
    const at = this.#reserve(1);
    this.#view.setUint8(at, v);
    return this;
  }
  u16(v: number): this {
    const at = this.#reserve(2);
    this.#view.setUint16(at, v, true);
    return this;
  }
  i16(v: number): this {
    const at = this.#reserve(2);
    this.#view.setInt16(at, v, true);
    return this;
  }
  u32(v: number): this {
    const at = this.#reserve(4);
    this.#view.setUint32(at, v, true);
    return this;
  }
  i32(v: number): this {
    const at = this.#reserve(4);
    this.#view.setInt32(at, v, true);
    return this;
  }
  u64(v: bigint): this {
    const at = this.#reserve(8);
    this.#view.setBigUint64(at, v, true);
    return this;
  }
  f32(v: number): this {
    const at = this.#reserve(4);
    this.#view.setFloat32(at, v, true);
    return this;
  }
  bytes(b: Uint8Array): this {
    const at = this.#reserve(b.length); // before reading #buf: reserving may replace it
    this.#buf.set(b, at);
    return this;
  }
  /** u16 length + UTF-8 bytes. */
  str16(s: string): this {
    const b = utf8.encode(s);
    if (b.length > 0xffff) throw new Error(`string too long for the image: ${s.slice(0, 40)}…`);
    return this.u16(b.length).bytes(b);
  }
  /** u32 length + bytes. */
  blob32(b: Uint8Array): this {
    return this.u32(b.length).bytes(b);
  }
  finish(): Uint8Array {
    return this.#buf.slice(0, this.#len);
  }
}
