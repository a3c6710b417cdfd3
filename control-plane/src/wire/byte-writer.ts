// A growable little-endian writer for the shared-data images. Written here rather than taken
// from a library because the images are tiny, fixed-layout and must match the filter's
// AssemblyScript reader byte for byte; a general serializer would only add a schema layer.
const utf8 = new TextEncoder();

export class ByteWriter {
  #buf = new Uint8Array(256);
  #view = new DataView(this.#buf.buffer);
  #len = 0;

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
    this.#view.setUint8(this.#reserve(1), v);
    return this;
  }
  u16(v: number): this {
    this.#view.setUint16(this.#reserve(2), v, true);
    return this;
  }
  i16(v: number): this {
    this.#view.setInt16(this.#reserve(2), v, true);
    return this;
  }
  u32(v: number): this {
    this.#view.setUint32(this.#reserve(4), v, true);
    return this;
  }
  i32(v: number): this {
    this.#view.setInt32(this.#reserve(4), v, true);
    return this;
  }
  u64(v: bigint): this {
    this.#view.setBigUint64(this.#reserve(8), v, true);
    return this;
  }
  f32(v: number): this {
    this.#view.setFloat32(this.#reserve(4), v, true);
    return this;
  }
  bytes(b: Uint8Array): this {
    this.#buf.set(b, this.#reserve(b.length));
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
