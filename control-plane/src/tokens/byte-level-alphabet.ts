// GPT-2's byte ↔ unicode alphabet, used by every byte-level BPE vocabulary (Qwen, Llama-3,
// GPT-2, …). Each of the 256 byte values is drawn as one printable code point so a
// vocabulary can be stored as JSON strings: printable Latin-1 bytes map to themselves, the
// other 68 bytes (controls, space, 0x7F–0xA0, 0xAD) to U+0100, U+0101, … in byte order.
// Source of truth: `bytes_to_unicode()` in openai/gpt-2 encoder.py and HF tokenizers'
// byte_level.rs, which both build the table exactly this way.

function isPrintableByte(b: number): boolean {
  return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

/** byteToCodePoint[b] = the code point that stands for byte b in vocabulary strings. */
export const byteToCodePoint: readonly number[] = (() => {
  const table: number[] = new Array(256);
  let next = 256;
  for (let b = 0; b < 256; b++) table[b] = isPrintableByte(b) ? b : next++;
  return table;
})();

/** code point → byte, or -1 when the code point is not part of the alphabet. All are < 0x144. */
export const codePointToByte: Int16Array = (() => {
  const table = new Int16Array(0x144).fill(-1);
  byteToCodePoint.forEach((cp, b) => {
    table[cp] = b;
  });
  return table;
})();

/**
 * The bytes a byte-level vocabulary string stands for, or null when it contains a character
 * outside the alphabet (a malformed vocabulary entry: the caller marks that id unusable).
 */
export function byteLevelStringToBytes(token: string): Uint8Array | null {
  const out = new Uint8Array(token.length);
  for (let i = 0; i < token.length; i++) {
    const cp = token.charCodeAt(i);
    const b = cp < codePointToByte.length ? (codePointToByte[cp] as number) : -1;
    if (b < 0) return null;
    out[i] = b;
  }
  return out;
}
