// A strict little-endian reader for kvroute's binary messages (gateway reports, replica
// messages): every read is bounds-checked and names the field it wanted, so a malformed message
// is refused whole with a reason instead of being half-read. The twin of byte-writer.ts.

/** Item counts above this are refused before anything is allocated for them. */
export const MAX_ITEMS = 1 << 20;

export class ByteReader {
  #at = 0;
  readonly #view: DataView;

  /** `what` names the message in errors ("report truncated in …"); `fail` builds the error thrown. */
  constructor(
    protected readonly bytes: Uint8Array,
    private readonly what: string,
    private readonly fail: (message: string) => Error,
  ) {
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  #need(n: number, field: string): number {
    if (this.#at + n > this.bytes.length) throw this.fail(`${this.what} truncated in ${field}`);
    const at = this.#at;
    this.#at += n;
    return at;
  }
  u8(field: string): number {
    return this.#view.getUint8(this.#need(1, field));
  }
  u16(field: string): number {
    return this.#view.getUint16(this.#need(2, field), true);
  }
  u32(field: string): number {
    return this.#view.getUint32(this.#need(4, field), true);
  }
  u64(field: string): bigint {
    return this.#view.getBigUint64(this.#need(8, field), true);
  }
  str16(field: string): string {
    const len = this.u16(field);
    const at = this.#need(len, field);
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(this.bytes.subarray(at, at + len));
    } catch {
      throw this.fail(`${field} is not UTF-8`);
    }
  }
  count(field: string): number {
    const n = this.u32(field);
    if (n > MAX_ITEMS) throw this.fail(`${field}: ${n} items is more than ${MAX_ITEMS}`);
    return n;
  }
  /** Everything not read yet (a message that carries another one whole). */
  rest(): Uint8Array {
    const at = this.#need(this.bytes.length - this.#at, "rest");
    return this.bytes.subarray(at);
  }
  end(): void {
    if (this.#at !== this.bytes.length) throw this.fail(`${this.bytes.length - this.#at} trailing bytes`);
  }
}
