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

/** Bytes past the table's end that a token's word copies may read, and past a token's end in
 * the output that they may write (append): two 8-byte words. */
const PAD: usize = 16;
/** The most room append makes at once for its plain loop (a vocabulary of huge tokens takes the other). */
const MAX_ROOM: u64 = 1 << 20;

@unmanaged
export class TokenTable {
  /**
   * Copies a token's bytes: one or two 8-byte words for all but the rare long token (tokens
   * average ~4 bytes and seldom pass 16), a memory.copy call — a call out of Wasm — for that one.
   */
  @inline private static copyToken(dst: usize, src: usize, len: usize): void {
    if (len > PAD) {
      memory.copy(dst, src, len);
      return;
    }
    store<u64>(dst, load<u64>(src));
    if (len > 8) store<u64>(dst + 8, load<u64>(src + 8));
  }

  bytes: usize;
  offsets: usize;
  flags: usize;
  /**
   * Per id, what append needs in one load (seal builds it from offsets and flags): start u32,
   * length u24, flags u8. Reading three tables per token (two offsets and a flag byte) made
   * detokenizing the largest part of applying a batch (issue 31).
   */
  entries: usize = 0;
  /** The longest token's byte length (seal): room for n tokens is known before copying any. */
  maxLen: u32 = 0;

  constructor(
    public size: u32,
    public byteLen: u32,
    public dummy: i32,
  ) {
    this.bytes = heap.alloc(<usize>byteLen + PAD);
    memory.fill(this.bytes + <usize>byteLen, 0, PAD);
    this.offsets = heap.alloc((<usize>size + 1) << 2);
    this.flags = heap.alloc(<usize>size);
    // Every id unknown until seal: a table used unsealed refuses tokens rather than misread them.
    this.entries = heap.alloc((<usize>size) << 3);
    memory.fill(this.entries, 0, (<usize>size) << 3);
  }

  /** Builds `entries` once the caller has filled bytes, offsets and flags. */
  seal(): void {
    for (let id: u32 = 0; id < this.size; id++) {
      const s = load<u32>(this.offsets + ((<usize>id) << 2));
      const e = load<u32>(this.offsets + ((<usize>id + 1) << 2));
      let f = <u64>load<u8>(this.flags + <usize>id);
      // A token of 16 MiB or more (none exists) or a span outside the bytes reads as unknown.
      if (e < s || e - s > 0xffffff || e > this.byteLen) f = 0;
      else if ((f & TOKEN_VALID) !== 0 && e - s > this.maxLen) this.maxLen = e - s;
      store<u64>(this.entries + ((<usize>id) << 3), <u64>s | ((<u64>(e - s) & 0xffffff) << 32) | (f << 56));
    }
  }

  private known(id: u64): bool {
    return id < <u64>this.size && (<u32>load<u8>(this.flags + <usize>id) & TOKEN_VALID) !== 0;
  }

  /** append for a vocabulary without a dummy prefix, with room for n of the longest token made. */
  private appendPlain(ids: usize, n: i32, out: ByteBuf): bool {
    const entries = this.entries;
    const size = this.size;
    const bytes = this.bytes;
    let dst = out.ptr + <usize>out.len;
    const start = dst;
    for (let i = 0; i < n; i++) {
      const id = load<u32>(ids + ((<usize>i) << 2));
      if (id >= size) return false;
      const entry = load<u64>(entries + ((<usize>id) << 3));
      if ((<u32>(entry >> 56) & TOKEN_VALID) === 0) return false;
      const src = bytes + <usize>(<u32>entry);
      const len = <usize>(<u32>(entry >> 32) & 0xffffff);
      TokenTable.copyToken(dst, src, len);
      dst += len;
    }
    out.len += <i32>(dst - start);
    return true;
  }

  /**
   * Appends the bytes of n token ids (u32 at `ids`) to out; false for an id the vocabulary
   * lacks (out then holds nothing useful past its old length). `previous` is the id before
   * ids[0], or SEQUENCE_START: metaspace vocabularies apply their dummy-prefix rule with it.
   */
  append(ids: usize, n: i32, previous: i64, out: ByteBuf): bool {
    if (previous !== SEQUENCE_START && !this.known(<u64>previous)) return false;
    // Byte-level vocabularies (Qwen, Llama 3) have no leading-space rule: a loop with nothing
    // but the copy, its room made once.
    const room = <u64>n * <u64>(this.maxLen + <u32>PAD);
    if (this.dummy === DUMMY_NONE && room <= MAX_ROOM) {
      out.reserve(<i32>room);
      return this.appendPlain(ids, n, out);
    }
    const always = this.dummy === DUMMY_ALWAYS;
    let atSegmentStart =
      this.dummy !== DUMMY_NONE &&
      (previous === SEQUENCE_START ||
        (always && (<u32>load<u8>(this.flags + <usize>previous) & TOKEN_SEGMENT_BOUNDARY) !== 0));
    // Everything the loop reads lives in locals: fields and out's length would otherwise be
    // reloaded after every store (the compiler cannot tell they do not alias the output).
    const entries = this.entries;
    const size = this.size;
    const bytes = this.bytes;
    let base = out.ptr;
    let cap = <usize>out.cap;
    let w = <usize>out.len;
    for (let i = 0; i < n; i++) {
      const id = load<u32>(ids + ((<usize>i) << 2));
      if (id >= size) return false;
      const entry = load<u64>(entries + ((<usize>id) << 3));
      const f = <u32>(entry >> 56);
      if ((f & TOKEN_VALID) === 0) return false;
      let s = <usize>(<u32>entry);
      let len = <usize>(<u32>(entry >> 32) & 0xffffff);
      if (atSegmentStart && (f & TOKEN_SPACE_FIRST) !== 0) {
        s++;
        len--;
      }
      atSegmentStart = always && (f & TOKEN_SEGMENT_BOUNDARY) !== 0;
      // The bytes are padded, and out keeps PAD bytes of room past the token (TokenTable.copyToken).
      if (w + len + PAD > cap) {
        out.len = <i32>w;
        out.grow(<i32>(w + len + PAD));
        base = out.ptr;
        cap = <usize>out.cap;
      }
      TokenTable.copyToken(base + w, bytes + s, len);
      w += len;
    }
    out.len = <i32>w;
    return true;
  }
}
