// Test support: a MessagePack encoder that writes what Python msgspec writes (integers in their
// smallest form, signed forms only for negatives, floats as float64, bytes as bin), and
// builders for vLLM/SGLang KV event batches in both encodings. Deliberately independent of
// msgpackr, so the decoder is not checked against itself.

/** A Python float: always float64 on the wire, even when integral (e.g. ts = 1.0). */
export class F64 {
  constructor(readonly value: number) {}
}

type Value =
  | null
  | undefined
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | F64
  | Value[]
  | { [k: string]: Value };

class Writer {
  private buf = Buffer.alloc(1024);
  private pos = 0;
  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }
  u8(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }
  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
  be(v: bigint, size: 1 | 2 | 4 | 8): void {
    this.ensure(size);
    for (let i = size - 1; i >= 0; i--) this.buf[this.pos++] = Number((v >> BigInt(8 * i)) & 0xffn);
  }
  f64(v: number): void {
    this.ensure(8);
    this.buf.writeDoubleBE(v, this.pos);
    this.pos += 8;
  }
  done(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.pos));
  }
}

function int(w: Writer, v: bigint): void {
  if (v >= 0n) {
    if (v < 128n) w.u8(Number(v));
    else if (v < 256n) {
      w.u8(0xcc);
      w.be(v, 1);
    } else if (v < 65536n) {
      w.u8(0xcd);
      w.be(v, 2);
    } else if (v < 1n << 32n) {
      w.u8(0xce);
      w.be(v, 4);
    } else {
      w.u8(0xcf);
      w.be(v, 8);
    }
  } else {
    const u = (x: bigint, bits: number): bigint => BigInt.asUintN(bits, x);
    if (v >= -32n) w.u8(Number(u(v, 8)));
    else if (v >= -128n) {
      w.u8(0xd0);
      w.be(u(v, 8), 1);
    } else if (v >= -32768n) {
      w.u8(0xd1);
      w.be(u(v, 16), 2);
    } else if (v >= -(1n << 31n)) {
      w.u8(0xd2);
      w.be(u(v, 32), 4);
    } else {
      w.u8(0xd3);
      w.be(u(v, 64), 8);
    }
  }
}

function header(w: Writer, n: number, fix: number, fixMax: number, c16: number, c32: number): void {
  if (n <= fixMax) w.u8(fix | n);
  else if (n < 65536) {
    w.u8(c16);
    w.be(BigInt(n), 2);
  } else {
    w.u8(c32);
    w.be(BigInt(n), 4);
  }
}

function write(w: Writer, v: Value): void {
  if (v === null || v === undefined) w.u8(0xc0);
  else if (v === true) w.u8(0xc3);
  else if (v === false) w.u8(0xc2);
  else if (v instanceof F64) {
    w.u8(0xcb);
    w.f64(v.value);
  } else if (typeof v === "number") {
    if (Number.isInteger(v)) int(w, BigInt(v));
    else {
      w.u8(0xcb);
      w.f64(v);
    }
  } else if (typeof v === "bigint") int(w, v);
  else if (typeof v === "string") {
    const b = Buffer.from(v, "utf8");
    if (b.length < 32) w.u8(0xa0 | b.length);
    else if (b.length < 256) {
      w.u8(0xd9);
      w.be(BigInt(b.length), 1);
    } else header(w, b.length, 0, -1, 0xda, 0xdb);
    w.bytes(b);
  } else if (v instanceof Uint8Array) {
    if (v.length < 256) {
      w.u8(0xc4);
      w.be(BigInt(v.length), 1);
    } else header(w, v.length, 0, -1, 0xc5, 0xc6);
    w.bytes(v);
  } else if (Array.isArray(v)) {
    header(w, v.length, 0x90, 15, 0xdc, 0xdd);
    for (const x of v) write(w, x);
  } else {
    const entries = Object.entries(v).filter(([, x]) => x !== undefined);
    header(w, entries.length, 0x80, 15, 0xde, 0xdf);
    for (const [k, x] of entries) {
      write(w, k);
      write(w, x);
    }
  }
}

export function encode(v: Value): Buffer {
  const w = new Writer();
  write(w, v);
  return w.done();
}

// ---- KV event builders -------------------------------------------------------------------

export interface StoredSpec {
  hashes: (number | bigint | Uint8Array)[];
  parent?: number | bigint | Uint8Array | null;
  tokens: number[];
  blockSize: number;
  loraId?: number | null;
  medium?: string | null;
  loraName?: string | null;
  extra?: Record<string, Value>;
}

/** msgspec array_like BlockStored: positional, trailing fields with defaults omitted. */
export function storedArray(s: StoredSpec, trailing: Value[] = []): Value[] {
  return [
    "BlockStored",
    s.hashes,
    s.parent ?? null,
    s.tokens,
    s.blockSize,
    s.loraId ?? null,
    s.medium ?? null,
    s.loraName ?? null,
    ...trailing,
  ];
}

/** msgspec tagged map (vLLM ≥ v0.26): tag under "type"; `extra` adds optional fields. */
export function storedMap(s: StoredSpec): Value {
  return {
    type: "BlockStored",
    block_hashes: s.hashes,
    parent_block_hash: s.parent ?? null,
    token_ids: s.tokens,
    block_size: s.blockSize,
    lora_id: s.loraId ?? null,
    medium: s.medium === undefined ? "GPU" : s.medium,
    lora_name: s.loraName ?? null,
    ...s.extra,
  };
}

export function removedArray(hashes: (number | bigint)[], medium: string | null = null): Value[] {
  return ["BlockRemoved", hashes, medium];
}

export function removedMap(hashes: (number | bigint)[], extra: Record<string, Value> = {}): Value {
  return { type: "BlockRemoved", block_hashes: hashes, medium: "GPU", ...extra };
}

export const clearedArray: Value[] = ["AllBlocksCleared"];
export const clearedMap: Value = { type: "AllBlocksCleared" };

/** A later stamp than `batch`'s default: another engine process, started after the first.
 * Still in the past: a stamp more than a day ahead of the control plane's clock is refused
 * (control-plane/src/events/batch-clock.ts). */
export const LATER_TS = 1_750_000_000.5;

/** `[ts, events, rank]`, or the 2-element form when rank is undefined. */
export function batch(events: Value[], rank?: number | null, ts = 1_700_000_000.25): Buffer {
  return encode(rank === undefined ? [new F64(ts), events] : [new F64(ts), events, rank]);
}

export function range(start: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => start + i);
}
