// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// JSON strings: validation while scanning (escapes, control characters, UTF-8) and decoding a
// validated span to the exact UTF-8 bytes the engine's Python json.loads would produce.
import { ByteBuf } from "./byte-buf";
import { ERR_SYNTAX, ERR_TRUNCATED, ERR_UTF8 } from "./errors";
import { utf8SeqLen, writeUtf8 } from "./utf8";

// Byte-broadcast masks, written as two halves so the TypeScript-side linter can represent them.
const ONES: u64 = ((<u64>0x01010101) << 32) | 0x01010101;
const HIGHS: u64 = ((<u64>0x80808080) << 32) | 0x80808080;
const QUOTES: u64 = ((<u64>0x22222222) << 32) | 0x22222222;
const BACKSLASHES: u64 = ((<u64>0x5c5c5c5c) << 32) | 0x5c5c5c5c;
const SPACES: u64 = ((<u64>0x20202020) << 32) | 0x20202020;

/** Byte a simple escape `\\x` decodes to, indexed by x; 0 where `\\x` is no JSON escape (u is separate). */
// biome-ignore format: a 16-wide table reads best
const SIMPLE_ESCAPES = memory.data<u8>([
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0x22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2f,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x5c, 0, 0, 0,
  0, 0, 0x08, 0, 0, 0, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0,
  0, 0, 0x0d, 0, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  // 0x80–0xff: never an escape
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
]);

/** Length of the UTF-8 sequence a lead byte starts (0: not a valid lead). */
// biome-ignore format: a 32-wide table reads best
const SEQ_LEN = memory.data<u8>([
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
  3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
]);

/** Allowed second byte per lead: low byte = minimum, high byte = width − 1 (E0, ED, F0, F4 are narrower). */
// biome-ignore format: a 16-wide table reads best
const SECOND_BYTE = memory.data<u16>([
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
  0x1fa0, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x1f80, 0x3f80, 0x3f80,
  0x2f90, 0x3f80, 0x3f80, 0x3f80, 0x0f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80,
]);

/** Continuation-byte mask / expected value over bytes 1–3 by sequence length (0 and 1 never match). */
const CONT_MASK = memory.data<u32>([0, 0, 0x0000c000, 0x00c0c000, 0xc0c0c000]);
const CONT_EXPECT = memory.data<u32>([1, 1, 0x00008000, 0x00808000, 0x80808000]);

/** Set by scanString: whether the string just scanned contains a backslash escape. */
export let stringHasEscape: bool = false;

/** Value of an ASCII hex digit, or -1. */
export function hexVal(c: u32): i32 {
  if (c - 0x30 < 10) return <i32>(c - 0x30);
  const l = c | 0x20;
  if (l - 0x61 < 6) return <i32>(l - 0x61 + 10);
  return -1;
}

/** The four hex digits at p (bounds already checked), or -1. */
function hex4(p: usize): i32 {
  const a = hexVal(<u32>load<u8>(p));
  const b = hexVal(<u32>load<u8>(p, 1));
  const c = hexVal(<u32>load<u8>(p, 2));
  const d = hexVal(<u32>load<u8>(p, 3));
  if ((a | b | c | d) < 0) return -1;
  return (a << 12) | (b << 8) | (c << 4) | d;
}

/**
 * Scans a string whose opening quote precedes `p`. Returns the address of the closing quote, or
 * a negative error code. Eight bytes at a time while none is a quote, backslash, control
 * character or non-ASCII byte (SWAR: SIMD is not enabled in our build).
 */
export function scanString(p: usize, end: usize): isize {
  let escaped = false;
  while (p < end) {
    // special = high bit of every byte that is '"', '\\', < 0x20 or ≥ 0x80. The usual `& ~x`
    // of the zero-byte test is not needed: the high bit of q, b and w agree, and bytes ≥ 0x80
    // are wanted anyway. Borrows only flag bytes above a real hit, so the lowest flag is exact.
    // One 8-byte test first (dense text: the special is usually within it), and only after a
    // clean word 16-byte strides (sparse text).
    if (p + 8 <= end) {
      const w = load<u64>(p);
      const special = (((w ^ QUOTES) - ONES) | ((w ^ BACKSLASHES) - ONES) | (w - SPACES) | w) & HIGHS;
      if (special === 0) {
        p += 8;
        while (p + 16 <= end) {
          const a = load<u64>(p);
          const b = load<u64>(p, 8);
          const s1 = ((a ^ QUOTES) - ONES) | ((a ^ BACKSLASHES) - ONES) | (a - SPACES) | a;
          const s2 = ((b ^ QUOTES) - ONES) | ((b ^ BACKSLASHES) - ONES) | (b - SPACES) | b;
          if (((s1 | s2) & HIGHS) !== 0) break;
          p += 16;
        }
        continue;
      }
      // Jump straight to the first special byte instead of testing the ones before it.
      p += <usize>(ctz<u64>(special) >> 3);
    }
    if (p >= end) break;
    const c = <u32>load<u8>(p);
    if (c === 0x22) {
      stringHasEscape = escaped;
      return <isize>p;
    }
    if (c === 0x5c) {
      escaped = true;
      if (p + 1 >= end) return ERR_TRUNCATED;
      const e = <u32>load<u8>(p, 1);
      if (e === 0x75) {
        if (p + 6 > end) return ERR_TRUNCATED;
        if (hex4(p + 2) < 0) return ERR_SYNTAX;
        p += 6;
      } else if (load<u8>(SIMPLE_ESCAPES + <usize>e) !== 0) {
        p += 2;
      } else {
        return ERR_SYNTAX;
      }
    } else if (c < 0x20) {
      return ERR_SYNTAX;
    } else if (c >= 0x80) {
      // Validate a whole run of non-ASCII characters here (CJK, emoji) rather than returning to
      // the 8-byte test after each one.
      let b0 = c;
      while (true) {
        if (b0 > 0xe0 && b0 < 0xed && p + 3 <= end && (<u32>load<u16>(p, 1) & 0xc0c0) === 0x8080) {
          p += 3; // the common 3-byte form (CJK): a well-predicted branch in CJK text
        } else if (p + 4 <= end) {
          // Branch-free check of one character (lengths vary unpredictably in mixed text):
          // its length from the lead byte, continuation bytes by mask, the lead's second-byte range.
          const n = <u32>load<u8>(SEQ_LEN + <usize>b0);
          const w = load<u32>(p);
          const r = <u32>load<u16>(SECOND_BYTE + ((<usize>b0) << 1));
          const contOk =
            (w & load<u32>(CONT_MASK + ((<usize>n) << 2))) === load<u32>(CONT_EXPECT + ((<usize>n) << 2));
          const secondOk = ((w >> 8) & 0xff) - (r & 0xff) <= r >> 8;
          if (!(contOk & secondOk)) return ERR_UTF8;
          p += <usize>n;
        } else {
          const n = utf8SeqLen(p, end);
          if (n === 0) return ERR_UTF8;
          p += <usize>n;
        }
        if (p >= end) break;
        b0 = <u32>load<u8>(p);
        if (b0 < 0x80) break;
      }
    } else {
      p += 1;
    }
  }
  return ERR_TRUNCATED;
}

/**
 * Appends the decoded bytes of the string span [p, p+len) (validated by scanString) to `out`.
 * Decoding never lengthens a string, so one reserve covers it. A lone surrogate escape becomes
 * U+FFFD (docs/wire-format.md §1).
 */
export function decodeString(p: usize, len: i32, escaped: bool, out: ByteBuf): void {
  out.reserve(len);
  if (!escaped) {
    memory.copy(out.ptr + <usize>out.len, p, <usize>len);
    out.len += len;
    return;
  }
  const end = p + <usize>len;
  let dst = out.ptr + <usize>out.len;
  while (p < end) {
    // Find the next backslash 16 bytes at a time, then copy the run before it.
    let q = p;
    while (q + 16 <= end) {
      const a = load<u64>(q) ^ BACKSLASHES;
      const b = load<u64>(q, 8) ^ BACKSLASHES;
      const ha = (a - ONES) & ~a & HIGHS;
      const hb = (b - ONES) & ~b & HIGHS;
      if ((ha | hb) !== 0) {
        q += ha !== 0 ? <usize>(ctz<u64>(ha) >> 3) : 8 + <usize>(ctz<u64>(hb) >> 3);
        break;
      }
      q += 16;
    }
    if (q + 16 > end) {
      while (q < end && load<u8>(q) !== 0x5c) q++;
    }
    const run = q - p;
    if (run < 16 && p + 16 <= end) {
      // Short runs: two word copies beat a bulk-memory call. They fit because the output
      // never runs ahead of the input (decoding only shortens) and 16 input bytes remain.
      store<u64>(dst, load<u64>(p));
      store<u64>(dst, load<u64>(p, 8), 8);
    } else if (run > 0) {
      memory.copy(dst, p, run);
    }
    dst += run;
    p = q;
    if (p >= end) break;
    if (p + 1 >= end) break; // a backslash cannot end a validated span; defensive
    const e = <u32>load<u8>(p, 1);
    if (e !== 0x75) {
      const c = load<u8>(SIMPLE_ESCAPES + <usize>e);
      store<u8>(dst, c);
      dst += 1;
      p += 2;
      continue;
    }
    if (p + 6 > end) break;
    let cp = hex4(p + 2);
    p += 6;
    if (cp < 0) cp = 0xfffd;
    if (cp >= 0xd800 && cp <= 0xdbff) {
      // A high surrogate counts only with a directly following low-surrogate escape.
      if (p + 6 <= end && load<u8>(p) === 0x5c && load<u8>(p, 1) === 0x75) {
        const lo = hex4(p + 2);
        if (lo >= 0xdc00 && lo <= 0xdfff) {
          cp = 0x10000 + (((cp - 0xd800) << 10) | (lo - 0xdc00));
          p += 6;
        } else {
          cp = 0xfffd;
        }
      } else {
        cp = 0xfffd;
      }
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      cp = 0xfffd;
    }
    dst += <usize>writeUtf8(dst, <u32>cp);
  }
  out.len = <i32>(dst - out.ptr);
}
