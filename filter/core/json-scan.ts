// Single forward scan of an OpenAI request body (/v1/completions, /v1/chat/completions). It
// builds no tree: it records spans (offset, length, has-escapes) into the body for the fields
// routing needs and skips every other value iteratively, so no input can recurse or trap.
// Keys may come in any order; a repeated key wins last, like Python's json.loads in the engine.
// Field semantics: docs/wire-format.md §1.1.
import { ByteBuf } from "./byte-buf";
import { ERR_DEPTH, ERR_LIMIT, ERR_NOT_OBJECT, ERR_SYNTAX, ERR_TRUNCATED } from "./errors";
import { decodeString, scanString, stringHasEscape } from "./json-string";
import { head8, Literal } from "./literal";

/** Deepest nesting the scanner accepts (Python's json gives up near 1000 too). */
export const MAX_DEPTH: i32 = 512;
export const MAX_MESSAGES: i32 = 1 << 16;
export const MAX_PARTS: i32 = 1 << 18;

// prompt kinds
export const PROMPT_ABSENT: i32 = 0;
export const PROMPT_STRING: i32 = 1;
/** An array whose elements are all strings (promptCount of them; the first is recorded). */
export const PROMPT_STRINGS: i32 = 2;
/** An array of integers (token ids). */
export const PROMPT_TOKENS: i32 = 3;
/** Anything else: empty array, nested token arrays, mixed arrays, a non-string scalar. */
export const PROMPT_OTHER: i32 = 4;

// request flags (fields that change the rendered prompt or make it unknowable)
export const REQ_ADD_GENERATION_PROMPT_FALSE: i32 = 1 << 0;
export const REQ_CONTINUE_FINAL_MESSAGE: i32 = 1 << 1;
export const REQ_CHAT_TEMPLATE: i32 = 1 << 2;
export const REQ_CHAT_TEMPLATE_KWARGS: i32 = 1 << 3;
export const REQ_TOOLS: i32 = 1 << 4;
export const REQ_DOCUMENTS: i32 = 1 << 5;
export const REQ_ADD_SPECIAL_TOKENS_TRUE: i32 = 1 << 6;
export const REQ_ADD_SPECIAL_TOKENS_FALSE: i32 = 1 << 7;
export const REQ_SUFFIX: i32 = 1 << 8;
export const REQ_PROMPT_EMBEDS: i32 = 1 << 9;
/** A field routing reads has a type the engine would reject (model not a string, …). */
export const REQ_BAD_FIELD: i32 = 1 << 10;
/** `messages` is present but not an array. */
export const REQ_BAD_MESSAGES: i32 = 1 << 11;

// message flags (any of them makes the message inexpressible through a segment template)
export const MSG_NAME: i32 = 1 << 0;
export const MSG_TOOL_CALLS: i32 = 1 << 1;
export const MSG_TOOL_CALL_ID: i32 = 1 << 2;
export const MSG_REASONING: i32 = 1 << 3;
export const MSG_NON_TEXT_PART: i32 = 1 << 4;
/** `content` absent or null. */
export const MSG_NO_CONTENT: i32 = 1 << 5;
/** Not an object, role/content of the wrong type, or a malformed content part. */
export const MSG_BAD: i32 = 1 << 6;
/** A key the core does not know (conservative: a template could read it). */
export const MSG_UNKNOWN_FIELD: i32 = 1 << 7;
/** No `role` string. */
export const MSG_NO_ROLE: i32 = 1 << 8;
/** Informational: content was given as an array of parts. */
export const MSG_CONTENT_PARTS: i32 = 1 << 9;
export const MSG_INEXPRESSIBLE: i32 = MSG_CONTENT_PARTS - 1;

/** Bytes per message record: roleOff, roleLen, roleEsc, flags, partStart, partCount. */
export const MSG_RECORD: i32 = 24;
/** Bytes per part record (a string span): off, len, esc. */
export const PART_RECORD: i32 = 12;

// Top-level keys routing reads.
const K_OTHER: i32 = 0;
const K_MODEL: i32 = 1;
const K_PROMPT: i32 = 2;
const K_MESSAGES: i32 = 3;
const K_STREAM: i32 = 4;
const K_CACHE_SALT: i32 = 5;
const K_LORA_PATH: i32 = 6;
const K_ADD_GENERATION_PROMPT: i32 = 7;
const K_CONTINUE_FINAL_MESSAGE: i32 = 8;
const K_CHAT_TEMPLATE: i32 = 9;
const K_CHAT_TEMPLATE_KWARGS: i32 = 10;
const K_TOOLS: i32 = 11;
const K_DOCUMENTS: i32 = 12;
const K_ADD_SPECIAL_TOKENS: i32 = 13;
const K_SUFFIX: i32 = 14;
const K_PROMPT_EMBEDS: i32 = 15;
// Message keys.
const M_ROLE: i32 = 1;
const M_CONTENT: i32 = 2;
const M_NAME: i32 = 3;
const M_TOOL_CALLS: i32 = 4;
const M_TOOL_CALL_ID: i32 = 5;
const M_REASONING: i32 = 6;
// Content-part keys.
const P_TYPE: i32 = 1;
const P_TEXT: i32 = 2;

const L_MODEL = new Literal("model");
const L_PROMPT = new Literal("prompt");
const L_STREAM = new Literal("stream");
const L_SUFFIX = new Literal("suffix");
const L_MESSAGES = new Literal("messages");
const L_TOOLS = new Literal("tools");
const L_CACHE_SALT = new Literal("cache_salt");
const L_LORA_PATH = new Literal("lora_path");
const L_DOCUMENTS = new Literal("documents");
const L_CHAT_TEMPLATE = new Literal("chat_template");
const L_PROMPT_EMBEDS = new Literal("prompt_embeds");
const L_CHAT_TEMPLATE_KWARGS = new Literal("chat_template_kwargs");
const L_ADD_GENERATION_PROMPT = new Literal("add_generation_prompt");
const L_CONTINUE_FINAL_MESSAGE = new Literal("continue_final_message");
const L_ADD_SPECIAL_TOKENS = new Literal("add_special_tokens");
const L_ROLE = new Literal("role");
const L_CONTENT = new Literal("content");
const L_NAME = new Literal("name");
const L_TOOL_CALLS = new Literal("tool_calls");
const L_TOOL_CALL_ID = new Literal("tool_call_id");
const L_REASONING_CONTENT = new Literal("reasoning_content");
const L_REASONING = new Literal("reasoning");
const L_TYPE = new Literal("type");
const L_TEXT = new Literal("text");

/** Compares n bytes at p with an ASCII literal. */
export function bytesEqual(p: usize, n: i32, s: string): bool {
  if (n !== s.length) return false;
  for (let i = 0; i < n; i++) {
    if (<i32>load<u8>(p + <usize>i) !== <i32>s.charCodeAt(i)) return false;
  }
  return true;
}

@unmanaged
export class RequestScan {
  body: usize = 0;
  end: usize = 0;
  p: usize = 0;

  modelOff: i32 = 0;
  /** -1 when absent (or not a string: then REQ_BAD_FIELD is set). */
  modelLen: i32 = -1;
  modelEsc: bool = false;
  promptKind: i32 = PROMPT_ABSENT;
  promptOff: i32 = 0;
  promptLen: i32 = -1;
  promptEsc: bool = false;
  /** Elements of an array prompt. */
  promptCount: i32 = 0;
  /** -1 absent, 0 false, 1 true (a non-boolean sets REQ_BAD_FIELD). */
  stream: i32 = -1;
  saltOff: i32 = 0;
  saltLen: i32 = -1;
  saltEsc: bool = false;
  loraOff: i32 = 0;
  loraLen: i32 = -1;
  loraEsc: bool = false;
  flags: i32 = 0;
  hasMessages: bool = false;
  msgCount: i32 = 0;
  partCount: i32 = 0;
  /** MSG_RECORD bytes per message. */
  messages: ByteBuf = new ByteBuf(64 * MSG_RECORD);
  /** PART_RECORD bytes per content string. */
  parts: ByteBuf = new ByteBuf(64 * PART_RECORD);
  /** Container kinds of the value being skipped (1 = object), one byte per level. */
  private stack: ByteBuf = new ByteBuf(MAX_DEPTH + 8);
  /** Decoded escaped keys and short values, to compare them with literals. */
  private scratch: ByteBuf = new ByteBuf(64);
  // Span of the last string value read by readString.
  private strOff: i32 = 0;
  private strLen: i32 = 0;
  private strEsc: bool = false;
  // Decoded bytes of the last key (see prepareKey).
  private keyPtr: usize = 0;
  private keyLen: i32 = 0;
  private keyHead: u64 = 0;

  private reset(body: usize, len: i32): void {
    this.body = body;
    this.end = body + <usize>len;
    this.p = body;
    this.modelLen = -1;
    this.modelEsc = false;
    this.promptKind = PROMPT_ABSENT;
    this.promptLen = -1;
    this.promptEsc = false;
    this.promptCount = 0;
    this.stream = -1;
    this.saltLen = -1;
    this.saltEsc = false;
    this.loraLen = -1;
    this.loraEsc = false;
    this.flags = 0;
    this.hasMessages = false;
    this.msgCount = 0;
    this.partCount = 0;
    this.messages.len = 0;
    this.parts.len = 0;
  }

  /** Scans body[0, len). Returns 0 or a negative error code (errors.ts). */
  scan(body: usize, len: i32): i32 {
    this.reset(body, len);
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    if (load<u8>(this.p) !== 0x7b) return ERR_NOT_OBJECT;
    this.p++;
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    if (load<u8>(this.p) === 0x7d) {
      this.p++;
    } else {
      while (true) {
        const key = this.readKey(0);
        if (key < 0) return key;
        const r = this.topValue(key);
        if (r < 0) return r;
        const next = this.afterMember(0x7d);
        if (next < 0) return next;
        if (next === 0) break;
      }
    }
    this.ws();
    return this.p === this.end ? 0 : ERR_SYNTAX;
  }

  // ---- lexing helpers -------------------------------------------------------------------------

  @inline private ws(): void {
    let p = this.p;
    const end = this.end;
    while (p < end) {
      const c = load<u8>(p);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      p++;
    }
    this.p = p;
  }

  /** After a member or element: 1 on ',', 0 on `close` (consumed), or an error. */
  private afterMember(close: u32): i32 {
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    const c = <u32>load<u8>(this.p);
    this.p++;
    if (c === 0x2c) return 1;
    if (c === close) return 0;
    return ERR_SYNTAX;
  }

  /** Reads a string at p (after whitespace) into strOff/strLen/strEsc. */
  private readString(): i32 {
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    if (load<u8>(this.p) !== 0x22) return ERR_SYNTAX;
    const start = this.p + 1;
    const q = scanString(start, this.end);
    if (q < 0) return <i32>q;
    this.strOff = <i32>(start - this.body);
    this.strLen = <i32>(<usize>q - start);
    this.strEsc = stringHasEscape;
    this.p = <usize>q + 1;
    return 0;
  }

  /**
   * Prepares the last string read for literal tests: keyPtr/keyLen/keyHead describe its decoded
   * bytes (decoded into scratch only when it has escapes).
   */
  private prepareKey(): void {
    if (!this.strEsc) {
      this.keyPtr = this.body + <usize>this.strOff;
      this.keyLen = this.strLen;
    } else {
      this.scratch.len = 0;
      // An escaped form of a literal key is at most 6 bytes per character; longer spans match nothing.
      if (this.strLen <= 6 * 24)
        decodeString(this.body + <usize>this.strOff, this.strLen, true, this.scratch);
      this.keyPtr = this.scratch.ptr;
      this.keyLen = this.scratch.len;
    }
    this.keyHead = head8(this.keyPtr, this.keyLen);
  }

  @inline private keyIs(lit: Literal): bool {
    return lit.is(this.keyPtr, this.keyLen, this.keyHead);
  }

  /** Does the last string read equal the literal (after decoding escapes)? */
  private strIs(lit: Literal): bool {
    this.prepareKey();
    return this.keyIs(lit);
  }

  /** Reads `"key" :` and classifies the key for the given level (0 top, 1 message, 2 part). */
  private readKey(level: i32): i32 {
    const r = this.readString();
    if (r < 0) return r;
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    if (load<u8>(this.p) !== 0x3a) return ERR_SYNTAX;
    this.p++;
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    this.prepareKey();
    if (level === 0) return this.topKey();
    if (level === 1) return this.messageKey();
    if (this.keyIs(L_TYPE)) return P_TYPE;
    if (this.keyIs(L_TEXT)) return P_TEXT;
    return K_OTHER;
  }

  private topKey(): i32 {
    switch (this.keyLen) {
      case 5:
        if (this.keyIs(L_MODEL)) return K_MODEL;
        if (this.keyIs(L_TOOLS)) return K_TOOLS;
        break;
      case 6:
        if (this.keyIs(L_PROMPT)) return K_PROMPT;
        if (this.keyIs(L_STREAM)) return K_STREAM;
        if (this.keyIs(L_SUFFIX)) return K_SUFFIX;
        break;
      case 8:
        if (this.keyIs(L_MESSAGES)) return K_MESSAGES;
        break;
      case 9:
        if (this.keyIs(L_LORA_PATH)) return K_LORA_PATH;
        if (this.keyIs(L_DOCUMENTS)) return K_DOCUMENTS;
        break;
      case 10:
        if (this.keyIs(L_CACHE_SALT)) return K_CACHE_SALT;
        break;
      case 13:
        if (this.keyIs(L_CHAT_TEMPLATE)) return K_CHAT_TEMPLATE;
        if (this.keyIs(L_PROMPT_EMBEDS)) return K_PROMPT_EMBEDS;
        break;
      case 18:
        if (this.keyIs(L_ADD_SPECIAL_TOKENS)) return K_ADD_SPECIAL_TOKENS;
        break;
      case 20:
        if (this.keyIs(L_CHAT_TEMPLATE_KWARGS)) return K_CHAT_TEMPLATE_KWARGS;
        break;
      case 21:
        if (this.keyIs(L_ADD_GENERATION_PROMPT)) return K_ADD_GENERATION_PROMPT;
        break;
      case 22:
        if (this.keyIs(L_CONTINUE_FINAL_MESSAGE)) return K_CONTINUE_FINAL_MESSAGE;
        break;
    }
    return K_OTHER;
  }

  private messageKey(): i32 {
    if (this.keyIs(L_ROLE)) return M_ROLE;
    if (this.keyIs(L_CONTENT)) return M_CONTENT;
    if (this.keyIs(L_NAME)) return M_NAME;
    if (this.keyIs(L_TOOL_CALLS)) return M_TOOL_CALLS;
    if (this.keyIs(L_TOOL_CALL_ID)) return M_TOOL_CALL_ID;
    if (this.keyIs(L_REASONING_CONTENT) || this.keyIs(L_REASONING)) return M_REASONING;
    return K_OTHER;
  }

  /** Peeks the first byte of a value (whitespace already skipped by readKey). */
  @inline private peek(): u32 {
    return <u32>load<u8>(this.p);
  }

  /** Consumes `null` if it is next; returns whether it did (errors are left to skipValue). */
  private takeNull(): bool {
    if (this.p + 4 <= this.end && load<u32>(this.p) === 0x6c6c756e) {
      this.p += 4;
      return true;
    }
    return false;
  }

  /** Consumes `true`/`false`: 1/0, or -1 when the value is not a boolean (nothing consumed). */
  private takeBool(): i32 {
    if (this.p + 4 <= this.end && load<u32>(this.p) === 0x65757274) {
      this.p += 4;
      return 1;
    }
    if (this.p + 5 <= this.end && load<u32>(this.p) === 0x736c6166 && load<u8>(this.p, 4) === 0x65) {
      this.p += 5;
      return 0;
    }
    return -1;
  }

  // ---- values ---------------------------------------------------------------------------------

  private topValue(key: i32): i32 {
    if (key === K_OTHER) return this.skipValue();
    if (key === K_MESSAGES) return this.messagesValue();
    if (key === K_PROMPT) return this.promptValue();
    if (key === K_MODEL || key === K_CACHE_SALT || key === K_LORA_PATH) {
      if (this.peek() !== 0x22) {
        // lora_path may be null or a per-prompt list (SGLang); only a string selects an adapter.
        if (key === K_LORA_PATH) this.loraLen = -1;
        else this.flags |= REQ_BAD_FIELD;
        if (key === K_MODEL) this.modelLen = -1;
        if (key === K_CACHE_SALT) this.saltLen = -1;
        return this.skipValue();
      }
      const r = this.readString();
      if (r < 0) return r;
      if (key === K_MODEL) {
        this.modelOff = this.strOff;
        this.modelLen = this.strLen;
        this.modelEsc = this.strEsc;
      } else if (key === K_CACHE_SALT) {
        this.saltOff = this.strOff;
        this.saltLen = this.strLen;
        this.saltEsc = this.strEsc;
      } else {
        this.loraOff = this.strOff;
        this.loraLen = this.strLen;
        this.loraEsc = this.strEsc;
      }
      return 0;
    }
    if (
      key === K_STREAM ||
      key === K_ADD_GENERATION_PROMPT ||
      key === K_CONTINUE_FINAL_MESSAGE ||
      key === K_ADD_SPECIAL_TOKENS
    ) {
      const b = this.takeBool();
      if (b < 0) {
        if (key !== K_STREAM && this.takeNull()) {
          // null means "default" for the prompt switches: nothing to record.
          this.clearSwitch(key);
          return 0;
        }
        this.flags |= REQ_BAD_FIELD;
        return this.skipValue();
      }
      this.clearSwitch(key);
      if (key === K_STREAM) this.stream = b;
      else if (key === K_ADD_GENERATION_PROMPT && b === 0) this.flags |= REQ_ADD_GENERATION_PROMPT_FALSE;
      else if (key === K_CONTINUE_FINAL_MESSAGE && b === 1) this.flags |= REQ_CONTINUE_FINAL_MESSAGE;
      else if (key === K_ADD_SPECIAL_TOKENS)
        this.flags |= b === 1 ? REQ_ADD_SPECIAL_TOKENS_TRUE : REQ_ADD_SPECIAL_TOKENS_FALSE;
      return 0;
    }
    // Presence flags: set unless the value is null.
    if (this.takeNull()) {
      this.flags &= ~this.presenceFlag(key);
      return 0;
    }
    this.flags |= this.presenceFlag(key);
    return this.skipValue();
  }

  /** A repeated switch key wins last: forget what an earlier occurrence set. */
  private clearSwitch(key: i32): void {
    if (key === K_ADD_GENERATION_PROMPT) this.flags &= ~REQ_ADD_GENERATION_PROMPT_FALSE;
    else if (key === K_CONTINUE_FINAL_MESSAGE) this.flags &= ~REQ_CONTINUE_FINAL_MESSAGE;
    else if (key === K_ADD_SPECIAL_TOKENS)
      this.flags &= ~(REQ_ADD_SPECIAL_TOKENS_TRUE | REQ_ADD_SPECIAL_TOKENS_FALSE);
  }

  private presenceFlag(key: i32): i32 {
    if (key === K_CHAT_TEMPLATE) return REQ_CHAT_TEMPLATE;
    if (key === K_CHAT_TEMPLATE_KWARGS) return REQ_CHAT_TEMPLATE_KWARGS;
    if (key === K_TOOLS) return REQ_TOOLS;
    if (key === K_DOCUMENTS) return REQ_DOCUMENTS;
    if (key === K_SUFFIX) return REQ_SUFFIX;
    return REQ_PROMPT_EMBEDS;
  }

  private promptValue(): i32 {
    this.promptLen = -1;
    this.promptCount = 0;
    const c = this.peek();
    if (c === 0x22) {
      const r = this.readString();
      if (r < 0) return r;
      this.promptKind = PROMPT_STRING;
      this.setPromptSpan();
      return 0;
    }
    if (c !== 0x5b) {
      this.promptKind = PROMPT_OTHER;
      return this.skipValue();
    }
    this.p++;
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    if (this.peek() === 0x5d) {
      this.p++;
      this.promptKind = PROMPT_OTHER;
      return 0;
    }
    let strings = 0;
    let numbers = 0;
    let others = 0;
    while (true) {
      this.ws();
      if (this.p >= this.end) return ERR_TRUNCATED;
      const e = this.peek();
      if (e === 0x22) {
        const r = this.readString();
        if (r < 0) return r;
        if (strings === 0) this.setPromptSpan();
        strings++;
      } else {
        if ((e >= 0x30 && e <= 0x39) || e === 0x2d) numbers++;
        else others++;
        const r = this.skipValue();
        if (r < 0) return r;
      }
      if (strings + numbers + others > MAX_PARTS) return ERR_LIMIT;
      const next = this.afterMember(0x5d);
      if (next < 0) return next;
      if (next === 0) break;
    }
    this.promptCount = strings + numbers + others;
    if (numbers === 0 && others === 0) this.promptKind = PROMPT_STRINGS;
    else if (strings === 0 && others === 0) this.promptKind = PROMPT_TOKENS;
    else this.promptKind = PROMPT_OTHER;
    return 0;
  }

  @inline private setPromptSpan(): void {
    this.promptOff = this.strOff;
    this.promptLen = this.strLen;
    this.promptEsc = this.strEsc;
  }

  private messagesValue(): i32 {
    // A repeated "messages" key replaces the earlier list.
    this.msgCount = 0;
    this.partCount = 0;
    this.messages.len = 0;
    this.parts.len = 0;
    if (this.peek() !== 0x5b) {
      this.hasMessages = false;
      this.flags |= REQ_BAD_MESSAGES;
      return this.skipValue();
    }
    this.flags &= ~REQ_BAD_MESSAGES;
    this.hasMessages = true;
    this.p++;
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    if (this.peek() === 0x5d) {
      this.p++;
      return 0;
    }
    while (true) {
      this.ws();
      if (this.p >= this.end) return ERR_TRUNCATED;
      if (this.msgCount >= MAX_MESSAGES) return ERR_LIMIT;
      const r = this.message();
      if (r < 0) return r;
      const next = this.afterMember(0x5d);
      if (next < 0) return next;
      if (next === 0) return 0;
    }
  }

  /** One element of `messages` (whitespace skipped, p < end). */
  private message(): i32 {
    const rec = this.messages.len;
    this.messages.reserve(MSG_RECORD);
    this.messages.len += MSG_RECORD;
    this.msgCount++;
    const m = this.messages.ptr + <usize>rec;
    store<i32>(m, 0); // roleOff
    store<i32>(m, -1, 4); // roleLen
    store<i32>(m, 0, 8); // roleEsc
    store<i32>(m, MSG_NO_ROLE | MSG_NO_CONTENT, 12);
    store<i32>(m, this.partCount, 16);
    store<i32>(m, 0, 20);
    if (this.peek() !== 0x7b) {
      this.setMsgFlag(rec, MSG_BAD);
      return this.skipValue();
    }
    this.p++;
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    if (this.peek() === 0x7d) {
      this.p++;
      return 0;
    }
    while (true) {
      this.ws();
      const key = this.readKey(1);
      if (key < 0) return key;
      const r = this.messageValue(rec, key);
      if (r < 0) return r;
      const next = this.afterMember(0x7d);
      if (next < 0) return next;
      if (next === 0) return 0;
    }
  }

  @inline private setMsgFlag(rec: i32, f: i32): void {
    const a = this.messages.ptr + <usize>rec + 12;
    store<i32>(a, load<i32>(a) | f);
  }

  @inline private clearMsgFlag(rec: i32, f: i32): void {
    const a = this.messages.ptr + <usize>rec + 12;
    store<i32>(a, load<i32>(a) & ~f);
  }

  private messageValue(rec: i32, key: i32): i32 {
    if (key === M_ROLE) {
      if (this.peek() !== 0x22) {
        this.setMsgFlag(rec, MSG_BAD);
        return this.skipValue();
      }
      const r = this.readString();
      if (r < 0) return r;
      const m = this.messages.ptr + <usize>rec;
      store<i32>(m, this.strOff);
      store<i32>(m, this.strLen, 4);
      store<i32>(m, this.strEsc ? 1 : 0, 8);
      this.clearMsgFlag(rec, MSG_NO_ROLE);
      return 0;
    }
    if (key === M_CONTENT) return this.contentValue(rec);
    // Optional OpenAI fields: null is the same as absent.
    if (this.takeNull()) return 0;
    if (key === M_NAME) this.setMsgFlag(rec, MSG_NAME);
    else if (key === M_TOOL_CALLS) this.setMsgFlag(rec, MSG_TOOL_CALLS);
    else if (key === M_TOOL_CALL_ID) this.setMsgFlag(rec, MSG_TOOL_CALL_ID);
    else if (key === M_REASONING) this.setMsgFlag(rec, MSG_REASONING);
    else this.setMsgFlag(rec, MSG_UNKNOWN_FIELD);
    return this.skipValue();
  }

  private addPart(): i32 {
    if (this.partCount >= MAX_PARTS) return ERR_LIMIT;
    const parts = this.parts;
    parts.reserve(PART_RECORD);
    const rec = parts.ptr + <usize>parts.len;
    store<i32>(rec, this.strOff);
    store<i32>(rec, this.strLen, 4);
    store<i32>(rec, this.strEsc ? 1 : 0, 8);
    parts.len += PART_RECORD;
    this.partCount++;
    return 0;
  }

  private contentValue(rec: i32): i32 {
    const m = this.messages.ptr + <usize>rec;
    // A repeated "content" key wins last: start its parts afresh.
    store<i32>(m, this.partCount, 16);
    store<i32>(m, 0, 20);
    this.clearMsgFlag(rec, MSG_NO_CONTENT | MSG_CONTENT_PARTS | MSG_NON_TEXT_PART);
    const c = this.peek();
    if (c === 0x22) {
      const r = this.readString();
      if (r < 0) return r;
      const a = this.addPart();
      if (a < 0) return a;
      store<i32>(this.messages.ptr + <usize>rec, 1, 20);
      return 0;
    }
    if (this.takeNull()) {
      this.setMsgFlag(rec, MSG_NO_CONTENT);
      return 0;
    }
    if (c !== 0x5b) {
      this.setMsgFlag(rec, MSG_BAD);
      return this.skipValue();
    }
    this.setMsgFlag(rec, MSG_CONTENT_PARTS);
    this.p++;
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    if (this.peek() === 0x5d) {
      this.p++;
      return 0;
    }
    while (true) {
      this.ws();
      if (this.p >= this.end) return ERR_TRUNCATED;
      const r = this.part(rec);
      if (r < 0) return r;
      const next = this.afterMember(0x5d);
      if (next < 0) return next;
      if (next === 0) return 0;
    }
  }

  /** One content part: {"type": "text", "text": "..."}; other part keys are ignored, like vLLM. */
  private part(rec: i32): i32 {
    if (this.peek() !== 0x7b) {
      this.setMsgFlag(rec, MSG_BAD);
      return this.skipValue();
    }
    this.p++;
    // 0 no type, 1 "text", 2 another type
    let type = 0;
    let hasText = false;
    let textOff = 0;
    let textLen = 0;
    let textEsc = false;
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    if (this.peek() === 0x7d) {
      this.p++;
    } else {
      while (true) {
        this.ws();
        const key = this.readKey(2);
        if (key < 0) return key;
        if ((key === P_TYPE || key === P_TEXT) && this.peek() === 0x22) {
          const r = this.readString();
          if (r < 0) return r;
          if (key === P_TYPE) {
            type = this.strIs(L_TEXT) ? 1 : 2;
          } else {
            hasText = true;
            textOff = this.strOff;
            textLen = this.strLen;
            textEsc = this.strEsc;
          }
        } else {
          if (key === P_TYPE) type = 2;
          else if (key === P_TEXT) hasText = false;
          const r = this.skipValue();
          if (r < 0) return r;
        }
        const next = this.afterMember(0x7d);
        if (next < 0) return next;
        if (next === 0) break;
      }
    }
    if (type === 1 && hasText) {
      this.strOff = textOff;
      this.strLen = textLen;
      this.strEsc = textEsc;
      const a = this.addPart();
      if (a < 0) return a;
      const cnt = this.messages.ptr + <usize>rec + 20;
      store<i32>(cnt, load<i32>(cnt) + 1);
    } else if (type === 2) {
      this.setMsgFlag(rec, MSG_NON_TEXT_PART);
    } else {
      this.setMsgFlag(rec, MSG_BAD);
    }
    return 0;
  }

  // ---- skipping -------------------------------------------------------------------------------

  /** Skips one scalar at p (whitespace already skipped, p < end). */
  private skipScalar(): i32 {
    const c = this.peek();
    if (c === 0x22) {
      const q = scanString(this.p + 1, this.end);
      if (q < 0) return <i32>q;
      this.p = <usize>q + 1;
      return 0;
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.skipNumber();
    if (this.takeNull() || this.takeBool() >= 0) return 0;
    // A prefix of a literal at the very end is a truncation, anything else bad syntax.
    const left = this.end - this.p;
    if (left < 5) {
      const lit = c === 0x74 ? "true" : c === 0x66 ? "false" : c === 0x6e ? "null" : "";
      if (
        lit.length > 0 &&
        <i32>left < lit.length &&
        bytesEqual(this.p, <i32>left, lit.substring(0, <i32>left))
      ) {
        return ERR_TRUNCATED;
      }
    }
    return ERR_SYNTAX;
  }

  /** JSON number grammar: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)? — only validated, never converted. */
  private skipNumber(): i32 {
    let p = this.p;
    const end = this.end;
    if (load<u8>(p) === 0x2d) {
      p++;
      if (p >= end) return ERR_TRUNCATED;
    }
    let c = <u32>load<u8>(p);
    if (c === 0x30) {
      p++;
    } else if (c >= 0x31 && c <= 0x39) {
      while (p < end && <u32>load<u8>(p) - 0x30 < 10) p++;
    } else {
      return ERR_SYNTAX;
    }
    if (p < end && load<u8>(p) === 0x2e) {
      p++;
      if (p >= end) return ERR_TRUNCATED;
      if (<u32>load<u8>(p) - 0x30 >= 10) return ERR_SYNTAX;
      while (p < end && <u32>load<u8>(p) - 0x30 < 10) p++;
    }
    if (p < end && (load<u8>(p) | 0x20) === 0x65) {
      p++;
      if (p >= end) return ERR_TRUNCATED;
      c = <u32>load<u8>(p);
      if (c === 0x2b || c === 0x2d) {
        p++;
        if (p >= end) return ERR_TRUNCATED;
      }
      if (<u32>load<u8>(p) - 0x30 >= 10) return ERR_SYNTAX;
      while (p < end && <u32>load<u8>(p) - 0x30 < 10) p++;
    }
    this.p = p;
    return 0;
  }

  /**
   * Skips one value of any shape without recursion: the kinds of the open containers live in
   * `stack` (one byte per level), bounded by MAX_DEPTH.
   */
  skipValue(): i32 {
    const stack = this.stack.ptr;
    let depth = 0;
    while (true) {
      // Here a value is expected.
      this.ws();
      if (this.p >= this.end) return ERR_TRUNCATED;
      const c = this.peek();
      if (c === 0x7b || c === 0x5b) {
        if (depth >= MAX_DEPTH) return ERR_DEPTH;
        const isObject = c === 0x7b;
        store<u8>(stack + <usize>depth, isObject ? 1 : 0);
        depth++;
        this.p++;
        this.ws();
        if (this.p >= this.end) return ERR_TRUNCATED;
        if (this.peek() === (isObject ? 0x7d : 0x5d)) {
          this.p++;
          depth--;
        } else {
          if (isObject) {
            const k = this.skipKey();
            if (k < 0) return k;
          }
          continue;
        }
      } else {
        const r = this.skipScalar();
        if (r < 0) return r;
      }
      // A value ended: close containers until one continues with ','.
      while (true) {
        if (depth === 0) return 0;
        const isObject = load<u8>(stack + <usize>(depth - 1)) === 1;
        const next = this.afterMember(isObject ? 0x7d : 0x5d);
        if (next < 0) return next;
        if (next === 1) {
          if (isObject) {
            const k = this.skipKey();
            if (k < 0) return k;
          }
          break;
        }
        depth--;
      }
    }
  }

  /** Skips `"key" :` inside a skipped object. */
  private skipKey(): i32 {
    const r = this.readString();
    if (r < 0) return r;
    this.ws();
    if (this.p >= this.end) return ERR_TRUNCATED;
    if (load<u8>(this.p) !== 0x3a) return ERR_SYNTAX;
    this.p++;
    return 0;
  }
}
