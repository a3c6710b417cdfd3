// Python's str.strip/lstrip/rstrip, which the engine's Jinja (Python jinja2) runs when a chat
// template says `content | trim` or `content.lstrip('\n')`. JS trim() uses another whitespace
// set (it strips U+FEFF, keeps U+0085 and U+001C–U+001F) and @huggingface/jinja 0.5 ignores
// the `chars` argument of strip/lstrip/rstrip, so both are re-done here exactly.

/** Code points for which Python's str.isspace() is true (what strip() removes by default). */
export const PYTHON_WHITESPACE: ReadonlySet<number> = new Set([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002,
  0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
]);

function codePoints(chars: string): Set<number> {
  const set = new Set<number>();
  for (const ch of chars) set.add(ch.codePointAt(0) as number);
  return set;
}

/**
 * `s.strip(chars)` (both ends), `lstrip` (left only) or `rstrip` (right only), by code point.
 * `chars` null/undefined means Python's whitespace set.
 */
export function pythonStrip(
  s: string,
  chars: string | null | undefined,
  side: "both" | "left" | "right" = "both",
): string {
  const set = chars == null ? PYTHON_WHITESPACE : codePoints(chars);
  let start = 0;
  let end = s.length;
  if (side !== "right") {
    while (start < end) {
      const cp = s.codePointAt(start) as number;
      if (!set.has(cp)) break;
      start += cp > 0xffff ? 2 : 1;
    }
  }
  if (side !== "left") {
    while (end > start) {
      let cp = s.charCodeAt(end - 1);
      let width = 1;
      if (cp >= 0xdc00 && cp <= 0xdfff && end - 2 >= start) {
        const hi = s.charCodeAt(end - 2);
        if (hi >= 0xd800 && hi <= 0xdbff) {
          cp = s.codePointAt(end - 2) as number;
          width = 2;
        }
      }
      if (!set.has(cp)) break;
      end -= width;
    }
  }
  return s.slice(start, end);
}
