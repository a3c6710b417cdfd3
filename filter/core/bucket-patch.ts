// Row patches of prefix-index bucket images (docs/wire-format.md §4.4, §5): what changed in a
// bucket between two publications, sent to gateways instead of the whole image. A bucket of 8
// rows is ~200 bytes at 64 slots and ~1 KB at 800, while a KV event changes one row of it; the
// control plane's sync volume was whole images for every dirty bucket (docs/scaling.md).
//
// Both ends apply a patch with the same function here, so the gateway's image stays byte for
// byte the control plane's: a put overwrites the row with the same (hash, tier) in place or
// appends it; a drop moves the last row into the dropped one's place.
//
// Patch: slotWords u8, reserved u8, op count u16, then ops — put: 1 u8 and a whole row
// (16 + 8·slotWords bytes); drop: 2 u8, hash u64, tier u8.
import { ByteBuf } from "./byte-buf";

export const PATCH_HEADER: i32 = 4;
const IMAGE_HEADER: i32 = 4;
const OP_PUT: u8 = 1;
const OP_DROP: u8 = 2;
const DROP_BYTES: i32 = 10;
const MAX_ROWS: i32 = 255;
const MAX_OPS: i32 = 0xffff;

export const PATCH_ERR_IMAGE: i32 = -1;
export const PATCH_ERR_PATCH: i32 = -2;
export const PATCH_ERR_WIDTH: i32 = -3;
export const PATCH_ERR_ROW: i32 = -4;

function rowBytes(slotWords: i32): i32 {
  return 16 + (slotWords << 3);
}

/** Row count of a well-formed image at [ptr, ptr+len) (len 0: absent, no rows), else -1. */
function rowsOf(ptr: usize, len: i32): i32 {
  if (len === 0) return 0;
  if (len < IMAGE_HEADER) return -1;
  const n = <i32>load<u8>(ptr);
  const words = <i32>load<u8>(ptr, 1);
  return words >= 1 && len === IMAGE_HEADER + n * rowBytes(words) ? n : -1;
}

/** Index of the row with (hash, tier) among the image's n rows, or -1. */
function findRow(ptr: usize, n: i32, size: i32, hash: u64, tier: u8): i32 {
  for (let i = 0; i < n; i++) {
    const row = ptr + <usize>(IMAGE_HEADER + i * size);
    if (load<u64>(row) === hash && load<u8>(row, 12) === tier) return i;
  }
  return -1;
}

/**
 * The ops that turn image `old` into one with `fresh`'s rows (either may be absent: len 0),
 * written to `out`; returns the patch length, 0 when nothing changed, or a PATCH_ERR_* code.
 */
export function diffBucket(old: usize, oldLen: i32, fresh: usize, freshLen: i32, out: ByteBuf): i32 {
  const n = rowsOf(old, oldLen);
  const m = rowsOf(fresh, freshLen);
  if (n < 0 || m < 0) return PATCH_ERR_IMAGE;
  // The width of the fresh image (rowsOf checked it), else of the held one.
  const words = freshLen > 0 ? <i32>load<u8>(fresh, 1) : n > 0 ? <i32>load<u8>(old, 1) : 1;
  if (n > 0 && <i32>load<u8>(old, 1) !== words) return PATCH_ERR_WIDTH;
  const size = rowBytes(words);
  out.len = 0;
  out.reserve(PATCH_HEADER);
  out.len = PATCH_HEADER;
  let ops = 0;
  for (let i = 0; i < n; i++) {
    const row = old + <usize>(IMAGE_HEADER + i * size);
    const hash = load<u64>(row);
    const tier = load<u8>(row, 12);
    if (findRow(fresh, m, size, hash, tier) >= 0) continue;
    out.reserve(DROP_BYTES);
    const o = out.ptr + <usize>out.len;
    store<u8>(o, OP_DROP);
    store<u64>(o, hash, 1);
    store<u8>(o, tier, 9);
    out.len += DROP_BYTES;
    ops++;
  }
  for (let j = 0; j < m; j++) {
    const row = fresh + <usize>(IMAGE_HEADER + j * size);
    const i = findRow(old, n, size, load<u64>(row), load<u8>(row, 12));
    if (i >= 0 && memory.compare(row, old + <usize>(IMAGE_HEADER + i * size), <usize>size) === 0) continue;
    out.reserve(1 + size);
    const o = out.ptr + <usize>out.len;
    store<u8>(o, OP_PUT);
    memory.copy(o + 1, row, <usize>size);
    out.len += 1 + size;
    ops++;
  }
  if (ops === 0) {
    out.len = 0;
    return 0;
  }
  if (ops > MAX_OPS) return PATCH_ERR_PATCH;
  store<u8>(out.ptr, <u8>words);
  store<u8>(out.ptr, 0, 1);
  store<u16>(out.ptr, <u16>ops, 2);
  return out.len;
}

/**
 * Applies `patch` to image `image` (len 0: absent, an empty image of the patch's width), writing
 * the new image to `out`; returns its length or a PATCH_ERR_* code (then `out` means nothing and
 * the caller resynchronises the whole bucket).
 */
export function applyBucketPatch(
  image: usize,
  imageLen: i32,
  patch: usize,
  patchLen: i32,
  out: ByteBuf,
): i32 {
  if (patchLen < PATCH_HEADER) return PATCH_ERR_PATCH;
  const words = <i32>load<u8>(patch);
  const ops = <i32>load<u16>(patch, 2);
  let n = rowsOf(image, imageLen);
  if (n < 0) return PATCH_ERR_IMAGE;
  if (words < 1 || (imageLen > 0 && <i32>load<u8>(image, 1) !== words)) return PATCH_ERR_WIDTH;
  const size = rowBytes(words);
  out.len = 0;
  out.reserve(IMAGE_HEADER + MAX_ROWS * size);
  const o = out.ptr;
  if (imageLen > 0) memory.copy(o, image, <usize>imageLen);
  let p = patch + <usize>PATCH_HEADER;
  const end = patch + <usize>patchLen;
  for (let k = 0; k < ops; k++) {
    if (p >= end) return PATCH_ERR_PATCH;
    const kind = load<u8>(p);
    if (kind === OP_PUT) {
      if (p + 1 + <usize>size > end) return PATCH_ERR_PATCH;
      const row = p + 1;
      const i = findRow(o, n, size, load<u64>(row), load<u8>(row, 12));
      if (i < 0 && n === MAX_ROWS) return PATCH_ERR_ROW;
      memory.copy(o + <usize>(IMAGE_HEADER + (i >= 0 ? i : n) * size), row, <usize>size);
      if (i < 0) n++;
      p += 1 + <usize>size;
    } else if (kind === OP_DROP) {
      if (p + <usize>DROP_BYTES > end) return PATCH_ERR_PATCH;
      const i = findRow(o, n, size, load<u64>(p, 1), load<u8>(p, 9));
      if (i < 0) return PATCH_ERR_ROW;
      n--;
      if (i !== n)
        memory.copy(o + <usize>(IMAGE_HEADER + i * size), o + <usize>(IMAGE_HEADER + n * size), <usize>size);
      p += <usize>DROP_BYTES;
    } else return PATCH_ERR_PATCH;
  }
  if (p !== end) return PATCH_ERR_PATCH;
  store<u8>(o, <u8>n);
  store<u8>(o, <u8>words, 1);
  store<u16>(o, 0, 2);
  out.len = IMAGE_HEADER + n * size;
  return out.len;
}
