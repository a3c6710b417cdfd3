// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// Token ids → the bytes the engine tokenized, in the core, so the ingest path hands a whole
// event's token ids to one call (block-table.ts) instead of detokenizing block by block in
// JavaScript. The same rules as control-plane/src/tokens/detokenize.ts (docs/wire-format.md
// "Token bytes"), over a copy of the same table (token-bytes-table.ts builds it): every token's
// bytes back to back, offsets[id]..offsets[id+1], a flag byte per id.
import { ByteBuf } from "./byte-buf";

export const TOKEN_VALID: u32 = 1;
export const TOKEN_SEGMENT_BOUNDARY: u32 = 2;
export const TOKEN_SPACE_FIRST: u32 = 4;
/** dummyPrefix rules, as token-bytes-table.ts names them. */
export const DUMMY_NONE: i32 = 0;
export const DUMMY_FIRST: i32 = 1;
export const DUMMY_ALWAYS: i32 = 2;
/** `previous` at the start of a sequence. */
export const SEQUENCE_START: i64 = -1;

@unmanaged
export class TokenTable {
  bytes: usize;
  offsets: usize;
  flags: usize;

  constructor(
    public size: u32,
    public byteLen: u32,
    public dummy: i32,
  ) {
    this.bytes = heap.alloc(<usize>byteLen);
    this.offsets = heap.alloc((<usize>size + 1) << 2);
    this.flags = heap.alloc(<usize>size);
  }

  private known(id: u64): bool {
    return id < <u64>this.size && (<u32>load<u8>(this.flags + <usize>id) & TOKEN_VALID) !== 0;
  }

  /**
   * Appends the bytes of n token ids (u32 at `ids`) to out; false for an id the vocabulary
   * lacks (out then holds nothing useful past its old length). `previous` is the id before
   * ids[0], or SEQUENCE_START: metaspace vocabularies apply their dummy-prefix rule with it.
   */
  append(ids: usize, n: i32, previous: i64, out: ByteBuf): bool {
    if (previous !== SEQUENCE_START && !this.known(<u64>previous)) return false;
    const always = this.dummy === DUMMY_ALWAYS;
    let atSegmentStart =
      this.dummy !== DUMMY_NONE &&
      (previous === SEQUENCE_START ||
        (always && (<u32>load<u8>(this.flags + <usize>previous) & TOKEN_SEGMENT_BOUNDARY) !== 0));
    for (let i = 0; i < n; i++) {
      const id = load<u32>(ids + ((<usize>i) << 2));
      if (id >= this.size) return false;
      const f = <u32>load<u8>(this.flags + <usize>id);
      if ((f & TOKEN_VALID) === 0) return false;
      let s = load<u32>(this.offsets + ((<usize>id) << 2));
      const e = load<u32>(this.offsets + ((<usize>id + 1) << 2));
      if (atSegmentStart && (f & TOKEN_SPACE_FIRST) !== 0) s++;
      atSegmentStart = always && (f & TOKEN_SEGMENT_BOUNDARY) !== 0;
      // Tokens average ~4 bytes: a byte loop beats memory.copy's fixed cost at that size.
      const len = <i32>(e - s);
      out.reserve(len);
      const src = this.bytes + <usize>s;
      const dst = out.ptr + <usize>out.len;
      for (let k = 0; k < len; k++) store<u8>(dst + <usize>k, load<u8>(src + <usize>k));
      out.len += len;
    }
    return true;
  }
}
