// The simulator's chat-template rendering, as vLLM does it for /v1/chat/completions: the model's
// Jinja template with add_generation_prompt true by default, the BOS/EOS text of the tokenizer
// config, `tools` and the chat_template_kwargs as variables.
//
// vLLM runs Python jinja2; @huggingface/jinja differs where chat templates care about strings:
// the `trim` filter and the strip/lstrip/rstrip methods use JS whitespace, and the methods ignore
// their `chars` argument. The simulator fixes that by rewriting the parsed template once: every
// `x.strip(...)`, `x.lstrip(...)`, `x.rstrip(...)` and `x | trim(...)` becomes a call of a function
// given to the template that does what Python's str does. The router renders with its own code
// (control-plane/src/tokens/render-chat-template.ts, another technique); the simulator imports
// none of it, so the two can disagree and a test can see it.
import { Template } from "@huggingface/jinja";
import { defaultChatTemplate, type ModelTokenizerConfig, tokenText } from "./model-files.ts";

export interface ChatMessage {
  role: string;
  content: string;
  [key: string]: unknown;
}

export interface RenderOptions {
  addGenerationPrompt?: boolean;
  tools?: unknown[];
  /** Extra variables, like vLLM's `chat_template_kwargs` (e.g. `enable_thinking`). */
  kwargs?: Record<string, unknown>;
}

/**
 * Python's str.isspace() code points: the default set of str.strip(). Unicode White_Space
 * minus nothing, plus the four information separators U+001C–U+001F that Python counts.
 */
const PYTHON_SPACE = new Set<number>([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002,
  0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
]);

type Side = "strip" | "lstrip" | "rstrip";

/** Python's `s.strip(chars)` / `lstrip` / `rstrip`, by code point; no chars = whitespace. */
export function pyStrip(s: string, side: Side, chars?: string | null): string {
  const drop =
    chars === undefined || chars === null ? PYTHON_SPACE : new Set([...chars].map((c) => c.codePointAt(0)));
  const points = [...s];
  let from = 0;
  let to = points.length;
  if (side !== "rstrip") while (from < to && drop.has(points[from]?.codePointAt(0))) from++;
  if (side !== "lstrip") while (to > from && drop.has(points[to - 1]?.codePointAt(0))) to--;
  return points.slice(from, to).join("");
}

// The template variables the rewritten calls go to (names no chat template uses).
const CALLS: Record<Side | "trim", string> = {
  strip: "__sim_py_strip",
  lstrip: "__sim_py_lstrip",
  rstrip: "__sim_py_rstrip",
  trim: "__sim_py_trim",
};

function stringMethod(side: Side): (s: unknown, chars?: unknown) => string {
  return (s, chars) => {
    if (typeof s !== "string") throw new Error(`${side}() of a ${typeof s}: chat templates strip strings`);
    return pyStrip(s, side, typeof chars === "string" ? chars : null);
  };
}

const PYTHON_CALLS: Record<string, (s: unknown, chars?: unknown) => string> = {
  [CALLS.strip]: stringMethod("strip"),
  [CALLS.lstrip]: stringMethod("lstrip"),
  [CALLS.rstrip]: stringMethod("rstrip"),
  [CALLS.trim]: stringMethod("strip"),
};

// A parsed template node, as far as the rewrite reads it.
interface AstNode {
  type: string;
  [field: string]: unknown;
}

const isNode = (v: unknown): v is AstNode =>
  typeof v === "object" && v !== null && typeof (v as { type?: unknown }).type === "string";

const identifier = (value: string): AstNode => ({ type: "Identifier", value });

/** `x.strip(a)` → `__sim_py_strip(x, a)`; `x | trim` / `x | trim(a)` → `__sim_py_trim(x[, a])`. */
function rewriteNode(node: AstNode): void {
  if (node.type === "CallExpression" && isNode(node.callee) && node.callee.type === "MemberExpression") {
    const member = node.callee;
    const name = isNode(member.property) && !member.computed ? member.property.value : undefined;
    if (name === "strip" || name === "lstrip" || name === "rstrip") {
      node.args = [member.object, ...(node.args as AstNode[])];
      node.callee = identifier(CALLS[name]);
    }
  } else if (node.type === "FilterExpression" && isNode(node.filter)) {
    const filter = node.filter;
    const bare = filter.type === "Identifier" && filter.value === "trim";
    const called =
      filter.type === "CallExpression" &&
      isNode(filter.callee) &&
      filter.callee.type === "Identifier" &&
      filter.callee.value === "trim";
    if (bare || called) {
      const args = called ? (filter.args as AstNode[]) : [];
      node.type = "CallExpression";
      node.callee = identifier(CALLS.trim);
      node.args = [node.operand, ...args];
      delete node.operand;
      delete node.filter;
    }
  }
}

/** Visits every node of the parsed template, children first, rewriting the string calls. */
function rewriteTree(value: unknown): void {
  if (Array.isArray(value)) {
    for (const v of value) rewriteTree(v);
    return;
  }
  if (typeof value !== "object" || value === null) return;
  for (const child of Object.values(value)) rewriteTree(child);
  if (isNode(value)) rewriteNode(value);
}

export class SimChatTemplate {
  readonly #template: Template;
  readonly #bos: string;
  readonly #eos: string;

  constructor(config: ModelTokenizerConfig) {
    const source = defaultChatTemplate(config);
    if (source === undefined) throw new Error("tokenizer_config.json has no chat_template");
    this.#template = new Template(source);
    rewriteTree(this.#template.parsed);
    this.#bos = tokenText(config.bos_token);
    this.#eos = tokenText(config.eos_token);
  }

  render(messages: ChatMessage[], options: RenderOptions = {}): string {
    return this.#template.render({
      ...options.kwargs,
      ...PYTHON_CALLS,
      messages,
      tools: options.tools,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: this.#bos,
      eos_token: this.#eos,
    });
  }
}
