// Token ids → the exact bytes the engine tokenized (docs/wire-format.md "Token bytes").
// Hot path of KV-event ingest: no allocation per token, a bounds/validity check and a short
// copy. Errors come back as values, so malformed events are counted and dropped, never thrown.
import {
  TOKEN_SEGMENT_BOUNDARY,
  TOKEN_SPACE_FIRST,
  TOKEN_VALID,
  type TokenBytesTable,
} from "./token-bytes-table.ts";

/** `previous` for ids that begin a sequence (a KV block without a parent). */
export const SEQUENCE_START = -1;

export type DetokenizeError =
  | {
      ok: false;
      error: "unknown-token-id" /** position in ids, -1 for `previous` */;
      index: number;
      id: number;
    }
  | { ok: false; error: "buffer-too-small"; needed: number };

export type DetokenizeResult = { ok: true; bytes: Uint8Array } | DetokenizeError;

function isKnown(table: TokenBytesTable, id: number): boolean {
  // `id >= 0 && id < size` is false for NaN; a fractional id reads flags[x] = undefined → 0.
  return id >= 0 && id < table.size && ((table.flags[id] as number) & TOKEN_VALID) !== 0;
}

/**
 * Whether the token after `previous` starts a normalized segment that the tokenizer gave a
 * dummy `▁` prefix (so its leading space is not in the text and is dropped).
 */
function startsPrefixedSegment(table: TokenBytesTable, previous: number): boolean {
  if (table.dummyPrefix === "none") return false;
  if (previous === SEQUENCE_START) return true;
  return table.dummyPrefix === "always" && ((table.flags[previous] as number) & TOKEN_SEGMENT_BOUNDARY) !== 0;
}

/**
 * Exact byte length of `ids` detokenized after `previous`, or an error for an unknown id.
 * Lets a caller size a buffer exactly; `ids.length * table.maxTokenBytes` is a cheaper bound.
 */
export function detokenizedLength(
  table: TokenBytesTable,
  ids: ArrayLike<number>,
  previous: number = SEQUENCE_START,
): number | DetokenizeError {
  if (previous !== SEQUENCE_START && !isKnown(table, previous)) {
    return { ok: false, error: "unknown-token-id", index: -1, id: previous };
  }
  const { offsets, flags } = table;
  let atSegmentStart = startsPrefixedSegment(table, previous);
  const always = table.dummyPrefix === "always";
  let n = 0;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as number;
    if (!isKnown(table, id)) return { ok: false, error: "unknown-token-id", index: i, id };
    const f = flags[id] as number;
    n += (offsets[id + 1] as number) - (offsets[id] as number);
    if (atSegmentStart && (f & TOKEN_SPACE_FIRST) !== 0) n--;
    atSegmentStart = always && (f & TOKEN_SEGMENT_BOUNDARY) !== 0;
  }
  return n;
}

/**
 * Writes the bytes of `ids` into `out` at `offset` and returns how many were written, or an
 * error value (nothing useful is in `out` then). `previous` is the id just before ids[0] in
 * the sequence (the last token of the parent KV block), or SEQUENCE_START: only metaspace
 * vocabularies look at it, to apply the dummy-prefix rule across block boundaries.
 */
export function detokenizeInto(
  table: TokenBytesTable,
  ids: ArrayLike<number>,
  out: Uint8Array,
  offset = 0,
  previous: number = SEQUENCE_START,
): number | DetokenizeError {
  if (previous !== SEQUENCE_START && !isKnown(table, previous)) {
    return { ok: false, error: "unknown-token-id", index: -1, id: previous };
  }
  const { bytes, offsets, flags, size } = table;
  const always = table.dummyPrefix === "always";
  let atSegmentStart = startsPrefixedSegment(table, previous);
  const limit = out.length;
  let pos = offset;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as number;
    if (!(id >= 0 && id < size)) return { ok: false, error: "unknown-token-id", index: i, id };
    const f = flags[id] as number;
    if ((f & TOKEN_VALID) === 0) return { ok: false, error: "unknown-token-id", index: i, id };
    let s = offsets[id] as number;
    const e = offsets[id + 1] as number;
    if (atSegmentStart && (f & TOKEN_SPACE_FIRST) !== 0) s++;
    atSegmentStart = always && (f & TOKEN_SEGMENT_BOUNDARY) !== 0;
    if (pos + (e - s) > limit) {
      const rest = detokenizedLength(table, ids, previous);
      return { ok: false, error: "buffer-too-small", needed: typeof rest === "number" ? rest : -1 };
    }
    // Tokens average ~4 bytes: a plain loop beats subarray()+set() (which allocate a view).
    while (s < e) out[pos++] = bytes[s++] as number;
  }
  return pos - offset;
}

/** Bytes of `ids` (see detokenizeInto), in a new array. */
export function detokenize(
  table: TokenBytesTable,
  ids: ArrayLike<number>,
  previous: number = SEQUENCE_START,
): DetokenizeResult {
  const length = detokenizedLength(table, ids, previous);
  if (typeof length !== "number") return length;
  const out = new Uint8Array(length);
  const written = detokenizeInto(table, ids, out, 0, previous);
  if (typeof written !== "number") return written;
  return { ok: true, bytes: out };
}
