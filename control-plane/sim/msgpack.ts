// A small MessagePack encoder that writes values the way Python's msgspec does, because a
// consumer of vLLM's KV events may compare bytes, and msgpackr differs in two places that
// matter here: it writes every BigInt as an 8-byte int64/uint64 (msgspec picks the smallest
// form for an int) and it writes integers above 2^32 held in a Number as float64.
// Supported: null, booleans, safe-integer Numbers, BigInts in [-2^63, 2^64), other Numbers
// (always float64, as msgspec writes Python floats), strings, Uint8Array, arrays, plain objects.

export type Packable =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | Float64
  | Packable[]
  | { [key: string]: Packable };

/** A float that must be written as float64 even when it is integral (Python `float`). */
export class Float64 {
  constructor(readonly value: number) {}
}

class Writer {
  buf = Buffer.allocUnsafe(256);
  pos = 0;

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  u8(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }
}

function writeUint(w: Writer, v: bigint): void {
  if (v < 128n) w.u8(Number(v));
  else if (v < 0x100n) {
    w.ensure(2);
    w.buf[w.pos++] = 0xcc;
    w.buf[w.pos++] = Number(v);
  } else if (v < 0x10000n) {
    w.ensure(3);
    w.buf[w.pos++] = 0xcd;
    w.buf.writeUInt16BE(Number(v), w.pos);
    w.pos += 2;
  } else if (v < 0x100000000n) {
    w.ensure(5);
    w.buf[w.pos++] = 0xce;
    w.buf.writeUInt32BE(Number(v), w.pos);
    w.pos += 4;
  } else {
    w.ensure(9);
    w.buf[w.pos++] = 0xcf;
    w.buf.writeBigUInt64BE(v, w.pos);
    w.pos += 8;
  }
}

function writeNegInt(w: Writer, v: bigint): void {
  if (v >= -32n) w.u8(0x100 + Number(v));
  else if (v >= -0x80n) {
    w.ensure(2);
    w.buf[w.pos++] = 0xd0;
    w.buf.writeInt8(Number(v), w.pos++);
  } else if (v >= -0x8000n) {
    w.ensure(3);
    w.buf[w.pos++] = 0xd1;
    w.buf.writeInt16BE(Number(v), w.pos);
    w.pos += 2;
  } else if (v >= -0x80000000n) {
    w.ensure(5);
    w.buf[w.pos++] = 0xd2;
    w.buf.writeInt32BE(Number(v), w.pos);
    w.pos += 4;
  } else {
    w.ensure(9);
    w.buf[w.pos++] = 0xd3;
    w.buf.writeBigInt64BE(v, w.pos);
    w.pos += 8;
  }
}

function writeInt(w: Writer, v: bigint): void {
  if (v >= 0n) {
    if (v >= 1n << 64n) throw new RangeError(`integer ${v} does not fit in uint64`);
    writeUint(w, v);
  } else {
    if (v < -(1n << 63n)) throw new RangeError(`integer ${v} does not fit in int64`);
    writeNegInt(w, v);
  }
}

function writeSmallInt(w: Writer, v: number): void {
  // Fast path for the many token ids: avoids BigInt for values that fit in 32 bits.
  if (v >= 0) {
    if (v < 128) w.u8(v);
    else if (v < 0x100) {
      w.ensure(2);
      w.buf[w.pos++] = 0xcc;
      w.buf[w.pos++] = v;
    } else if (v < 0x10000) {
      w.ensure(3);
      w.buf[w.pos++] = 0xcd;
      w.buf.writeUInt16BE(v, w.pos);
      w.pos += 2;
    } else if (v < 0x100000000) {
      w.ensure(5);
      w.buf[w.pos++] = 0xce;
      w.buf.writeUInt32BE(v, w.pos);
      w.pos += 4;
    } else writeUint(w, BigInt(v));
  } else writeInt(w, BigInt(v));
}

function writeFloat(w: Writer, v: number): void {
  w.ensure(9);
  w.buf[w.pos++] = 0xcb;
  w.buf.writeDoubleBE(v, w.pos);
  w.pos += 8;
}

function writeStr(w: Writer, s: string): void {
  const len = Buffer.byteLength(s, "utf8");
  w.ensure(len + 5);
  if (len < 32) w.buf[w.pos++] = 0xa0 | len;
  else if (len < 0x100) {
    w.buf[w.pos++] = 0xd9;
    w.buf[w.pos++] = len;
  } else if (len < 0x10000) {
    w.buf[w.pos++] = 0xda;
    w.buf.writeUInt16BE(len, w.pos);
    w.pos += 2;
  } else {
    w.buf[w.pos++] = 0xdb;
    w.buf.writeUInt32BE(len, w.pos);
    w.pos += 4;
  }
  w.pos += w.buf.write(s, w.pos, "utf8");
}

function writeHeader(w: Writer, n: number, fix: number, c16: number, c32: number, fixMax: number): void {
  w.ensure(5);
  if (n < fixMax) w.buf[w.pos++] = fix | n;
  else if (n < 0x10000) {
    w.buf[w.pos++] = c16;
    w.buf.writeUInt16BE(n, w.pos);
    w.pos += 2;
  } else {
    w.buf[w.pos++] = c32;
    w.buf.writeUInt32BE(n, w.pos);
    w.pos += 4;
  }
}

function write(w: Writer, v: Packable): void {
  if (v === null) w.u8(0xc0);
  else if (v === true) w.u8(0xc3);
  else if (v === false) w.u8(0xc2);
  else if (typeof v === "number") {
    if (Number.isSafeInteger(v)) writeSmallInt(w, v);
    else writeFloat(w, v);
  } else if (typeof v === "bigint") writeInt(w, v);
  else if (typeof v === "string") writeStr(w, v);
  else if (v instanceof Float64) writeFloat(w, v.value);
  else if (v instanceof Uint8Array) {
    w.ensure(v.length + 5);
    if (v.length < 0x100) {
      w.buf[w.pos++] = 0xc4;
      w.buf[w.pos++] = v.length;
    } else if (v.length < 0x10000) {
      w.buf[w.pos++] = 0xc5;
      w.buf.writeUInt16BE(v.length, w.pos);
      w.pos += 2;
    } else {
      w.buf[w.pos++] = 0xc6;
      w.buf.writeUInt32BE(v.length, w.pos);
      w.pos += 4;
    }
    w.buf.set(v, w.pos);
    w.pos += v.length;
  } else if (Array.isArray(v)) {
    writeHeader(w, v.length, 0x90, 0xdc, 0xdd, 16);
    for (const item of v) write(w, item);
  } else {
    const keys = Object.keys(v);
    writeHeader(w, keys.length, 0x80, 0xde, 0xdf, 16);
    for (const k of keys) {
      writeStr(w, k);
      write(w, v[k] as Packable);
    }
  }
}

/** Encodes one value with msgspec's choice of forms. */
export function packMsgspec(value: Packable): Buffer {
  const w = new Writer();
  write(w, value);
  return w.buf.subarray(0, w.pos);
}
