// The routing core for the control plane: typed wrappers over build/kvroute-core.wasm, the very
// code the filter runs (DESIGN §2). The control plane never re-implements hashing, scanning or
// rendering; it calls these.
import { core } from "./core-wasm.ts";
import type { SegmentTemplate } from "./segment-template.ts";
import { encodeSegmentTemplate } from "./segment-template-codec.ts";

export { encodeSegmentTemplate } from "./segment-template-codec.ts";

export const DEFAULT_CHUNK_SIZE = 128;
/** Streams longer than this are cut (and reported partial) unless the caller says otherwise. */
export const DEFAULT_MAX_STREAM_BYTES = 8 << 20;

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();
const U64 = (v: bigint): bigint => BigInt.asUintN(64, v);

// ---- hashing ------------------------------------------------------------------------------------

export function xxh64(bytes: Uint8Array, seed: bigint): bigint {
  const c = core();
  c.writeIo(bytes);
  return U64(c.ex.xxh64Io(bytes.length, seed));
}

/** Resumable chunk-chain state: the last chunk hash (h0 at the start) and the incomplete chunk. */
export interface ChunkState {
  prev: bigint;
  partial: Uint8Array;
}

/** h0 = XXH64(model ‖ 0 ‖ lora ‖ 0 ‖ cacheSalt, 0) — docs/wire-format.md §3. */
export function rootHash(model: string, lora = "", cacheSalt = ""): bigint {
  const c = core();
  const [m = 0, l = 0, s = 0] = c.writeIo(utf8.encode(model), utf8.encode(lora), utf8.encode(cacheSalt));
  return U64(c.ex.rootHashIo(m, l, s));
}

export function initialState(model: string, lora = "", cacheSalt = ""): ChunkState {
  return { prev: rootHash(model, lora, cacheSalt), partial: new Uint8Array(0) };
}

const EMPTY_HASHES = new BigUint64Array(0);

/**
 * Continues the chain with `bytes`: returns the hashes of the chunks completed by them and the
 * next state. Splitting a stream anywhere across calls gives the same hashes as one call.
 */
export function feedChunks(
  state: ChunkState,
  bytes: Uint8Array,
  chunkSize = DEFAULT_CHUNK_SIZE,
): { hashes: BigUint64Array; state: ChunkState } {
  const hashes: bigint[] = [];
  const next = feedChunksEach(state, bytes, chunkSize, (h) => hashes.push(h));
  return { hashes: hashes.length === 0 ? EMPTY_HASHES : BigUint64Array.from(hashes), state: next };
}

/**
 * feedChunks for the KV-event ingest path: calls `onHash` for each completed chunk instead of
 * allocating an array, since most 16-token blocks complete no chunk or one.
 */
export function feedChunksEach(
  state: ChunkState,
  bytes: Uint8Array,
  chunkSize: number,
  onHash: (hash: bigint) => void,
): ChunkState {
  if (!Number.isInteger(chunkSize) || chunkSize < 1 || chunkSize > 0x7fffffff) {
    throw new RangeError(`chunkSize must be a positive integer (got ${chunkSize})`);
  }
  const c = core();
  const partialLen = state.partial.length;
  const total = partialLen + bytes.length;
  const ptr = c.io(total);
  const mem = c.u8;
  if (partialLen > 0) mem.set(state.partial, ptr);
  mem.set(bytes, ptr + partialLen);
  const count = c.ex.chunkFeedIo(state.prev, total, chunkSize);
  let prev = state.prev;
  if (count > 0) {
    const at = c.ex.hashPtr();
    const view = c.u64view;
    for (let i = 0; i < count; i++) {
      prev = view[(at >>> 3) + i] as bigint;
      onHash(prev);
    }
  }
  return { prev, partial: c.u8.slice(ptr + count * chunkSize, ptr + total) };
}

export interface ChunkHashInput {
  model: string;
  lora?: string;
  cacheSalt?: string;
  stream: Uint8Array;
  chunkSize?: number;
}

/** The chunk hashes of a whole stream (complete chunks only). */
export function chunkHashes(input: ChunkHashInput): BigUint64Array {
  const start = initialState(input.model, input.lora ?? "", input.cacheSalt ?? "");
  return feedChunks(start, input.stream, input.chunkSize ?? DEFAULT_CHUNK_SIZE).hashes;
}

// ---- scanning -----------------------------------------------------------------------------------

export type ScanError = "truncated" | "syntax" | "utf8" | "depth" | "not-object" | "limit" | "argument";
const SCAN_ERRORS: Record<number, ScanError> = {
  [-1]: "truncated",
  [-2]: "syntax",
  [-3]: "utf8",
  [-4]: "depth",
  [-5]: "not-object",
  [-6]: "limit",
  [-7]: "argument",
};

export type PromptKind = "absent" | "string" | "strings" | "tokens" | "other";
const PROMPT_KINDS: readonly PromptKind[] = ["absent", "string", "strings", "tokens", "other"];

/** Request-level flags (bit order = filter/core/json-scan.ts REQ_*). */
const REQUEST_FLAGS = [
  "addGenerationPromptFalse",
  "continueFinalMessage",
  "chatTemplate",
  "chatTemplateKwargs",
  "tools",
  "documents",
  "addSpecialTokensTrue",
  "addSpecialTokensFalse",
  "suffix",
  "promptEmbeds",
  "badField",
  "badMessages",
] as const;
export type RequestFlag = (typeof REQUEST_FLAGS)[number];

/** Message flags (bit order = filter/core/json-scan.ts MSG_*). */
const MESSAGE_FLAGS = [
  "name",
  "toolCalls",
  "toolCallId",
  "reasoning",
  "nonTextPart",
  "noContent",
  "bad",
  "unknownField",
  "noRole",
  "contentParts",
] as const;
export type MessageFlag = (typeof MESSAGE_FLAGS)[number];
/** Flags that make a message inexpressible through a segment template (all but contentParts). */
export const INEXPRESSIBLE_MESSAGE_FLAGS: readonly MessageFlag[] = MESSAGE_FLAGS.slice(0, -1);

export interface ScannedMessage {
  /** Decoded role, or null when absent / not a string. */
  role: string | null;
  /** Decoded text: the content string, or the text parts in order. */
  texts: string[];
  flags: MessageFlag[];
}

export interface ScannedRequest {
  ok: true;
  model?: string;
  prompt: { kind: PromptKind; count: number; first?: string };
  stream?: boolean;
  cacheSalt?: string;
  /** SGLang's `lora_path` when it is a string (vLLM selects adapters by `model`). */
  loraPath?: string;
  flags: RequestFlag[];
  /** Present when `messages` is an array. */
  messages?: ScannedMessage[];
}

export type ScanResult = ScannedRequest | { ok: false; error: ScanError };

function flagNames<T extends string>(bits: number, names: readonly T[]): T[] {
  return names.filter((_, i) => (bits & (1 << i)) !== 0);
}

function bodyBytes(body: Uint8Array | string): Uint8Array {
  return typeof body === "string" ? utf8.encode(body) : body;
}

/** Scans an OpenAI request body the way the filter does. */
export function scanRequest(body: Uint8Array | string): ScanResult {
  const c = core();
  const bytes = bodyBytes(body);
  c.writeIo(bytes);
  const err = c.ex.scanIo(bytes.length);
  if (err < 0) return { ok: false, error: SCAN_ERRORS[err] ?? "syntax" };
  const f = new Int32Array(c.buffer.slice(c.ex.scanResultPtr(), c.ex.scanResultPtr() + 80));
  const at = (i: number): number => f[i] as number;
  const str = (off: number, len: number, esc: number): string | undefined => {
    if (len < 0) return undefined;
    const n = c.ex.decodeSpanIo(off, len, esc);
    return fromUtf8.decode(c.u8.subarray(c.ex.decodedPtr(), c.ex.decodedPtr() + n));
  };
  const result: ScannedRequest = {
    ok: true,
    prompt: { kind: PROMPT_KINDS[at(3)] ?? "other", count: at(7) },
    flags: flagNames(at(15), REQUEST_FLAGS),
  };
  const model = str(at(0), at(1), at(2));
  if (model !== undefined) result.model = model;
  const first = str(at(4), at(5), at(6));
  if (first !== undefined) result.prompt.first = first;
  if (at(8) >= 0) result.stream = at(8) === 1;
  const salt = str(at(9), at(10), at(11));
  if (salt !== undefined) result.cacheSalt = salt;
  const lora = str(at(12), at(13), at(14));
  if (lora !== undefined) result.loraPath = lora;
  if (at(16) === 1) {
    const count = at(17);
    const msgs = new Int32Array(c.buffer.slice(c.ex.scanMessagesPtr(), c.ex.scanMessagesPtr() + count * 24));
    const parts = new Int32Array(c.buffer.slice(c.ex.scanPartsPtr(), c.ex.scanPartsPtr() + at(18) * 12));
    result.messages = [];
    for (let i = 0; i < count; i++) {
      const m = (k: number): number => msgs[i * 6 + k] as number;
      const texts: string[] = [];
      for (let k = 0; k < m(5); k++) {
        const p = (m(4) + k) * 3;
        texts.push(str(parts[p] as number, parts[p + 1] as number, parts[p + 2] as number) ?? "");
      }
      result.messages.push({
        role: str(m(0), m(1), m(2)) ?? null,
        texts,
        flags: flagNames(m(3), MESSAGE_FLAGS),
      });
    }
  }
  return result;
}

// ---- rendering ----------------------------------------------------------------------------------

export type RenderStatus = "none" | "partial" | "exact";
const STATUSES: readonly RenderStatus[] = ["none", "partial", "exact"];

export interface RenderResult {
  status: RenderStatus;
  /** The canonical prompt stream (an exact prefix when partial; empty when none). */
  stream: Uint8Array;
  /** Set when the body is not a usable request. */
  error?: ScanError;
}

export type Endpoint = "chat" | "completions";
const ENDPOINT_CODES: Record<Endpoint, number> = { chat: 1, completions: 2 };

/** Loaded templates by their encoding; bounded so a long-lived process cannot leak. */
const templateIds = new Map<string, number>();
const MAX_LOADED_TEMPLATES = 64;

function templateId(t: SegmentTemplate): number {
  const encoded = encodeSegmentTemplate(t);
  const key = Buffer.from(encoded).toString("latin1");
  const known = templateIds.get(key);
  if (known !== undefined) return known;
  const c = core();
  c.writeIo(encoded);
  const id = c.ex.templateLoad(encoded.length);
  if (id < 0) throw new Error(`the core rejected the segment template (code ${id})`);
  if (templateIds.size >= MAX_LOADED_TEMPLATES) {
    const [oldKey, oldId] = templateIds.entries().next().value as [string, number];
    templateIds.delete(oldKey);
    c.ex.templateFree(oldId);
  }
  templateIds.set(key, id);
  return id;
}

/**
 * Validates a segment-template encoding with the core's own decoder: 0 when accepted, else the
 * negative TPL_ERR_* code (filter/core/segment-template.ts).
 */
export function checkSegmentTemplateBytes(encoded: Uint8Array): number {
  const c = core();
  c.writeIo(encoded);
  const id = c.ex.templateLoad(encoded.length);
  if (id < 0) return id;
  c.ex.templateFree(id);
  return 0;
}

export interface RenderRequestOptions {
  /** Which endpoint the body was sent to; by default chat when it has `messages`. */
  endpoint?: Endpoint;
  maxStreamBytes?: number;
}

/** Renders a request body exactly as the filter does (docs/wire-format.md §1–§2). */
export function renderRequest(
  body: Uint8Array | string,
  template: SegmentTemplate | null,
  bosText = "",
  options: RenderRequestOptions = {},
): RenderResult {
  const c = core();
  const bytes = bodyBytes(body);
  const endpoint = options.endpoint ?? guessEndpoint(bytes);
  const id = template === null ? -1 : templateId(template);
  const [bodyLen = 0, bosLen = 0] = c.writeIo(bytes, utf8.encode(bosText));
  const r = c.ex.renderIo(
    bodyLen,
    ENDPOINT_CODES[endpoint],
    id,
    bosLen,
    options.maxStreamBytes ?? DEFAULT_MAX_STREAM_BYTES,
  );
  if (r < 0) return { status: "none", stream: new Uint8Array(0), error: SCAN_ERRORS[r] ?? "syntax" };
  return { status: STATUSES[r] ?? "none", stream: c.bytes(c.ex.renderedPtr(), c.ex.renderedLen()) };
}

function guessEndpoint(body: Uint8Array): Endpoint {
  const s = scanRequest(body);
  return s.ok && s.messages === undefined && s.prompt.kind !== "absent" ? "completions" : "chat";
}

export interface ChatRenderOptions {
  addGenerationPrompt?: boolean;
  continueFinalMessage?: boolean;
  tools?: unknown[];
  chatTemplateKwargs?: Record<string, unknown>;
}

export interface ChatMessageInput {
  role: string;
  content: string | Array<{ type: string; text?: string }> | null;
  [key: string]: unknown;
}

/**
 * Renders a conversation through a segment template with the filter's code: the messages go
 * through the same JSON scanner a real request does.
 */
export function renderChat(
  template: SegmentTemplate,
  messages: ChatMessageInput[],
  options: ChatRenderOptions = {},
): RenderResult {
  const body: Record<string, unknown> = { messages };
  if (options.addGenerationPrompt !== undefined) body.add_generation_prompt = options.addGenerationPrompt;
  if (options.continueFinalMessage !== undefined) body.continue_final_message = options.continueFinalMessage;
  if (options.tools !== undefined) body.tools = options.tools;
  if (options.chatTemplateKwargs !== undefined) body.chat_template_kwargs = options.chatTemplateKwargs;
  return renderRequest(JSON.stringify(body), template, "", { endpoint: "chat" });
}

// ---- the filter's whole pipeline ----------------------------------------------------------------

export interface HashRequestOptions {
  endpoint: Endpoint;
  template: SegmentTemplate | null;
  bosText?: string;
  /** The pool's canonical model name and adapter (wire-format §3). */
  model: string;
  lora?: string;
  chunkSize?: number;
  maxStreamBytes?: number;
}

export interface HashRequestResult extends RenderResult {
  hashes: BigUint64Array;
}

/** Scan + render + chunk hashes of one request body, the filter's hot path. */
export function hashRequest(body: Uint8Array | string, o: HashRequestOptions): HashRequestResult {
  const c = core();
  const id = o.template === null ? -1 : templateId(o.template);
  const [bodyLen = 0, bosLen = 0, modelLen = 0, loraLen = 0] = c.writeIo(
    bodyBytes(body),
    utf8.encode(o.bosText ?? ""),
    utf8.encode(o.model),
    utf8.encode(o.lora ?? ""),
  );
  const r = c.ex.hashRequestIo(
    bodyLen,
    ENDPOINT_CODES[o.endpoint],
    id,
    bosLen,
    modelLen,
    loraLen,
    o.chunkSize ?? DEFAULT_CHUNK_SIZE,
    o.maxStreamBytes ?? DEFAULT_MAX_STREAM_BYTES,
  );
  if (r < 0)
    return {
      status: "none",
      stream: new Uint8Array(0),
      hashes: EMPTY_HASHES,
      error: SCAN_ERRORS[r] ?? "syntax",
    };
  return {
    status: STATUSES[r] ?? "none",
    stream: c.bytes(c.ex.renderedPtr(), c.ex.renderedLen()),
    hashes: c.u64s(c.ex.hashPtr(), c.ex.hashCount()),
  };
}

// ---- rank headers -------------------------------------------------------------------------------

export type RankHeader = { kind: "absent" } | { kind: "invalid" } | { kind: "rank"; rank: number };

/** Strict DP-rank header parse (REFERENCE §1.1): canonical decimal u32, one value. */
export function parseRankHeader(value: string | undefined): RankHeader {
  if (value === undefined) return { kind: "absent" };
  const c = core();
  const [len = 0] = c.writeIo(utf8.encode(value));
  const r = c.ex.parseRankIo(len);
  return r < 0n ? { kind: "invalid" } : { kind: "rank", rank: Number(r) };
}

// ---- served cached tokens (response usage) ----------------------------------------------------

export interface ServedUsage {
  /** A complete document carried a `usage` object. */
  usage: boolean;
  /** `usage.prompt_tokens_details.cached_tokens`, when a complete document carried a valid one. */
  cachedTokens?: number;
  /** The scan stopped at its byte budget before the body ended. */
  cut: boolean;
  /** Bytes the scan looked at. */
  scanned: number;
}

/** Default byte budget of a response scan (the filter's `usageScanBytes` default). */
export const DEFAULT_USAGE_SCAN_BYTES = 16 * 1024 * 1024;

/**
 * Runs the filter's response scanner (filter/core/usage-scan.ts) over a body given as the chunks
 * it arrived in: `json` for an `application/json` body, `sse` for `text/event-stream`.
 */
export function scanServedUsage(
  chunks: ReadonlyArray<string | Uint8Array>,
  mode: "json" | "sse",
  budget = DEFAULT_USAGE_SCAN_BYTES,
): ServedUsage {
  const c = core();
  c.ex.usageBegin(mode === "json" ? 1 : 2, budget);
  for (const chunk of chunks) {
    const bytes = typeof chunk === "string" ? utf8.encode(chunk) : chunk;
    c.writeIo(bytes);
    c.ex.usageFeedIo(bytes.length);
  }
  const flags = c.ex.usageFinish();
  const out: ServedUsage = { usage: (flags & 1) !== 0, cut: (flags & 4) !== 0, scanned: c.ex.usageScanned() };
  if ((flags & 2) !== 0) out.cachedTokens = c.ex.usageCached();
  return out;
}

/** Which answers the filter reads for served cached tokens, from their two headers. */
export function servedUsageMode(contentType?: string, contentEncoding?: string): "json" | "sse" | null {
  const c = core();
  const t = contentType === undefined ? new Uint8Array(0) : utf8.encode(contentType);
  const e = contentEncoding === undefined ? new Uint8Array(0) : utf8.encode(contentEncoding);
  c.writeIo(t, e);
  const m = c.ex.usageModeIo(
    contentType === undefined ? -1 : t.length,
    contentEncoding === undefined ? -1 : e.length,
  );
  return m === 1 ? "json" : m === 2 ? "sse" : null;
}
