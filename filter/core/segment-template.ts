// The segment template as the filter receives it: a versioned, length-prefixed binary encoding
// (docs/wire-format.md §2.1), decoded once per configuration into offsets over one private copy
// of the bytes. Decoding is bounds-checked and rejects anything malformed with an error code.

export const TEMPLATE_MAGIC: u32 = 0x5453564b; // "KVST" read little-endian
export const TEMPLATE_VERSION: u8 = 1;
export const MAX_ROLES: i32 = 16;
export const MAX_ROLE_NAME: i32 = 32;
export const MAX_TEMPLATE_STRING: i32 = 1 << 20;
export const MAX_TEMPLATE_BYTES: i32 = 1 << 24;

export const FLAG_TRIM_CONTENT: u8 = 1;
export const FLAG_DEFAULT_SYSTEM: u8 = 2;
export const THINK_NONE: u8 = 0;
export const THINK_QWEN3: u8 = 1;

export const TPL_ERR_SHORT: i32 = -1;
export const TPL_ERR_MAGIC: i32 = -2;
export const TPL_ERR_VERSION: i32 = -3;
export const TPL_ERR_FLAGS: i32 = -4;
export const TPL_ERR_LIMIT: i32 = -5;
export const TPL_ERR_DUPLICATE_ROLE: i32 = -6;
export const TPL_ERR_TRAILING: i32 = -7;

/** Set by decodeSegmentTemplate when it returns null. */
export let templateError: i32 = 0;

/** Bytes per role record in `roleTable`: name, open, close as (offset, length) pairs. */
const ROLE_RECORD: i32 = 24;

// GC-managed (unlike the per-VM scanner and renderer), so a configuration image that drops a
// template frees it without ceremony; measured, unmanaged saved only noise-level time.
export class SegmentTemplate {
  /** Private copy of the encoded bytes; every offset below points into it. */
  data: ArrayBuffer;
  base: usize;
  prefixOff: i32 = 0;
  prefixLen: i32 = 0;
  genOff: i32 = 0;
  genLen: i32 = 0;
  /** -1 when there is no default system message. */
  defaultSystemOff: i32 = 0;
  defaultSystemLen: i32 = -1;
  trimContent: bool = false;
  think: u8 = THINK_NONE;
  roleCount: i32 = 0;
  roleBytes: ArrayBuffer = new ArrayBuffer(MAX_ROLES * ROLE_RECORD);
  roleTable: usize = changetype<usize>(this.roleBytes);
  /** Index of the "system" / "assistant" roles, or -1. */
  systemRole: i32 = -1;
  assistantRole: i32 = -1;

  constructor(data: ArrayBuffer) {
    this.data = data;
    this.base = changetype<usize>(data);
  }

  @inline private field(role: i32, i: i32): i32 {
    return load<i32>(this.roleTable + <usize>(role * ROLE_RECORD + i * 4));
  }

  @inline nameOff(role: i32): i32 {
    return this.field(role, 0);
  }
  @inline nameLen(role: i32): i32 {
    return this.field(role, 1);
  }
  @inline openOff(role: i32): i32 {
    return this.field(role, 2);
  }
  @inline openLen(role: i32): i32 {
    return this.field(role, 3);
  }
  @inline closeOff(role: i32): i32 {
    return this.field(role, 4);
  }
  @inline closeLen(role: i32): i32 {
    return this.field(role, 5);
  }

  /** The role whose name equals the n bytes at p, or -1. */
  findRole(p: usize, n: i32): i32 {
    for (let r = 0; r < this.roleCount; r++) {
      if (this.nameLen(r) === n && memory.compare(this.base + <usize>this.nameOff(r), p, <usize>n) === 0)
        return r;
    }
    return -1;
  }
}

/** Reads one length-prefixed string at `pos`; returns the position after it or a negative error. */
function readStr(base: usize, len: i32, pos: i32, max: i32, out: usize): i32 {
  if (pos > len - 4) return TPL_ERR_SHORT;
  const n = load<u32>(base + <usize>pos);
  if (n > <u32>max) return TPL_ERR_LIMIT;
  const start = pos + 4;
  if (<i32>n > len - start) return TPL_ERR_SHORT;
  store<i32>(out, start);
  store<i32>(out, <i32>n, 4);
  return start + <i32>n;
}

/** Decodes the encoding at [ptr, ptr+len). Returns null (and sets templateError) if malformed. */
export function decodeSegmentTemplate(ptr: usize, len: i32): SegmentTemplate | null {
  templateError = 0;
  if (len < 8) return fail(TPL_ERR_SHORT);
  if (len > MAX_TEMPLATE_BYTES) return fail(TPL_ERR_LIMIT);
  if (load<u32>(ptr) !== TEMPLATE_MAGIC) return fail(TPL_ERR_MAGIC);
  if (load<u8>(ptr, 4) !== TEMPLATE_VERSION) return fail(TPL_ERR_VERSION);
  const flags = load<u8>(ptr, 5);
  const think = load<u8>(ptr, 6);
  const roleCount = <i32>load<u8>(ptr, 7);
  if ((flags & ~(FLAG_TRIM_CONTENT | FLAG_DEFAULT_SYSTEM)) !== 0 || think > THINK_QWEN3)
    return fail(TPL_ERR_FLAGS);
  if (roleCount > MAX_ROLES) return fail(TPL_ERR_LIMIT);

  const data = new ArrayBuffer(len);
  const base = changetype<usize>(data);
  memory.copy(base, ptr, <usize>len);
  const t = new SegmentTemplate(data);
  t.trimContent = (flags & FLAG_TRIM_CONTENT) !== 0;
  t.think = think;
  t.roleCount = roleCount;
  const pair = memory.data(8);
  let pos = readStr(base, len, 8, MAX_TEMPLATE_STRING, pair);
  if (pos < 0) return fail(pos);
  t.prefixOff = load<i32>(pair);
  t.prefixLen = load<i32>(pair, 4);
  pos = readStr(base, len, pos, MAX_TEMPLATE_STRING, pair);
  if (pos < 0) return fail(pos);
  t.genOff = load<i32>(pair);
  t.genLen = load<i32>(pair, 4);
  if ((flags & FLAG_DEFAULT_SYSTEM) !== 0) {
    pos = readStr(base, len, pos, MAX_TEMPLATE_STRING, pair);
    if (pos < 0) return fail(pos);
    t.defaultSystemOff = load<i32>(pair);
    t.defaultSystemLen = load<i32>(pair, 4);
  }
  const table = t.roleTable;
  for (let r = 0; r < roleCount; r++) {
    const rec = table + <usize>(r * ROLE_RECORD);
    pos = readStr(base, len, pos, MAX_ROLE_NAME, rec);
    if (pos < 0) return fail(pos);
    if (load<i32>(rec, 4) === 0) return fail(TPL_ERR_LIMIT);
    pos = readStr(base, len, pos, MAX_TEMPLATE_STRING, rec + 8);
    if (pos < 0) return fail(pos);
    pos = readStr(base, len, pos, MAX_TEMPLATE_STRING, rec + 16);
    if (pos < 0) return fail(pos);
    const namePtr = base + <usize>load<i32>(rec);
    const nameLen = load<i32>(rec, 4);
    // findRole only sees the roles decoded so far, because roleCount grows with r below.
    t.roleCount = r;
    if (t.findRole(namePtr, nameLen) >= 0) return fail(TPL_ERR_DUPLICATE_ROLE);
    t.roleCount = r + 1;
  }
  if (pos !== len) return fail(TPL_ERR_TRAILING);
  t.systemRole = findLiteral(t, "system");
  t.assistantRole = findLiteral(t, "assistant");
  return t;
}

function fail(code: i32): SegmentTemplate | null {
  templateError = code;
  return null;
}

function findLiteral(t: SegmentTemplate, s: string): i32 {
  for (let r = 0; r < t.roleCount; r++) {
    const n = t.nameLen(r);
    if (n !== s.length) continue;
    let same = true;
    const p = t.base + <usize>t.nameOff(r);
    for (let i = 0; i < n; i++) {
      if (<i32>load<u8>(p + <usize>i) !== <i32>s.charCodeAt(i)) {
        same = false;
        break;
      }
    }
    if (same) return r;
  }
  return -1;
}
