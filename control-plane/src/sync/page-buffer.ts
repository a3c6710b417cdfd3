// A sync page being written (sync-codec.ts's format, docs/wire-format.md §5): one growable
// buffer the log and its key table write entries into in place. A poll at 800 ranks carries
// ~26,000 changed buckets, each gateway about ten times a second; building it as an object, a
// key's UTF-8 bytes and a value copy per entry made ~200 bytes of garbage an entry, and the
// scavenges that copied half-built pages were a large part of serving a gateway (issue 31).
import { PATCH_LENGTH_BIT, SYNC_HEADER_BYTES } from "./sync-codec.ts";

export class PageBuffer {
  #buf: Buffer;
  /** Where the next byte goes. */
  at = SYNC_HEADER_BYTES;

  constructor(initialBytes = 64 << 10) {
    this.#buf = Buffer.allocUnsafe(Math.max(initialBytes, SYNC_HEADER_BYTES));
  }

  /** The buffer, valid until the next write (a write may replace it with a larger one). */
  get buf(): Buffer {
    return this.#buf;
  }

  /** Starts a new page: entries go after the header's place. */
  reset(): void {
    this.at = SYNC_HEADER_BYTES;
  }

  /** Makes room for n more bytes at `at`. */
  reserve(n: number): Buffer {
    const need = this.at + n;
    if (need > this.#buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, this.#buf.length * 2));
      this.#buf.copy(grown, 0, 0, this.at);
      this.#buf = grown;
    }
    return this.#buf;
  }

  /** An entry's key: its UTF-8 length (u16) and bytes. */
  key(key: string): void {
    const buf = this.reserve(2 + key.length * 3);
    const n = buf.write(key, this.at + 2, "utf8");
    if (n > 0xffff) throw new Error(`shared-data key too long: ${key.slice(0, 40)}…`);
    buf.writeUInt16LE(n, this.at);
    this.at += 2 + n;
  }

  /** An entry's value (or, patch, the ops that take the gateway's value to it): its u32 length and bytes. */
  value(bytes: Uint8Array, patch: boolean): void {
    if (bytes.length >= PATCH_LENGTH_BIT) throw new Error(`value too long: ${bytes.length} bytes`);
    const buf = this.reserve(4 + bytes.length);
    buf.writeUInt32LE(patch ? (bytes.length | PATCH_LENGTH_BIT) >>> 0 : bytes.length, this.at);
    buf.set(bytes, this.at + 4);
    this.at += 4 + bytes.length;
  }

  /** Entries written elsewhere in this format (a key table's writeEntries), as they are. */
  entries(bytes: Uint8Array): void {
    const buf = this.reserve(bytes.length);
    buf.set(bytes, this.at);
    this.at += bytes.length;
  }

  /** A copy of the page written so far. */
  copy(): Uint8Array {
    const page = new Uint8Array(this.at);
    page.set(this.#buf.subarray(0, this.at));
    return page;
  }
}
