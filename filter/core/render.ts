// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// Canonical prompt stream (docs/wire-format.md §1–§2): the bytes the engine tokenizes, built from
// the spans of a RequestScan. Chat goes through a SegmentTemplate; completions are bosText ‖ prompt.
// The result is EXACT (the whole prompt), PARTIAL (an exact prefix of it) or NONE.
import { ByteBuf } from "./byte-buf";
import {
  bytesEqual,
  MSG_INEXPRESSIBLE,
  MSG_RECORD,
  PART_RECORD,
  PROMPT_STRING,
  PROMPT_STRINGS,
  REQ_ADD_GENERATION_PROMPT_FALSE,
  REQ_ADD_SPECIAL_TOKENS_FALSE,
  REQ_ADD_SPECIAL_TOKENS_TRUE,
  REQ_BAD_FIELD,
  REQ_BAD_MESSAGES,
  REQ_CHAT_TEMPLATE,
  REQ_CHAT_TEMPLATE_KWARGS,
  REQ_CONTINUE_FINAL_MESSAGE,
  REQ_DOCUMENTS,
  REQ_PROMPT_EMBEDS,
  REQ_SUFFIX,
  REQ_TOOLS,
  RequestScan,
} from "./json-scan";
import { decodeString } from "./json-string";
import { SegmentTemplate, THINK_QWEN3 } from "./segment-template";
import { pyWsLenAt, pyWsLenBefore } from "./utf8";

export const RENDER_NONE: i32 = 0;
export const RENDER_PARTIAL: i32 = 1;
export const RENDER_EXACT: i32 = 2;

/** Streams past this many bytes are cut (still an exact prefix, so PARTIAL). */
export const DEFAULT_MAX_STREAM: i32 = 8 << 20;

// "</think>" read as a little-endian u64.
const THINK_CLOSE_U64: u64 = ((<u64>0x3e6b6e69) << 32) | 0x68742f3c;
// Byte-broadcast masks for the '>' search (two halves: the linter cannot represent the literals).
const ONES: u64 = ((<u64>0x01010101) << 32) | 0x01010101;
const HIGHS: u64 = ((<u64>0x80808080) << 32) | 0x80808080;
const GTS: u64 = ((<u64>0x3e3e3e3e) << 32) | 0x3e3e3e3e;
const TOOL_RESPONSE_OPEN = "<tool_response>";
const TOOL_RESPONSE_CLOSE = "</tool_response>";

// Unmanaged (one per VM, never freed): a GC-managed `this` costs shadow-stack spills per call.
@unmanaged
export class Renderer {
  /** Rendered stream; reused across requests. */
  out: ByteBuf = new ByteBuf(16 << 10);
  maxStream: i32 = DEFAULT_MAX_STREAM;
  /** Decoded content for the qwen3 last-query test. */
  private scratch: ByteBuf = new ByteBuf(256);

  /** `/v1/completions`: bosText ‖ prompt for a string prompt or an array holding one string. */
  renderCompletion(scan: RequestScan, bos: usize, bosLen: i32): i32 {
    const out = this.out;
    out.len = 0;
    const f = scan.flags;
    if ((f & (REQ_BAD_FIELD | REQ_SUFFIX | REQ_PROMPT_EMBEDS)) !== 0) return RENDER_NONE;
    const kind = scan.promptKind;
    if (!(kind === PROMPT_STRING || (kind === PROMPT_STRINGS && scan.promptCount === 1))) return RENDER_NONE;
    // add_special_tokens defaults to true for completions: the tokenizer adds its BOS.
    if ((f & REQ_ADD_SPECIAL_TOKENS_FALSE) === 0) out.append(bos, bosLen);
    decodeString(scan.body + <usize>scan.promptOff, scan.promptLen, scan.promptEsc, out);
    return this.cap(RENDER_EXACT);
  }

  /** `/v1/chat/completions` through a segment template. */
  renderChat(scan: RequestScan, t: SegmentTemplate): i32 {
    const out = this.out;
    out.len = 0;
    const f = scan.flags;
    if (!scan.hasMessages || scan.msgCount === 0) return RENDER_NONE;
    // A custom template, an unparseable field, or a tokenizer BOS on top of the template: the
    // stream's very start is unknown.
    if ((f & (REQ_BAD_FIELD | REQ_BAD_MESSAGES | REQ_CHAT_TEMPLATE | REQ_ADD_SPECIAL_TOKENS_TRUE)) !== 0) {
      return RENDER_NONE;
    }
    out.append(t.base + <usize>t.prefixOff, t.prefixLen);
    // Tools and documents change the system block in most templates: only the prefix is certain.
    if ((f & (REQ_TOOLS | REQ_DOCUMENTS)) !== 0) return this.cap(RENDER_PARTIAL);

    const n = scan.msgCount;
    const msgs = scan.messages.ptr;
    const lastQuery = t.think === THINK_QWEN3 ? this.lastQuery(scan) : n;

    if (t.defaultSystemLen >= 0 && !this.roleIs(scan, 0, t, t.systemRole)) {
      if (t.systemRole < 0) return this.cap(RENDER_PARTIAL);
      const r = t.systemRole;
      out.append(t.base + <usize>t.openOff(r), t.openLen(r));
      const start = out.len;
      out.append(t.base + <usize>t.defaultSystemOff, t.defaultSystemLen);
      if (t.trimContent) this.trim(start);
      out.append(t.base + <usize>t.closeOff(r), t.closeLen(r));
    }

    // continue_final_message leaves the last message open: everything before it is exact.
    const stop = (f & REQ_CONTINUE_FINAL_MESSAGE) !== 0 ? n - 1 : n;
    for (let i = 0; i < stop; i++) {
      const m = msgs + <usize>(i * MSG_RECORD);
      if ((load<i32>(m, 12) & MSG_INEXPRESSIBLE) !== 0) return this.cap(RENDER_PARTIAL);
      const role = this.roleOf(scan, i, t);
      if (role < 0) return this.cap(RENDER_PARTIAL);
      const isAssistant = role === t.assistantRole;
      // qwen3 renders assistant turns after the last query with a <think> block we cannot know.
      if (isAssistant && t.think === THINK_QWEN3 && i > lastQuery) return this.cap(RENDER_PARTIAL);
      out.append(t.base + <usize>t.openOff(role), t.openLen(role));
      const start = out.len;
      this.appendContent(scan, m);
      if (isAssistant && t.think === THINK_QWEN3) this.stripThink(start);
      if (t.trimContent) this.trim(start);
      out.append(t.base + <usize>t.closeOff(role), t.closeLen(role));
      if (out.len > this.maxStream) return this.cap(RENDER_PARTIAL);
    }
    if (stop < n) return this.cap(RENDER_PARTIAL);
    // chat_template_kwargs may change the generation prompt (e.g. Qwen3's enable_thinking).
    if ((f & REQ_CHAT_TEMPLATE_KWARGS) !== 0) return this.cap(RENDER_PARTIAL);
    if ((f & REQ_ADD_GENERATION_PROMPT_FALSE) === 0) out.append(t.base + <usize>t.genOff, t.genLen);
    return this.cap(RENDER_EXACT);
  }

  /** Cuts the stream at maxStream; a cut stream is only a prefix. */
  private cap(status: i32): i32 {
    const max = this.maxStream < 0 ? 0 : this.maxStream;
    if (this.out.len > max) {
      this.out.len = max;
      return RENDER_PARTIAL;
    }
    return status;
  }

  /** Appends a message's content: its string, or its text parts joined with "\n". */
  private appendContent(scan: RequestScan, m: usize): void {
    const first = load<i32>(m, 16);
    const count = load<i32>(m, 20);
    for (let k = 0; k < count; k++) {
      if (k > 0) this.out.appendByte(0x0a);
      const part = scan.parts.ptr + <usize>((first + k) * PART_RECORD);
      decodeString(
        scan.body + <usize>load<i32>(part),
        load<i32>(part, 4),
        load<i32>(part, 8) !== 0,
        this.out,
      );
    }
  }

  /** Template role index of message i, comparing the decoded role name. */
  private roleOf(scan: RequestScan, i: i32, t: SegmentTemplate): i32 {
    const m = scan.messages.ptr + <usize>(i * MSG_RECORD);
    const len = load<i32>(m, 4);
    if (len < 0) return -1;
    const p = scan.body + <usize>load<i32>(m);
    if (load<i32>(m, 8) === 0) return t.findRole(p, len);
    this.scratch.len = 0;
    decodeString(p, len, true, this.scratch);
    return t.findRole(this.scratch.ptr, this.scratch.len);
  }

  private roleIs(scan: RequestScan, i: i32, t: SegmentTemplate, role: i32): bool {
    return role >= 0 && this.roleOf(scan, i, t) === role;
  }

  /**
   * Qwen3's `last_query_index`: the last user message whose content is not wrapped in
   * <tool_response>…</tool_response>; n - 1 when there is none.
   */
  private lastQuery(scan: RequestScan): i32 {
    const n = scan.msgCount;
    const userName = "user";
    for (let i = n - 1; i >= 0; i--) {
      const m = scan.messages.ptr + <usize>(i * MSG_RECORD);
      const len = load<i32>(m, 4);
      if (len < 0) continue;
      const rp = scan.body + <usize>load<i32>(m);
      let isUser = false;
      if (load<i32>(m, 8) === 0) {
        isUser = bytesEqual(rp, len, userName);
      } else {
        this.scratch.len = 0;
        decodeString(rp, len, true, this.scratch);
        isUser = bytesEqual(this.scratch.ptr, this.scratch.len, userName);
      }
      if (!isUser) continue;
      if (!this.mayEndWithToolResponse(scan, m)) return i;
      this.scratch.len = 0;
      const saved = this.out;
      this.out = this.scratch;
      this.appendContent(scan, m);
      this.out = saved;
      const p = this.scratch.ptr;
      const l = this.scratch.len;
      const wrapped =
        l >= TOOL_RESPONSE_OPEN.length &&
        l >= TOOL_RESPONSE_CLOSE.length &&
        bytesEqual(p, TOOL_RESPONSE_OPEN.length, TOOL_RESPONSE_OPEN) &&
        bytesEqual(
          p + <usize>(l - TOOL_RESPONSE_CLOSE.length),
          TOOL_RESPONSE_CLOSE.length,
          TOOL_RESPONSE_CLOSE,
        );
      if (!wrapped) return i;
    }
    return n - 1;
  }

  /**
   * Cheap exact pre-test for lastQuery: a single-string content whose last 96 raw bytes hold no
   * backslash decodes to those same bytes there, so it ends with "</tool_response>" only if the
   * raw bytes do. Anything else (escapes near the end, several parts) needs the full decode.
   */
  private mayEndWithToolResponse(scan: RequestScan, m: usize): bool {
    if (load<i32>(m, 20) !== 1) return true;
    const part = scan.parts.ptr + <usize>(load<i32>(m, 16) * PART_RECORD);
    const len = load<i32>(part, 4);
    const k = TOOL_RESPONSE_CLOSE.length;
    if (len < k) return false;
    const p = scan.body + <usize>load<i32>(part);
    // The decoded text ends with '>' only if the raw text ends with '>' or an escape "\u003e".
    const last = <u32>load<u8>(p + <usize>(len - 1));
    if (last !== 0x3e && (last | 0x20) !== 0x65) return false;
    const from = len > 6 * k ? len - 6 * k : 0;
    for (let i = from; i < len; i++) {
      if (load<u8>(p + <usize>i) === 0x5c) return true;
    }
    return bytesEqual(p + <usize>(len - k), k, TOOL_RESPONSE_CLOSE);
  }

  /** Qwen3 history: if the content holds "</think>", keep what follows the last one, lstrip("\n"). */
  private stripThink(start: i32): void {
    const out = this.out;
    const base = out.ptr;
    // "</think>" is exactly eight bytes: compare it as one little-endian u64, but only where a
    // '>' is, found eight bytes at a time from the end (the zero-byte test flags every real
    // '>' and at worst a few extra bytes, which the compare then rejects).
    let found = -1;
    const lo = start + 7; // the '>' of a match sits at index ≥ start + 7
    let hi = out.len; // '>' candidates are searched in [lo, hi)
    while (found < 0 && hi > lo) {
      // Most assistant text has no '>' at all: skip 16 bytes per step while that holds.
      if (hi - lo >= 16) {
        const a = load<u64>(base + <usize>(hi - 16)) ^ GTS;
        const b = load<u64>(base + <usize>(hi - 8)) ^ GTS;
        if ((((a - ONES) & ~a) | ((b - ONES) & ~b)) & HIGHS) {
          // fall through to the 8-byte step, which finds the candidates
        } else {
          hi -= 16;
          continue;
        }
      }
      if (hi - lo >= 8) {
        const w = load<u64>(base + <usize>(hi - 8)) ^ GTS;
        let m = (w - ONES) & ~w & HIGHS;
        while (m !== 0) {
          const bit = 63 - <i32>clz<u64>(m);
          const j = hi - 8 + (bit >> 3);
          if (load<u64>(base + <usize>(j - 7)) === THINK_CLOSE_U64) {
            found = j - 7;
            break;
          }
          m &= ~((<u64>1) << (<u64>bit));
        }
        hi -= 8;
      } else {
        const j = hi - 1;
        if (load<u8>(base + <usize>j) === 0x3e && load<u64>(base + <usize>(j - 7)) === THINK_CLOSE_U64)
          found = j - 7;
        hi -= 1;
      }
    }
    if (found < 0) return;
    let from = found + 8;
    while (from < out.len && load<u8>(base + <usize>from) === 0x0a) from++;
    const keep = out.len - from;
    memory.copy(base + <usize>start, base + <usize>from, <usize>keep);
    out.len = start + keep;
  }

  /** Python str.strip() on out[start, len) in place. */
  private trim(start: i32): void {
    const out = this.out;
    const s = out.ptr + <usize>start;
    let a = s;
    let b = out.ptr + <usize>out.len;
    while (a < b) {
      const w = pyWsLenAt(a, b);
      if (w === 0) break;
      a += <usize>w;
    }
    while (b > a) {
      const w = pyWsLenBefore(a, b);
      if (w === 0) break;
      b -= <usize>w;
    }
    const keep = b - a;
    if (a !== s) memory.copy(s, a, keep);
    out.len = start + <i32>keep;
  }
}
