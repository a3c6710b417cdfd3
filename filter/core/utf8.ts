// UTF-8 well-formedness (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF) and the
// whitespace set of Python's str.strip(), which Jinja's `trim` uses in the engine.

/**
 * Length of the well-formed multi-byte sequence starting at `p` (whose first byte is ≥ 0x80),
 * or 0 when it is malformed or runs past `end`.
 */
export function utf8SeqLen(p: usize, end: usize): i32 {
  const b0 = <u32>load<u8>(p);
  if (b0 < 0xc2) return 0; // continuation byte or overlong 2-byte lead
  if (b0 < 0xe0) {
    if (p + 2 > end) return 0;
    return (<u32>load<u8>(p, 1) & 0xc0) === 0x80 ? 2 : 0;
  }
  if (b0 < 0xf0) {
    if (p + 3 > end) return 0;
    const b1 = <u32>load<u8>(p, 1);
    const b2 = <u32>load<u8>(p, 2);
    if ((b1 & 0xc0) !== 0x80 || (b2 & 0xc0) !== 0x80) return 0;
    if (b0 === 0xe0 && b1 < 0xa0) return 0; // overlong
    if (b0 === 0xed && b1 >= 0xa0) return 0; // UTF-16 surrogate
    return 3;
  }
  if (b0 < 0xf5) {
    if (p + 4 > end) return 0;
    const b1 = <u32>load<u8>(p, 1);
    if (
      (b1 & 0xc0) !== 0x80 ||
      (<u32>load<u8>(p, 2) & 0xc0) !== 0x80 ||
      (<u32>load<u8>(p, 3) & 0xc0) !== 0x80
    ) {
      return 0;
    }
    if (b0 === 0xf0 && b1 < 0x90) return 0; // overlong
    if (b0 === 0xf4 && b1 >= 0x90) return 0; // past U+10FFFF
    return 4;
  }
  return 0;
}

/** Writes code point `cp` (≤ U+10FFFF, not a surrogate) as UTF-8 at `dst`; returns the byte count. */
export function writeUtf8(dst: usize, cp: u32): i32 {
  if (cp < 0x80) {
    store<u8>(dst, <u8>cp);
    return 1;
  }
  if (cp < 0x800) {
    store<u8>(dst, <u8>(0xc0 | (cp >> 6)));
    store<u8>(dst, <u8>(0x80 | (cp & 0x3f)), 1);
    return 2;
  }
  if (cp < 0x10000) {
    store<u8>(dst, <u8>(0xe0 | (cp >> 12)));
    store<u8>(dst, <u8>(0x80 | ((cp >> 6) & 0x3f)), 1);
    store<u8>(dst, <u8>(0x80 | (cp & 0x3f)), 2);
    return 3;
  }
  store<u8>(dst, <u8>(0xf0 | (cp >> 18)));
  store<u8>(dst, <u8>(0x80 | ((cp >> 12) & 0x3f)), 1);
  store<u8>(dst, <u8>(0x80 | ((cp >> 6) & 0x3f)), 2);
  store<u8>(dst, <u8>(0x80 | (cp & 0x3f)), 3);
  return 4;
}

function isAsciiPyWs(c: u32): bool {
  // \t \n \v \f \r, the four information separators U+001C–U+001F, and space.
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20);
}

/** Is the 3-byte sequence b0 b1 b2 a Python whitespace code point? */
function isPyWs3(b0: u32, b1: u32, b2: u32): bool {
  if (b0 === 0xe2) {
    if (b1 === 0x80) return b2 <= 0x8a || b2 === 0xa8 || b2 === 0xa9 || b2 === 0xaf; // U+2000–200A, 2028, 2029, 202F
    return b1 === 0x81 && b2 === 0x9f; // U+205F
  }
  if (b0 === 0xe1) return b1 === 0x9a && b2 === 0x80; // U+1680
  return b0 === 0xe3 && b1 === 0x80 && b2 === 0x80; // U+3000
}

/** Byte length of the Python whitespace character starting at `p` (well-formed UTF-8), or 0. */
export function pyWsLenAt(p: usize, end: usize): i32 {
  const b0 = <u32>load<u8>(p);
  if (b0 < 0x80) return isAsciiPyWs(b0) ? 1 : 0;
  if (b0 === 0xc2) {
    if (p + 2 > end) return 0;
    const b1 = <u32>load<u8>(p, 1);
    return b1 === 0x85 || b1 === 0xa0 ? 2 : 0; // U+0085, U+00A0
  }
  if (b0 >= 0xe1 && b0 <= 0xe3) {
    if (p + 3 > end) return 0;
    return isPyWs3(b0, <u32>load<u8>(p, 1), <u32>load<u8>(p, 2)) ? 3 : 0;
  }
  return 0;
}

/** Byte length of the Python whitespace character ending just before `p` (not before `start`), or 0. */
export function pyWsLenBefore(start: usize, p: usize): i32 {
  const last = <u32>load<u8>(p - 1);
  if (last < 0x80) return isAsciiPyWs(last) ? 1 : 0;
  // Lead bytes are never continuation bytes, so matching the whole pattern backwards is exact.
  if (p - start >= 2 && load<u8>(p - 2) === 0xc2 && (last === 0x85 || last === 0xa0)) return 2;
  if (p - start >= 3 && isPyWs3(<u32>load<u8>(p - 3), <u32>load<u8>(p - 2), last)) return 3;
  return 0;
}
