// The engine's served cached prefix, read from a response as it streams past: the value of
// `usage.prompt_tokens_details.cached_tokens` in a JSON body, or in the SSE events of a stream
// (vLLM sends usage in the final event when `stream_options.include_usage` is set). Responses go
// to the client as they come, so nothing is buffered: a small state machine whose whole state
// lives in this object (a key or a number may straddle two chunks) reads each document that may
// hold the path; an SSE line without the bytes `"usage"` is only searched for them, eight bytes
// at a time. Every byte is looked at — whether a byte is inside a string, and whether its
// document is well formed, depends on all the bytes before it, so the tail of a chunk cannot be
// read alone. (Most of what reading an answer costs is the host's copy of each chunk into the VM,
// one call per chunk, not this scan: bench/results/hot-path.md.)
// Only that exact path counts — the same key in a message's content is inside a string, and the
// same key elsewhere in the tree is at another path. A document counts only once it is complete
// and well formed; a value that is not a plain non-negative decimal that fits u32 means "unknown".
// Bounded: at most `budget` bytes are looked at per response. Layout and semantics:
// docs/wire-format.md §6.1.

/** The body is one JSON document (`application/json`). */
export const USAGE_JSON: i32 = 1;
/** The body is server-sent events; each `data:` line is one JSON document (`text/event-stream`). */
export const USAGE_SSE: i32 = 2;

/** A complete document carried a `usage` object. */
export const SERVED_USAGE: u8 = 1;
/** A complete document carried `usage.prompt_tokens_details.cached_tokens` (the value in `cached`). */
export const SERVED_CACHED: u8 = 2;
/** The scan gave up at its byte budget before the response ended. */
export const SERVED_CUT: u8 = 4;
/** The answer was not read: a stream outside the sample (usageScanStreamSample). */
export const SERVED_UNREAD: u8 = 8;

// Lexer states.
const S_VALUE: i32 = 0; // a value may start
const S_KEY: i32 = 1; // a key (or `}`) may start
const S_COLON: i32 = 2; // after a key
const S_AFTER: i32 = 3; // after a value: `,` or a close
const S_STRING: i32 = 4; // inside a value string
const S_KEYSTR: i32 = 5; // inside a key string
const S_SCALAR: i32 = 6; // inside a number or literal nobody asked for
const S_NUMBER: i32 = 7; // inside the cached_tokens number
const S_END: i32 = 8; // the top-level value ended: only whitespace may follow
const S_BAD: i32 = 9; // not what an engine writes: ignore the rest of the document

// SSE line states (0…4: that many bytes of "data:" matched).
const L_PAYLOAD: i32 = 5;
const L_SKIP: i32 = 6;

/** Levels whose container kind is kept (bit d-1 of `kinds`); deeper levels are skipped loosely. */
const KIND_LEVELS: i32 = 31;
/** Deepest nesting followed at all; deeper is not an engine's answer. */
const MAX_DEPTH: i32 = 1 << 16;

const DATA_PREFIX = memory.data<u8>([0x64, 0x61, 0x74, 0x61, 0x3a]); // "data:"
const KEY_USAGE = memory.data<u8>([0x75, 0x73, 0x61, 0x67, 0x65]); // usage
// prompt_tokens_details
const KEY_DETAILS = memory.data<u8>([
  0x70, 0x72, 0x6f, 0x6d, 0x70, 0x74, 0x5f, 0x74, 0x6f, 0x6b, 0x65, 0x6e, 0x73, 0x5f, 0x64, 0x65, 0x74, 0x61,
  0x69, 0x6c, 0x73,
]);
// cached_tokens
const KEY_CACHED = memory.data<u8>([
  0x63, 0x61, 0x63, 0x68, 0x65, 0x64, 0x5f, 0x74, 0x6f, 0x6b, 0x65, 0x6e, 0x73,
]);

function keyPtr(depth: i32): usize {
  return depth === 1 ? KEY_USAGE : depth === 2 ? KEY_DETAILS : KEY_CACHED;
}

function keyLen(depth: i32): i32 {
  return depth === 1 ? 5 : depth === 2 ? 21 : 13;
}

function isSpace(c: u32): bool {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

// Eight bytes at a time (SWAR; SIMD is not enabled in our build): the high bit of each byte of
// zeroBytes(x) that is 0 — exact for the lowest one, which is the one wanted.
const ONES: u64 = 0x0101010101010101;
const HIGHS: u64 = 0x8080808080808080;
const QUOTES: u64 = 0x2222222222222222;
const BACKSLASHES: u64 = 0x5c5c5c5c5c5c5c5c;
const SPACES: u64 = 0x2020202020202020;
const LFS: u64 = 0x0a0a0a0a0a0a0a0a;
const CRS: u64 = 0x0d0d0d0d0d0d0d0d;
const US: u64 = 0x7575757575757575;

function zeroBytes(x: u64): u64 {
  return (x - ONES) & ~x & HIGHS;
}

/** The first byte at or after p that is a quote, a backslash or a control character, or end. */
function stringStop(p: usize, end: usize): usize {
  while (p + 8 <= end) {
    const w = load<u64>(p);
    const hit = zeroBytes(w ^ QUOTES) | zeroBytes(w ^ BACKSLASHES) | ((w - SPACES) & ~w & HIGHS);
    if (hit !== 0) return p + <usize>(ctz<u64>(hit) >> 3);
    p += 8;
  }
  while (p < end) {
    const d = <u32>load<u8>(p);
    if (d === 0x22 || d === 0x5c || d < 0x20) break;
    p++;
  }
  return p;
}

/** The first line break at or after p, or end. */
function lineStop(p: usize, end: usize): usize {
  while (p + 8 <= end) {
    const w = load<u64>(p);
    const hit = zeroBytes(w ^ LFS) | zeroBytes(w ^ CRS);
    if (hit !== 0) return p + <usize>(ctz<u64>(hit) >> 3);
    p += 8;
  }
  while (p < end) {
    const d = load<u8>(p);
    if (d === 0x0a || d === 0x0d) break;
    p++;
  }
  return p;
}

/**
 * The line break ending the line that starts at p, when it lies before end and the line has no
 * "usage" in it; 0 otherwise (the line must be read through the state machine).
 */
function plainLineEnd(p: usize, end: usize): usize {
  while (p < end) {
    if (p + 8 <= end) {
      const w = load<u64>(p);
      const hit = zeroBytes(w ^ LFS) | zeroBytes(w ^ CRS) | zeroBytes(w ^ US);
      if (hit === 0) {
        p += 8;
        continue;
      }
      p += <usize>(ctz<u64>(hit) >> 3);
    }
    const c = <u32>load<u8>(p);
    if (c === 0x0a || c === 0x0d) return p;
    // "sage" after a 'u' (0x65676173 little-endian); a 'u' too near the end counts as a match.
    if (c === 0x75 && (p + 5 > end || load<u32>(p + 1) === 0x65676173)) return 0;
    p++;
  }
  return 0;
}

function isLineBreak(c: u32): bool {
  return c === 0x0a || c === 0x0d;
}

/**
 * Whether [p, end) holds `"usage"`. Eight positions at a time: a quote whose next byte is a `u`
 * (rare in JSON) is a zero byte of (w ^ quotes) | (next w ^ u's); each such candidate is checked.
 */
function spellsUsage(p: usize, end: usize): bool {
  while (p + 9 <= end) {
    const hit = zeroBytes((load<u64>(p) ^ QUOTES) | (load<u64>(p + 1) ^ US));
    if (hit !== 0) {
      const at = p + <usize>(ctz<u64>(hit) >> 3);
      if (isUsageAt(at, end)) return true;
      p = at + 1;
      continue;
    }
    p += 8;
  }
  while (p < end) {
    if (isUsageAt(p, end)) return true;
    p++;
  }
  return false;
}

/** `"usage"` at p, all seven bytes before end. */
function isUsageAt(p: usize, end: usize): bool {
  // "usag" is 0x67617375 and `e"` 0x2265, little-endian.
  return (
    p + 7 <= end && load<u8>(p) === 0x22 && load<u32>(p + 1) === 0x67617375 && load<u16>(p + 5) === 0x2265
  );
}

/** Does the n bytes at p start with the ASCII literal `lit` (lower case), ignoring case? */
function startsWithNoCase(p: usize, n: i32, lit: string): bool {
  if (n < lit.length) return false;
  for (let i = 0; i < lit.length; i++) {
    let c = <u32>load<u8>(p + <usize>i);
    if (c - 0x41 < 26) c |= 0x20;
    if (c !== <u32>lit.charCodeAt(i)) return false;
  }
  return true;
}

/** The n bytes at p without the spaces and tabs around them: the start in `trimmedAt`. */
let trimmedAt: usize = 0;
function trimmedLength(p: usize, n: i32): i32 {
  let a = 0;
  let b = n;
  while (a < b && (load<u8>(p + <usize>a) === 0x20 || load<u8>(p + <usize>a) === 0x09)) a++;
  while (b > a && (load<u8>(p + <usize>(b - 1)) === 0x20 || load<u8>(p + <usize>(b - 1)) === 0x09)) b--;
  trimmedAt = p + <usize>a;
  return b - a;
}

/**
 * Which answers are read, from their headers: `content-type` (at p, n bytes; n < 0 = absent) and
 * `content-encoding` (at e, en bytes; en < 0 = absent). USAGE_JSON for application/json,
 * USAGE_SSE for text/event-stream (parameters allowed, any case), 0 for anything else or a
 * compressed body.
 */
export function usageModeOf(p: usize, n: i32, e: usize, en: i32): i32 {
  if (en >= 0) {
    const len = trimmedLength(e, en);
    if (len !== 8 || !startsWithNoCase(trimmedAt, len, "identity")) return 0;
  }
  if (n < 0) return 0;
  const len = trimmedLength(p, n);
  const at = trimmedAt;
  const mode = startsWithNoCase(at, len, "application/json")
    ? USAGE_JSON
    : startsWithNoCase(at, len, "text/event-stream")
      ? USAGE_SSE
      : 0;
  if (mode === 0) return 0;
  // The media type ends there: "application/jsonl" is another type.
  const k = mode === USAGE_JSON ? 16 : 17;
  if (len > k) {
    const c = load<u8>(at + <usize>k);
    if (c !== 0x3b && c !== 0x20 && c !== 0x09) return 0;
  }
  return mode;
}

// Unmanaged, like json-scan's RequestScan: a GC-managed `this` costs shadow-stack spills on every
// byte's path. The filter keeps a pool of them (one per answer being read).
@unmanaged
export class UsageScan {
  /** 0 = not scanning (nothing is read; also once finished), USAGE_JSON or USAGE_SSE. */
  mode: i32 = 0;
  /** Bytes the scan may still look at. */
  budget: u32 = 0;
  /** What the engine said: SERVED_* bits. */
  flags: u8 = 0;
  /** The served cached tokens (valid with SERVED_CACHED); the last complete document's wins. */
  cached: u32 = 0;
  /** Bytes looked at so far. */
  scanned: u32 = 0;

  // The document being read.
  private state: i32 = S_VALUE;
  private depth: i32 = 0;
  /** Bit d-1: level d is an object. */
  private kinds: u32 = 0;
  /** Levels 1…path are objects on the path top → usage → prompt_tokens_details. */
  private path: i32 = 0;
  private escape: bool = false;
  /** Bytes of the path key matched so far in the key being read; -1 = not that key. */
  private keyAt: i32 = -1;
  /** The key before the value about to start is the path key of this level. */
  private keyOk: bool = false;
  private num: u64 = 0;
  private numDigits: i32 = 0;
  private numOk: bool = false;
  private docUsage: bool = false;
  private docKnown: bool = false;
  private docCached: u32 = 0;
  // SSE framing.
  private line: i32 = 0;

  /** Starts a response; mode 0 reads nothing. */
  begin(mode: i32, budget: u32): void {
    this.mode = mode;
    this.budget = budget;
    this.flags = 0;
    this.cached = 0;
    this.scanned = 0;
    this.line = 0;
    this.beginDoc();
  }

  private beginDoc(): void {
    this.state = S_VALUE;
    this.depth = 0;
    this.kinds = 0;
    this.path = 0;
    this.escape = false;
    this.keyAt = -1;
    this.keyOk = false;
    this.docUsage = false;
    this.docKnown = false;
    this.docCached = 0;
  }

  /** A document ended: what it said counts if it was complete and well formed. */
  private endDoc(): void {
    if (this.state === S_END) {
      if (this.docUsage) this.flags |= SERVED_USAGE;
      if (this.docKnown) {
        this.flags |= SERVED_CACHED;
        this.cached = this.docCached;
      }
    }
    this.beginDoc();
  }

  /** The next n bytes of the body at p. */
  feed(p: usize, n: i32): void {
    if (this.mode === 0 || n <= 0) return;
    let take = <u32>n;
    if (take > this.budget) {
      take = this.budget;
      this.flags |= SERVED_CUT;
    }
    this.budget -= take;
    this.scanned += take;
    const end = p + <usize>take;
    if (this.mode === USAGE_SSE) this.feedSse(p, end);
    else this.feedJson(p, end);
  }

  /** Bytes went past that the scan did not look at (its budget ran out). */
  cut(): void {
    this.flags |= SERVED_CUT;
    this.budget = 0;
  }

  /**
   * The body ended (or the stream did): a last document without its newline still counts — unless
   * the budget cut it (what followed, unread, may have spoiled it).
   */
  finish(): void {
    const last = this.mode === USAGE_JSON || (this.mode === USAGE_SSE && this.line === L_PAYLOAD);
    if (last && (this.flags & SERVED_CUT) === 0) this.endDoc();
    this.mode = 0;
    this.budget = 0;
  }

  private feedJson(p: usize, end: usize): void {
    while (p < end) p = this.json(p, end, false);
  }

  private feedSse(p: usize, end: usize): void {
    // Whole lines — the usual chunk of a stream, one or more events: a line without `"usage"`
    // cannot carry the value (the path's first key, unescaped), so unless one spells it the
    // chunk needs one search and nothing else (no document state to keep: each line ends here).
    if (p < end && this.line === 0 && isLineBreak(<u32>load<u8>(end - 1)) && !spellsUsage(p, end)) return;
    while (p < end) {
      if (this.line === 0) {
        // A line that ends in this chunk without ever spelling "usage" cannot carry the value
        // (the path's first key, unescaped): one tight pass skips it — most events of a stream.
        const eol = plainLineEnd(p, end);
        if (eol !== 0) p = eol;
      }
      const c = <u32>load<u8>(p);
      if (c === 0x0a || c === 0x0d) {
        // A raw line break ends the line whatever the JSON state: a JSON string cannot hold one.
        if (this.line === L_PAYLOAD) this.endDoc();
        this.line = 0;
        p++;
        continue;
      }
      const line = this.line;
      if (line === L_PAYLOAD) {
        p = this.json(p, end, true);
      } else if (line === L_SKIP) {
        p = lineStop(p + 1, end);
      } else {
        this.line =
          c === <u32>load<u8>(DATA_PREFIX + <usize>line) ? (line === 4 ? L_PAYLOAD : line + 1) : L_SKIP;
        p++;
      }
    }
  }

  /**
   * Reads JSON bytes from p until end — or, in SSE, until a line break (left for the caller) — and
   * returns where it stopped.
   */
  private json(p: usize, end: usize, sse: bool): usize {
    while (p < end) {
      const c = <u32>load<u8>(p);
      const state = this.state;
      // The hot path: content strings — and keys once they cannot be the path's — are most of a
      // response's bytes.
      if (state === S_STRING || (state === S_KEYSTR && this.keyAt < 0)) {
        if (this.escape) {
          this.escape = false;
          p++;
          continue;
        }
        p = stringStop(p, end);
        if (p >= end) return p;
        const d = <u32>load<u8>(p);
        if (d === 0x5c) this.escape = true;
        else if (d === 0x22) {
          if (state === S_KEYSTR) {
            this.keyOk = false;
            this.state = S_COLON;
          } else this.state = S_AFTER;
        } else if (sse && (d === 0x0a || d === 0x0d)) return p;
        else this.state = S_BAD;
        p++;
        continue;
      }
      if (state === S_SCALAR) {
        // A number or literal nobody asked for: up to its delimiter, which the structure reads.
        while (p < end) {
          const d = <u32>load<u8>(p);
          if (d === 0x2c || d === 0x7d || d === 0x5d || isSpace(d)) break;
          p++;
        }
        if (p < end) this.state = S_AFTER;
        continue;
      }
      if (sse && (c === 0x0a || c === 0x0d)) return p;
      p++;
      if (state === S_KEYSTR) this.keyByte(c);
      else if (state === S_NUMBER) this.numberByte(c);
      else if (state === S_BAD) {
        if (!sse) return end;
        p = lineStop(p, end);
      } else if (!isSpace(c)) {
        this.structural(state, c);
      }
    }
    return p;
  }

  private keyByte(c: u32): void {
    if (this.escape) {
      // An escaped key is never one engines write for this path: not a match.
      this.escape = false;
      this.keyAt = -1;
      return;
    }
    if (c === 0x5c) {
      this.escape = true;
      return;
    }
    if (c === 0x22) {
      this.keyOk = this.keyAt === keyLen(this.depth);
      this.state = S_COLON;
      return;
    }
    if (c < 0x20) {
      this.state = S_BAD;
      return;
    }
    const at = this.keyAt;
    if (at < 0) return;
    const d = this.depth;
    this.keyAt = at < keyLen(d) && c === <u32>load<u8>(keyPtr(d) + <usize>at) ? at + 1 : -1;
  }

  /** A byte of the cached_tokens value. */
  private numberByte(c: u32): void {
    if (c - 0x30 < 10) {
      // 0 may not lead a longer number; past u32 the value is garbage.
      if (this.numDigits === 1 && this.num === 0) this.numOk = false;
      this.num = this.num * 10 + <u64>(c - 0x30);
      if (this.num > 0xffffffff) {
        this.numOk = false;
        this.num = 0x100000000;
      }
      this.numDigits++;
      return;
    }
    if (c === 0x2c || c === 0x7d || c === 0x5d || isSpace(c)) {
      if (this.numOk && this.numDigits > 0) {
        this.docKnown = true;
        this.docCached = <u32>this.num;
      }
      this.state = S_AFTER;
      // The delimiter belongs to the structure: read it again there.
      if (!isSpace(c)) this.structural(S_AFTER, c);
      return;
    }
    // A sign, fraction or exponent: a number, but not a token count.
    this.numOk = false;
  }

  @inline private isObject(level: i32): bool {
    return level <= KIND_LEVELS && (this.kinds & ((<u32>1) << (<u32>(level - 1)))) !== 0;
  }

  /** A byte outside strings and scalars, not whitespace. */
  private structural(state: i32, c: u32): void {
    const depth = this.depth;
    if (state === S_VALUE) {
      this.valueStart(c);
      return;
    }
    if (state === S_KEY) {
      if (c === 0x22) {
        this.keyAt = depth <= 3 && this.path === depth ? 0 : -1;
        this.keyOk = false;
        this.state = S_KEYSTR;
      } else if (c === 0x7d) this.close(c);
      else this.state = S_BAD;
      return;
    }
    if (state === S_COLON) {
      this.state = c === 0x3a ? S_VALUE : S_BAD;
      return;
    }
    if (state === S_AFTER) {
      if (c === 0x2c && depth > 0) {
        this.keyOk = false;
        this.state = this.isObject(depth) ? S_KEY : S_VALUE;
      } else if ((c === 0x7d || c === 0x5d) && depth > 0) {
        this.close(c);
      } else if (c === 0x3a && depth > KIND_LEVELS) {
        // Deep levels keep no kind: a key read as a value string is followed by its colon.
        this.state = S_VALUE;
      } else this.state = S_BAD;
      return;
    }
    // S_END: something after the top-level value.
    this.state = S_BAD;
  }

  private valueStart(c: u32): void {
    const depth = this.depth;
    // The value of a path key: it replaces whatever an earlier copy of that key said.
    const onPathKey = this.keyOk && depth >= 1 && depth <= 3 && this.path === depth;
    this.keyOk = false;
    if (onPathKey) {
      this.docKnown = false;
      if (depth === 1) this.docUsage = c === 0x7b;
    }
    if (c === 0x7b || c === 0x5b) {
      if (depth >= MAX_DEPTH) {
        this.state = S_BAD;
        return;
      }
      const level = depth + 1;
      const isObject = c === 0x7b;
      if (level <= KIND_LEVELS) {
        const bit = (<u32>1) << (<u32>(level - 1));
        this.kinds = isObject ? this.kinds | bit : this.kinds & ~bit;
      }
      if (isObject && (depth === 0 || (onPathKey && depth < 3))) this.path = level;
      this.depth = level;
      this.state = isObject ? S_KEY : S_VALUE;
      return;
    }
    if (c === 0x5d) {
      // An empty array (or a trailing comma, which no engine writes).
      if (depth > 0 && !this.isObject(depth)) this.close(c);
      else this.state = S_BAD;
      return;
    }
    if (c === 0x22) {
      this.state = S_STRING;
      return;
    }
    if (onPathKey && depth === 3 && (c - 0x30 < 10 || c === 0x2d)) {
      this.state = S_NUMBER;
      this.num = c === 0x2d ? 0 : <u64>(c - 0x30);
      this.numDigits = c === 0x2d ? 0 : 1;
      this.numOk = c !== 0x2d;
      return;
    }
    if (c - 0x30 < 10 || c === 0x2d || c === 0x74 || c === 0x66 || c === 0x6e) {
      this.state = S_SCALAR;
      return;
    }
    this.state = S_BAD;
  }

  private close(c: u32): void {
    const depth = this.depth;
    if (depth <= KIND_LEVELS && this.isObject(depth) !== (c === 0x7d)) {
      this.state = S_BAD;
      return;
    }
    if (this.path >= depth) this.path = depth - 1;
    this.depth = depth - 1;
    this.state = depth === 1 ? S_END : S_AFTER;
  }
}
