// Seeded random chat conversations for verifying a segment template against the real chat
// template. The pieces are chosen to break a wrong decomposition: whitespace the template may
// trim (including Python-only and JS-only whitespace), unicode and emoji, empty contents,
// literal special tokens, think blocks, tool-response wrappers, Jinja-looking text.
import type { TemplateRole } from "../core/segment-template.ts";

// A type alias (not an interface) so it is assignable to the Jinja renderer's open message type.
export type Message = { role: string; content: string };

/** mulberry32: tiny, seedable, good enough to spread test cases; not for anything secret. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const TEXT_PIECES: readonly string[] = [
  "hello",
  "Hello, world!",
  "The quick brown fox",
  "日本語のテキスト",
  "naïve café",
  "Привет мир",
  "مرحبا",
  "🌍",
  "👩‍👩‍👧‍👦",
  "👍🏽",
  "🏳️‍🌈",
  "12345",
  "3.14159",
  "x = a[0] + b['k']",
  '"quoted"',
  "back\\slash",
  "{{ not jinja }}",
  "{% raw %}",
  "<|im_start|>",
  "<|im_end|>",
  "<|eot_id|>",
  "<|begin_of_text|>",
  "<s>",
  "[INST]",
];

export const WHITESPACE_PIECES: readonly string[] = [
  " ",
  "  ",
  "\t",
  "\n",
  "\n\n",
  "\r\n",
  "   \n  ",
  "\u3000",
  "\u00a0",
  "\u2003",
  // Whitespace for Python's str.strip() but not for JS trim(), and the reverse: a renderer
  // that trims with the wrong set differs from the engine's Jinja here.
  "\u0085",
  "\u001c",
  "\ufeff",
];

const THINK_PIECES: readonly string[] = [
  "<think>\nreasoning here\n</think>\n\n",
  "<think>short</think>",
  "</think>",
  "<think>",
  "\n</think>\n \n",
];

export function pick<T>(rand: () => number, items: readonly T[]): T {
  return items[Math.floor(rand() * items.length)] as T;
}

/** Content of 0–6 random pieces, often padded with whitespace. */
export function randomContent(rand: () => number, opts: { think?: boolean } = {}): string {
  const n = Math.floor(rand() * 7);
  let s = "";
  for (let i = 0; i < n; i++) {
    const r = rand();
    if (opts.think === true && r < 0.2) s += pick(rand, THINK_PIECES);
    else if (r < 0.55) s += pick(rand, TEXT_PIECES);
    else s += pick(rand, WHITESPACE_PIECES);
  }
  return s;
}

/**
 * A conversation: optional leading system message, then 1–7 messages that mostly alternate
 * user/assistant, sometimes repeat a role, end on an assistant, or use `extraRoles`.
 */
export function randomConversation(rand: () => number, extraRoles: readonly TemplateRole[] = []): Message[] {
  const messages: Message[] = [];
  if (rand() < 0.5) messages.push({ role: "system", content: randomContent(rand) });
  const n = 1 + Math.floor(rand() * 7);
  let next = "user";
  for (let i = 0; i < n; i++) {
    let role = next;
    const r = rand();
    if (r < 0.1) role = messages.at(-1)?.role ?? "user";
    else if (r < 0.2 && extraRoles.length > 0) role = pick(rand, extraRoles);
    else if (r < 0.25) role = "system";
    let content = randomContent(rand, { think: role === "assistant" });
    // Qwen3-style templates treat a user turn wrapped in <tool_response> as a tool result.
    if (role === "user" && rand() < 0.1) content = `<tool_response>${content}</tool_response>`;
    messages.push({ role, content });
    next = role === "user" ? "assistant" : "user";
  }
  return messages;
}
