// Request bodies for fuzzing the core: valid chat/completion bodies and mutations of them
// (truncation, byte flips, insertions of JSON-significant bytes, deep nesting, huge strings,
// splices), plus raw random bytes. Used by test/core/fuzz.test.ts and scripts/fuzz-core.ts.
import { type HashRequestResult, hashRequest } from "../../control-plane/src/core/kvroute-core.ts";
import type { SegmentTemplate } from "../../control-plane/src/core/segment-template.ts";
import {
  pick,
  randomConversation,
  seededRandom,
} from "../../control-plane/src/tokens/random-conversations.ts";

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

const INSERTS: readonly string[] = [
  "[",
  "]",
  "{",
  "}",
  '"',
  "\\",
  ":",
  ",",
  "\\u",
  "\\uD83D",
  "\\uDE00",
  "\\u00",
  "\u0000",
  "\u001f",
  "null",
  "true",
  "-",
  "1e99999",
  "0.",
  '"messages":',
  '"model":"m"',
  '{"role":"user","content":"x"}',
  '[{"type":"text","text":"t"}]',
  "\uD83C\uDF0D",
];
const RAW_BYTES = [0x80, 0xbf, 0xc0, 0xc1, 0xed, 0xf4, 0xf5, 0xff, 0xe0, 0xf0];

export class BodyFuzzer {
  readonly rand: () => number;

  constructor(seed: number) {
    this.rand = seededRandom(seed);
  }

  private int(n: number): number {
    return Math.floor(this.rand() * n);
  }

  /** A valid body: chat (often with parts, flags, escapes) or completions. */
  validBody(): string {
    const r = this.rand;
    if (r() < 0.25) {
      const prompt = r() < 0.7 ? this.text() : r() < 0.5 ? [this.text()] : [1, 2, 3];
      return JSON.stringify({ model: "m", prompt, stream: r() < 0.5, max_tokens: 16 });
    }
    const messages: unknown[] = randomConversation(r, ["tool"]).map((m) => {
      if (r() < 0.15)
        return {
          ...m,
          content: [
            { type: "text", text: m.content },
            { type: "text", text: "b" },
          ],
        };
      if (r() < 0.05) return { ...m, name: "n" };
      return m;
    });
    const body: Record<string, unknown> = { messages, model: "m", temperature: 0.5 };
    if (r() < 0.1)
      body.tools = [{ type: "function", function: { name: "f", parameters: { a: [1, { b: null }] } } }];
    if (r() < 0.1) body.cache_salt = this.text();
    if (r() < 0.1) body.chat_template_kwargs = { enable_thinking: false };
    if (r() < 0.05) body.add_generation_prompt = false;
    // Sometimes escape every non-ASCII character, the way Python's json.dumps does.
    let s = JSON.stringify(body);
    if (r() < 0.3)
      s = s.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
    return s;
  }

  private text(): string {
    const r = this.rand;
    let s = "";
    const n = this.int(6);
    for (let i = 0; i < n; i++)
      s += pick(r, ["hello ", "日本", "🌍", "\n", '"q"', "\\", "\u0085", "\u2028", "x".repeat(100)]);
    return s;
  }

  /** A valid body, mutated zero or more times; sometimes random bytes. */
  next(): Uint8Array {
    const r = this.rand;
    if (r() < 0.03) {
      const b = new Uint8Array(this.int(200));
      for (let i = 0; i < b.length; i++) b[i] = this.int(256);
      return b;
    }
    let b: Uint8Array = utf8.encode(this.validBody());
    const mutations = r() < 0.2 ? 0 : 1 + this.int(4);
    for (let k = 0; k < mutations; k++) b = this.mutate(b);
    return b;
  }

  private mutate(b: Uint8Array): Uint8Array {
    const r = this.rand;
    const at = this.int(b.length + 1);
    const m = r();
    if (m < 0.2) return b.subarray(0, at); // truncation
    if (m < 0.4) {
      const c = Uint8Array.from(b); // byte flips
      for (let i = 0; i < 1 + this.int(3) && c.length > 0; i++)
        c[this.int(c.length)] = r() < 0.5 ? this.int(256) : (pick(r, RAW_BYTES) as number);
      return c;
    }
    if (m < 0.65) return splice(b, at, 0, utf8.encode(pick(r, INSERTS))); // insertion
    if (m < 0.75) return splice(b, at, this.int(20), new Uint8Array(0)); // deletion
    if (m < 0.82) {
      // deep nesting, occasionally far past any limit
      const depth = r() < 0.05 ? 100_000 : this.int(1200);
      const open = r() < 0.5 ? "[".repeat(depth) : '{"a":'.repeat(depth);
      const close = r() < 0.5 ? (open.startsWith("[") ? "]" : "}").repeat(depth) : "";
      return splice(b, at, 0, utf8.encode(`${open}1${close}`));
    }
    if (m < 0.88) {
      // a huge string or number
      const huge = r() < 0.5 ? `"${"é\\n".repeat(this.int(50_000))}"` : "9".repeat(this.int(100_000));
      return splice(b, at, 0, utf8.encode(huge));
    }
    // splice in a piece of another valid body
    const other = utf8.encode(this.validBody());
    const from = this.int(other.length);
    return splice(b, at, this.int(10), other.subarray(from, from + this.int(200)));
  }
}

function splice(b: Uint8Array, at: number, remove: number, insert: Uint8Array): Uint8Array {
  const out = new Uint8Array(b.length - Math.min(remove, b.length - at) + insert.length);
  out.set(b.subarray(0, at), 0);
  out.set(insert, at);
  out.set(b.subarray(at + remove), at + insert.length);
  return out;
}

/** Nesting depth of a JSON text (brackets outside strings), for the differential check. */
function maxDepth(s: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "[" || c === "{") max = Math.max(max, ++depth);
    else if (c === "]" || c === "}") depth--;
  }
  return max;
}

/**
 * Runs one body through scan + render + hash for chat and for completions. Returns a problem
 * description, or null. A trap surfaces as a thrown error and is a problem; so is disagreeing
 * with JSON.parse about whether a UTF-8 body is a JSON object (inside the core's limits).
 */
export function checkBody(body: Uint8Array, template: SegmentTemplate): string | null {
  let chat: HashRequestResult;
  let completions: HashRequestResult;
  try {
    chat = hashRequest(body, { endpoint: "chat", template, model: "m", chunkSize: 16 });
    completions = hashRequest(body, {
      endpoint: "completions",
      template: null,
      bosText: "<s>",
      model: "m",
      chunkSize: 16,
    });
  } catch (e) {
    return `threw ${(e as Error).name}: ${(e as Error).message}`;
  }
  for (const r of [chat, completions]) {
    if (!["none", "partial", "exact"].includes(r.status)) return `bad status ${r.status}`;
    if (r.hashes.length !== Math.floor(r.stream.length / 16) && r.status !== "none") return "hash count";
  }
  let textBody: string;
  try {
    textBody = strictUtf8.decode(body);
  } catch {
    return chat.error === undefined ? "accepted malformed UTF-8" : null;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(textBody);
  } catch {
    parsed = undefined;
  }
  const isObject = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed);
  if (isObject && chat.error !== undefined && chat.error !== "depth" && chat.error !== "limit") {
    return `rejected valid JSON (${chat.error})`;
  }
  if (isObject && chat.error === "depth" && maxDepth(textBody) < 500) return "depth error on shallow JSON";
  if (!isObject && chat.error === undefined) return "accepted invalid JSON";
  return null;
}
