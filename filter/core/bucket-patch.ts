// Row patches of prefix-index bucket images (docs/wire-format.md §4.4, §5.1): what changed in a
// bucket between two publications, sent to gateways instead of the whole image. A KV event changes
// one row of a bucket, and a bucket holds tens of rows at hundreds of slots.
//
// Both ends apply a patch with the same function here, so the gateway's image stays byte for
// byte the control plane's: a put overwrites the row with the same (hash, tier, segment) in place
// or appends it; a drop moves the last row into the dropped one's place.
//
// Image: 0 u8, 0 u8 (format: segment rows), row count u16, then 16-byte rows — hash u64, depth
// u16, tier u8, segment u8, slot bits u32. Patch: 0 u8 (format), 0 u8, op count u16, then ops —
// put: 1 u8 and a row; drop: 2 u8, hash u64, tier u8, segment u8.
import { ByteBuf } from "./byte-buf";

export const PATCH_HEADER: i32 = 4;
const IMAGE_HEADER: i32 = 4;
const ROW: i32 = 16;
const OP_PUT: u8 = 1;
const OP_DROP: u8 = 2;
const PUT_BYTES: i32 = 1 + ROW;
const DROP_BYTES: i32 = 11;
/** As bucket-encode.ts MAX_ROWS: no image holds more. */
const MAX_ROWS: i32 = 4096;
const MAX_OPS: i32 = 0xffff;

export const PATCH_ERR_IMAGE: i32 = -1;
export const PATCH_ERR_PATCH: i32 = -2;
export const PATCH_ERR_WIDTH: i32 = -3;
export const PATCH_ERR_ROW: i32 = -4;

/** Row count of a well-formed image at [ptr, ptr+len) (len 0: absent, no rows), else -1. */
function rowsOf(ptr: usize, len: i32): i32 {
  if (len === 0) return 0;
  if (len < IMAGE_HEADER || load<u16>(ptr) !== 0) return -1;
  const n = <i32>load<u16>(ptr, 2);
  return n <= MAX_ROWS && len === IMAGE_HEADER + n * ROW ? n : -1;
}

/** Index of the row with (hash, tier, segment) — the u16 at 10 — among the image's n rows, or -1. */
export function findRow(ptr: usize, n: i32, hash: u64, key: u16): i32 {
  for (let i = 0; i < n; i++) {
    const row = ptr + <usize>(IMAGE_HEADER + i * ROW);
    if (load<u64>(row) === hash && load<u16>(row, 10) === key) return i;
  }
  return -1;
}

/** Appends a drop of row (hash, key: tier and segment as the u16 at 10) to the patch in `out`. */
export function appendDrop(out: ByteBuf, hash: u64, key: u16): void {
  out.reserve(DROP_BYTES);
  const o = out.ptr + <usize>out.len;
  store<u8>(o, OP_DROP);
  store<u64>(o, hash, 1);
  store<u16>(o, key, 9);
  out.len += DROP_BYTES;
}

/** Appends a put of the 16-byte row at `row` to the patch in `out`. */
export function appendPut(out: ByteBuf, row: usize): void {
  out.reserve(PUT_BYTES);
  const o = out.ptr + <usize>out.len;
  store<u8>(o, OP_PUT);
  memory.copy(o + 1, row, <usize>ROW);
  out.len += PUT_BYTES;
}

/**
 * The ops that turn image `old` into one with `fresh`'s rows (either may be absent: len 0),
 * written to `out`; returns the patch length, 0 when nothing changed, or a PATCH_ERR_* code.
 */
export function diffBucket(old: usize, oldLen: i32, fresh: usize, freshLen: i32, out: ByteBuf): i32 {
  const n = rowsOf(old, oldLen);
  const m = rowsOf(fresh, freshLen);
  if (n < 0 || m < 0) return PATCH_ERR_IMAGE;
  out.len = 0;
  out.reserve(PATCH_HEADER);
  out.len = PATCH_HEADER;
  let ops = 0;
  for (let i = 0; i < n; i++) {
    const row = old + <usize>(IMAGE_HEADER + i * ROW);
    const hash = load<u64>(row);
    const key = load<u16>(row, 10);
    if (findRow(fresh, m, hash, key) >= 0) continue;
    appendDrop(out, hash, key);
    ops++;
  }
  for (let j = 0; j < m; j++) {
    const row = fresh + <usize>(IMAGE_HEADER + j * ROW);
    const i = findRow(old, n, load<u64>(row), load<u16>(row, 10));
    if (i >= 0 && memory.compare(row, old + <usize>(IMAGE_HEADER + i * ROW), <usize>ROW) === 0) continue;
    appendPut(out, row);
    ops++;
  }
  if (ops === 0) {
    out.len = 0;
    return 0;
  }
  if (ops > MAX_OPS) return PATCH_ERR_PATCH;
  store<u16>(out.ptr, 0);
  store<u16>(out.ptr, <u16>ops, 2);
  return out.len;
}

/**
 * Applies `patch` to image `image` (len 0: absent, an empty image), writing the new image to
 * `out`; returns its length or a PATCH_ERR_* code (then `out` means nothing and the caller
 * resynchronises the whole bucket).
 */
export function applyBucketPatch(
  image: usize,
  imageLen: i32,
  patch: usize,
  patchLen: i32,
  out: ByteBuf,
): i32 {
  if (patchLen < PATCH_HEADER) return PATCH_ERR_PATCH;
  // Byte 0 is the format (a patch of the earlier bitmap rows named its width there).
  if (load<u16>(patch) !== 0) return PATCH_ERR_WIDTH;
  const ops = <i32>load<u16>(patch, 2);
  let n = rowsOf(image, imageLen);
  if (n < 0) return PATCH_ERR_IMAGE;
  out.len = 0;
  // Each put adds at most one row: the image grows by less than the patch's length.
  out.reserve(IMAGE_HEADER + n * ROW + patchLen);
  const o = out.ptr;
  if (imageLen > 0) memory.copy(o, image, <usize>imageLen);
  let p = patch + <usize>PATCH_HEADER;
  const end = patch + <usize>patchLen;
  for (let k = 0; k < ops; k++) {
    if (p >= end) return PATCH_ERR_PATCH;
    const kind = load<u8>(p);
    if (kind === OP_PUT) {
      if (p + <usize>PUT_BYTES > end) return PATCH_ERR_PATCH;
      const row = p + 1;
      const i = findRow(o, n, load<u64>(row), load<u16>(row, 10));
      if (i < 0 && n === MAX_ROWS) return PATCH_ERR_ROW;
      memory.copy(o + <usize>(IMAGE_HEADER + (i >= 0 ? i : n) * ROW), row, <usize>ROW);
      if (i < 0) n++;
      p += <usize>PUT_BYTES;
    } else if (kind === OP_DROP) {
      if (p + <usize>DROP_BYTES > end) return PATCH_ERR_PATCH;
      const i = findRow(o, n, load<u64>(p, 1), load<u16>(p, 9));
      if (i < 0) return PATCH_ERR_ROW;
      n--;
      if (i !== n)
        memory.copy(o + <usize>(IMAGE_HEADER + i * ROW), o + <usize>(IMAGE_HEADER + n * ROW), <usize>ROW);
      p += <usize>DROP_BYTES;
    } else return PATCH_ERR_PATCH;
  }
  if (p !== end) return PATCH_ERR_PATCH;
  store<u16>(o, 0);
  store<u16>(o, <u16>n, 2);
  out.len = IMAGE_HEADER + n * ROW;
  return out.len;
}
