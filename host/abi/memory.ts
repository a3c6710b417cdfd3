// Access to a module's linear memory the way proxy-wasm-cpp-host does it: bounds-checked reads
// (out of range → InvalidMemoryAccess), little-endian words, and data handed back to the module
// in memory the module allocates itself through its exported `malloc` (WasmBase::allocMemory,
// copyToPointerSize in include/proxy-wasm/wasm.h).
import type { Pairs } from "./constants.ts";

const utf8 = new TextEncoder();
const utf8d = new TextDecoder();

/** Strings up to this many bytes are remembered by where they were read (GuestMemory.readString). */
const NAME_MAX = 96;
const NAME_SLOTS = 128;
const NAME_SLOT_SHIFT = 32 - Math.log2(NAME_SLOTS);

/**
 * A string of a byte or two (a rank's digits, written in place): built directly, which costs a
 * fraction of a TextDecoder call; longer ones are decoded as UTF-8, which beats building them.
 */
function shortString(mem: Uint8Array, ptr: number, size: number): string {
  const a = mem[ptr] as number;
  if (size === 1 && a < 0x80) return String.fromCharCode(a);
  const b = mem[ptr + 1] as number;
  if (size === 2 && a < 0x80 && b < 0x80) return String.fromCharCode(a, b);
  return utf8d.decode(mem.subarray(ptr, ptr + size));
}

export class GuestMemory {
  private buffer: ArrayBuffer | null = null;
  private readonly names: Array<{ ptr: number; bytes: Uint8Array; text: string } | undefined> = new Array(
    NAME_SLOTS,
  );
  private u8: Uint8Array = new Uint8Array(0);
  private dv: DataView = new DataView(new ArrayBuffer(0));

  constructor(
    private readonly memory: WebAssembly.Memory,
    private readonly malloc: (size: number) => number,
  ) {}

  /**
   * Views of the memory, made again only when memory.grow() replaced (detached) its ArrayBuffer:
   * a detached buffer's byteLength reads 0, which is cheaper to test on every access than
   * fetching memory.buffer (a getter into the engine).
   */
  private fresh(): void {
    if (this.buffer !== null && this.buffer.byteLength !== 0) return;
    const b = this.memory.buffer;
    if (b === this.buffer) return;
    this.buffer = b;
    this.u8 = new Uint8Array(b);
    this.dv = new DataView(b);
  }

  private get bytes(): Uint8Array {
    this.fresh();
    return this.u8;
  }

  private get words(): DataView {
    this.fresh();
    return this.dv;
  }

  /** The module's linear memory in bytes now (it only grows). */
  get size(): number {
    return this.memory.buffer.byteLength;
  }

  inBounds(ptr: number, size: number): boolean {
    return ptr >= 0 && size >= 0 && ptr + size <= this.bytes.length;
  }

  /** A copy of [ptr, ptr+size), or null when out of bounds (the caller returns InvalidMemoryAccess). */
  read(ptr: number, size: number): Uint8Array | null {
    ptr >>>= 0;
    size >>>= 0;
    if (!this.inBounds(ptr, size)) return null;
    return this.bytes.slice(ptr, ptr + size);
  }

  /** The bytes at ptr without a copy: valid until the VM runs again or its memory grows. */
  view(ptr: number, size: number): Uint8Array | null {
    ptr >>>= 0;
    size >>>= 0;
    if (!this.inBounds(ptr, size)) return null;
    return this.bytes.subarray(ptr, ptr + size);
  }

  readString(ptr: number, size: number): string | null {
    ptr >>>= 0;
    size >>>= 0;
    if (!this.inBounds(ptr, size)) return null;
    const mem = this.u8;
    if (size > NAME_MAX) return utf8d.decode(mem.subarray(ptr, ptr + size));
    // Names (shared-data keys, header names and values, property paths) come again and again from
    // the same few places in the module: checking the bytes against the string last decoded from
    // there costs a fraction of decoding them. Envoy reads them as string_views, without a copy.
    // The module's allocator aligns to 16 bytes, so the slot comes from a multiplicative hash of the
    // address and length, not from its low bits (most of which are zero).
    const slot = Math.imul(ptr ^ (size << 24), 0x9e3779b1) >>> NAME_SLOT_SHIFT;
    const hit = this.names[slot];
    if (hit !== undefined && hit.ptr === ptr && hit.bytes.length === size) {
      const bytes = hit.bytes;
      let i = 0;
      while (i < size && mem[ptr + i] === bytes[i]) i++;
      if (i === size) return hit.text;
    }
    const text = shortString(mem, ptr, size);
    this.names[slot] = { ptr, bytes: mem.slice(ptr, ptr + size), text };
    return text;
  }

  writeU32(ptr: number, value: number): boolean {
    ptr >>>= 0;
    if (!this.inBounds(ptr, 4)) return false;
    this.words.setUint32(ptr, value >>> 0, true);
    return true;
  }

  writeU64(ptr: number, value: bigint): boolean {
    ptr >>>= 0;
    if (!this.inBounds(ptr, 8)) return false;
    this.words.setBigUint64(ptr, BigInt.asUintN(64, value), true);
    return true;
  }

  write(ptr: number, data: Uint8Array): boolean {
    ptr >>>= 0;
    if (!this.inBounds(ptr, data.length)) return false;
    this.bytes.set(data, ptr);
    return true;
  }

  /**
   * Envoy's copyToPointerSize: empty data → (0, 0) without calling malloc; otherwise malloc(size)
   * in the module, copy, and store pointer and size. False = InvalidMemoryAccess.
   */
  copyOut(data: Uint8Array | string, ptrPtr: number, sizePtr: number): boolean {
    const bytes = typeof data === "string" ? utf8.encode(data) : data;
    let ptr = 0;
    if (bytes.length > 0) {
      ptr = this.malloc(bytes.length) >>> 0;
      if (ptr === 0 || !this.write(ptr, bytes)) return false;
    }
    return this.writeU32(ptrPtr, ptr) && this.writeU32(sizePtr, bytes.length);
  }
}

export function encodeUtf8(s: string): Uint8Array {
  return utf8.encode(s);
}

export function decodeUtf8(b: Uint8Array): string {
  return utf8d.decode(b);
}

/** PairsUtil::pairsSize/marshalPairs: count, (key len, value len)*, then NUL-terminated strings. */
export function marshalPairs(pairs: Pairs): Uint8Array {
  const enc = pairs.map(([k, v]) => [utf8.encode(k), utf8.encode(v)] as const);
  let size = 4;
  for (const [k, v] of enc) size += 8 + k.length + 1 + v.length + 1;
  const out = new Uint8Array(size);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, enc.length, true);
  let pos = 4;
  for (const [k, v] of enc) {
    dv.setUint32(pos, k.length, true);
    dv.setUint32(pos + 4, v.length, true);
    pos += 8;
  }
  for (const [k, v] of enc) {
    out.set(k, pos);
    pos += k.length + 1;
    out.set(v, pos);
    pos += v.length + 1;
  }
  return out;
}

/** Limits from include/proxy-wasm/limits.h: anything over them parses as no pairs at all. */
const PAIRS_MAX_BYTES = 1024 * 1024;
const PAIRS_MAX_COUNT = 1024;

/** PairsUtil::toPairs: any malformation (bad sizes, missing NULs, trailing bytes) → empty list. */
export function unmarshalPairs(buf: Uint8Array): Pairs {
  if (buf.length < 4 || buf.length > PAIRS_MAX_BYTES) return [];
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const n = dv.getUint32(0, true);
  if (n > PAIRS_MAX_COUNT || 4 + n * 8 > buf.length) return [];
  const sizes: Array<[number, number]> = [];
  for (let i = 0; i < n; i++) sizes.push([dv.getUint32(4 + i * 8, true), dv.getUint32(8 + i * 8, true)]);
  let pos = 4 + n * 8;
  const out: Pairs = [];
  for (const [ks, vs] of sizes) {
    if (pos + ks + 1 > buf.length || buf[pos + ks] !== 0) return [];
    const k = utf8d.decode(buf.subarray(pos, pos + ks));
    pos += ks + 1;
    if (pos + vs + 1 > buf.length || buf[pos + vs] !== 0) return [];
    const v = utf8d.decode(buf.subarray(pos, pos + vs));
    pos += vs + 1;
    out.push([k, v]);
  }
  return pos === buf.length ? out : [];
}
