// Builds, once per model, the compact id → bytes table the control plane uses to turn
// KV-event `token_ids` back into the canonical prompt stream (DESIGN §2.1,
// docs/wire-format.md "Token bytes"). One Uint8Array holds every token's bytes back to back,
// `offsets[id]..offsets[id+1]` is token `id`; a flag byte per id carries what the
// leading-space rule needs. Reading it is a bounds check and a short copy per token.
import { byteLevelStringToBytes } from "./byte-level-alphabet.ts";

/** Flag bits per token id. */
export const TOKEN_VALID = 1;
/** An added token matched before normalization: the text after it is a new normalized segment. */
export const TOKEN_SEGMENT_BOUNDARY = 2;
/** A metaspace vocabulary token whose first byte is the space that `▁` stands for. */
export const TOKEN_SPACE_FIRST = 4;

/**
 * When a metaspace tokenizer prepends `▁` (its "dummy prefix") to a normalized segment:
 * - "always": every segment — the sequence start and the text after every added token that is
 *   split off before normalization (HF `Prepend` normalizer, Metaspace `prepend_scheme: always`,
 *   legacy `add_prefix_space: true`; Llama-2, Mistral v1);
 * - "first": only the segment at the very start of the input (`prepend_scheme: first`);
 * - "none": never (byte-level vocabularies, or metaspace without a prefix).
 */
export type DummyPrefixRule = "always" | "first" | "none";

export type VocabularyScheme = "byte-level" | "metaspace";

export interface TokenBytesTable {
  readonly scheme: VocabularyScheme;
  readonly dummyPrefix: DummyPrefixRule;
  /** Number of ids covered (max id + 1). Ids in gaps are not TOKEN_VALID. */
  readonly size: number;
  /** All token bytes, back to back. */
  readonly bytes: Uint8Array;
  /** offsets[id] .. offsets[id + 1] delimits token id's bytes; length size + 1. */
  readonly offsets: Uint32Array;
  /** TOKEN_* bits per id. */
  readonly flags: Uint8Array;
  /** Longest token in bytes: ids.length * maxTokenBytes always suffices as an output buffer. */
  readonly maxTokenBytes: number;
  /**
   * Added tokens with `lstrip`/`rstrip`: the tokenizer swallows whitespace next to them, so
   * their bytes cannot reproduce the input exactly. Listed for the operator; empty for
   * Qwen3, Llama-3.1 and Llama-2.
   */
  readonly whitespaceAbsorbingTokens: readonly string[];
  /** Byte-level vocabulary strings outside GPT-2's alphabet: their ids read as unknown. */
  readonly unusableVocabularyEntries: number;
}

export type BuildTokenBytesResult = { ok: true; table: TokenBytesTable } | { ok: false; reason: string };

type Json = Record<string, unknown>;

interface AddedToken {
  id: number;
  content: string;
  special?: boolean;
  normalized?: boolean;
  lstrip?: boolean;
  rstrip?: boolean;
}

const METASPACE = "▁";
const BYTE_FALLBACK = /^<0x([0-9A-Fa-f]{2})>$/;
const utf8 = new TextEncoder();

function isObject(x: unknown): x is Json {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/** A component and, for `Sequence` components, all of its parts, flattened. */
function flatten(component: unknown): Json[] {
  if (!isObject(component)) return [];
  const parts =
    component.normalizers ?? component.pretokenizers ?? component.pre_tokenizers ?? component.decoders;
  if (component.type === "Sequence" && Array.isArray(parts)) return parts.flatMap(flatten);
  return [component];
}

function patternString(pattern: unknown): string | undefined {
  if (typeof pattern === "string") return pattern;
  if (isObject(pattern) && typeof pattern.String === "string") return pattern.String;
  return undefined;
}

interface Scheme {
  scheme: VocabularyScheme;
  dummyPrefix: DummyPrefixRule;
  /** The metaspace replacement character (`▁` in every model seen so far). */
  replacement: string;
}

/** Reads how the tokenizer maps text to vocabulary strings from its normalizer/pre-tokenizer/decoder. */
function detectScheme(tokenizer: Json): Scheme | string {
  const normalizers = flatten(tokenizer.normalizer);
  const preTokenizers = flatten(tokenizer.pre_tokenizer);
  const decoders = flatten(tokenizer.decoder);
  const all = [...normalizers, ...preTokenizers, ...decoders];
  if (all.some((c) => c.type === "ByteLevel")) {
    const prefixed = preTokenizers.some((c) => c.type === "ByteLevel" && c.add_prefix_space === true);
    // A ByteLevel pre-tokenizer with add_prefix_space invents a space the text did not have
    // and keeps no trace of it in the ids; no model we serve does this, so refuse it rather
    // than emit a stream that differs from the filter's.
    if (prefixed) return "byte-level pre-tokenizer with add_prefix_space=true is not supported";
    return { scheme: "byte-level", dummyPrefix: "none", replacement: METASPACE };
  }
  const metaPre = preTokenizers.find((c) => c.type === "Metaspace");
  if (metaPre !== undefined) {
    const replacement = typeof metaPre.replacement === "string" ? metaPre.replacement : METASPACE;
    let dummyPrefix: DummyPrefixRule;
    if (typeof metaPre.prepend_scheme === "string") {
      const s = metaPre.prepend_scheme;
      if (s !== "always" && s !== "first" && s !== "never") return `unknown Metaspace prepend_scheme "${s}"`;
      dummyPrefix = s === "never" ? "none" : s;
    } else {
      // Before prepend_scheme existed, add_prefix_space (default true) meant "always".
      dummyPrefix = metaPre.add_prefix_space === false ? "none" : "always";
    }
    return { scheme: "metaspace", dummyPrefix, replacement };
  }
  const replaceSpace = normalizers.find((c) => c.type === "Replace" && patternString(c.pattern) === " ");
  const decodesMeta = decoders.some(
    (c) => c.type === "Metaspace" || (c.type === "Replace" && c.content === " "),
  );
  if (replaceSpace !== undefined || decodesMeta) {
    const replacement = typeof replaceSpace?.content === "string" ? replaceSpace.content : METASPACE;
    const prepend = normalizers.some((c) => c.type === "Prepend" && c.prepend === replacement);
    return { scheme: "metaspace", dummyPrefix: prepend ? "always" : "none", replacement };
  }
  const model = isObject(tokenizer.model) ? tokenizer.model.type : undefined;
  return `no byte-level or metaspace space handling found (model ${String(model)}): token bytes would not be exact`;
}

/** Vocabulary entries as (string, id): BPE/WordLevel store an object, Unigram an array of [piece, score]. */
function vocabEntries(model: Json): Array<[string, number]> | string {
  const vocab = model.vocab;
  if (Array.isArray(vocab)) {
    return vocab.map((entry, id): [string, number] => [Array.isArray(entry) ? String(entry[0]) : "", id]);
  }
  if (isObject(vocab)) return Object.entries(vocab) as Array<[string, number]>;
  return "tokenizer.json model has no vocab";
}

function metaspaceBytes(token: string, replacement: string, byteFallback: boolean): Uint8Array {
  if (byteFallback) {
    const m = BYTE_FALLBACK.exec(token);
    if (m !== null) return Uint8Array.of(Number.parseInt(m[1] as string, 16));
  }
  return utf8.encode(token.split(replacement).join(" "));
}

export function buildTokenBytesTable(tokenizer: Json): BuildTokenBytesResult {
  const model = tokenizer.model;
  if (!isObject(model)) return { ok: false, reason: "tokenizer.json has no model" };
  if (model.type === "WordPiece") {
    return { ok: false, reason: "WordPiece vocabularies drop spaces: token bytes would not be exact" };
  }
  const scheme = detectScheme(tokenizer);
  if (typeof scheme === "string") return { ok: false, reason: scheme };
  const entries = vocabEntries(model);
  if (typeof entries === "string") return { ok: false, reason: entries };
  const added = (Array.isArray(tokenizer.added_tokens) ? tokenizer.added_tokens : []) as AddedToken[];

  const perId = new Map<number, { bytes: Uint8Array; flags: number }>();
  const byteFallback = model.byte_fallback === true;
  const malformed: Array<[string, number]> = [];
  for (const [token, id] of entries) {
    if (!Number.isInteger(id) || id < 0) continue;
    if (scheme.scheme === "byte-level") {
      const bytes = byteLevelStringToBytes(token);
      if (bytes === null) malformed.push([token, id]);
      else perId.set(id, { bytes, flags: TOKEN_VALID });
    } else {
      const bytes = metaspaceBytes(token, scheme.replacement, byteFallback);
      const spaceFirst = token.startsWith(scheme.replacement) ? TOKEN_SPACE_FIRST : 0;
      perId.set(id, { bytes, flags: TOKEN_VALID | spaceFirst });
    }
  }
  if (malformed.length > entries.length / 100) {
    // A handful of odd entries is tolerated (they become unknown ids, counted in
    // unusableVocabularyEntries); many mean the scheme was misread.
    return { ok: false, reason: `${malformed.length} vocabulary entries are not byte-level strings` };
  }
  const whitespaceAbsorbingTokens: string[] = [];
  const addedIds = new Set<number>();
  for (const a of added) {
    if (!Number.isInteger(a.id) || a.id < 0 || typeof a.content !== "string") continue;
    // HF tokenizers' AddedToken default: normalized = !special. Tokens matched on the raw text
    // (normalized=false) split it into independently normalized segments.
    const normalized = a.normalized ?? a.special !== true;
    if (a.lstrip === true || a.rstrip === true) whitespaceAbsorbingTokens.push(a.content);
    addedIds.add(a.id);
    perId.set(a.id, {
      bytes: utf8.encode(a.content),
      flags: TOKEN_VALID | (normalized ? 0 : TOKEN_SEGMENT_BOUNDARY),
    });
  }

  let size = 0;
  let total = 0;
  let maxTokenBytes = 0;
  for (const [id, t] of perId) {
    size = Math.max(size, id + 1);
    total += t.bytes.length;
    maxTokenBytes = Math.max(maxTokenBytes, t.bytes.length);
  }
  const bytes = new Uint8Array(total);
  const offsets = new Uint32Array(size + 1);
  const flags = new Uint8Array(size);
  let pos = 0;
  for (let id = 0; id < size; id++) {
    offsets[id] = pos;
    const t = perId.get(id);
    if (t === undefined) continue;
    bytes.set(t.bytes, pos);
    pos += t.bytes.length;
    flags[id] = t.flags;
  }
  offsets[size] = pos;
  return {
    ok: true,
    table: {
      scheme: scheme.scheme,
      dummyPrefix: scheme.dummyPrefix,
      size,
      bytes,
      offsets,
      flags,
      maxTokenBytes,
      whitespaceAbsorbingTokens,
      // Added tokens replace malformed vocabulary strings with the same id (GPT-2 style files).
      unusableVocabularyEntries: malformed.filter(([, id]) => !addedIds.has(id)).length,
    },
  };
}
