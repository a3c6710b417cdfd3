// Renders a model's real Jinja chat template the way vLLM does for /v1/chat/completions
// (add_generation_prompt defaults to true; BOS/EOS come from the tokenizer config).
// The segment-template deriver verifies against it (the simulator renders with code of its own).
//
// vLLM renders with Python jinja2; @huggingface/jinja is a JS re-implementation that differs
// where chat templates care: its `trim` filter and `strip()` use JS whitespace, and
// `strip/lstrip/rstrip(chars)` ignore `chars` (Qwen3's `.lstrip('\n')` would also eat spaces).
// Those calls are evaluated with Python semantics here (python-strip.ts).
import { Interpreter, Template } from "@huggingface/jinja";
import { pythonStrip } from "./python-strip.ts";
import { chatTemplateOf, specialTokenText, type TokenizerConfig } from "./tokenizer-files.ts";

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

// The slice of @huggingface/jinja's runtime these overrides touch (private in its typings).
interface Node {
  type: string;
  value?: unknown;
  object?: Node;
  property?: Node;
  computed?: boolean;
  callee?: Node;
  args?: Node[];
}
interface Value {
  type: string;
  value: unknown;
}
interface RuntimeInternals {
  evaluate(node: Node, env: unknown): Value;
  evaluateArguments(args: Node[], env: unknown): [Value[], Map<string, Value>];
  evaluateCallExpression(expr: Node, env: unknown): Value;
  applyFilter(operand: Value, filter: Node, env: unknown): Value;
}

const STRIP_METHODS = { strip: "both", lstrip: "left", rstrip: "right" } as const;

function stripChars(args: Value[], kwargs: Map<string, Value>): string | null {
  const arg = args[0] ?? kwargs.get("chars");
  return arg?.type === "StringValue" ? (arg.value as string) : null;
}

function withString(like: Value, s: string): Value {
  const Ctor = like.constructor as new (v: string) => Value;
  return new Ctor(s);
}

const proto = Interpreter.prototype as unknown as RuntimeInternals;
const originalCall = proto.evaluateCallExpression;
const originalFilter = proto.applyFilter;

function pythonCall(this: RuntimeInternals, expr: Node, env: unknown): Value {
  const callee = expr.callee;
  const name = callee?.type === "MemberExpression" && !callee.computed ? callee.property?.value : undefined;
  if (typeof name === "string" && Object.hasOwn(STRIP_METHODS, name) && callee?.object !== undefined) {
    const object = this.evaluate(callee.object, env);
    if (object.type === "StringValue") {
      const [args, kwargs] = this.evaluateArguments(expr.args ?? [], env);
      const side = STRIP_METHODS[name as keyof typeof STRIP_METHODS];
      return withString(object, pythonStrip(object.value as string, stripChars(args, kwargs), side));
    }
    // Not a string: the library's own path evaluates the (side-effect free) object again.
  }
  return originalCall.call(this, expr, env);
}

function pythonFilter(this: RuntimeInternals, operand: Value, filter: Node, env: unknown): Value {
  if (operand.type === "StringValue") {
    if (filter.type === "Identifier" && filter.value === "trim") {
      return withString(operand, pythonStrip(operand.value as string, null));
    }
    if (
      filter.type === "CallExpression" &&
      filter.callee?.type === "Identifier" &&
      filter.callee.value === "trim"
    ) {
      const [args, kwargs] = this.evaluateArguments(filter.args ?? [], env);
      return withString(operand, pythonStrip(operand.value as string, stripChars(args, kwargs)));
    }
  }
  return originalFilter.call(this, operand, filter, env);
}

/**
 * Runs `render` with the Python-semantics overrides installed on the interpreter prototype.
 * Template.render builds its Interpreter internally, so the prototype is the only seam; the
 * render is synchronous, so no other code can observe the overrides.
 */
function withPythonStrings<T>(render: () => T): T {
  proto.evaluateCallExpression = pythonCall;
  proto.applyFilter = pythonFilter;
  try {
    return render();
  } finally {
    proto.evaluateCallExpression = originalCall;
    proto.applyFilter = originalFilter;
  }
}

export class ChatTemplateRenderer {
  readonly #template: Template;
  readonly #bos: string;
  readonly #eos: string;

  constructor(config: TokenizerConfig, source: string | undefined = chatTemplateOf(config)) {
    if (source === undefined) throw new Error("tokenizer_config.json has no chat_template");
    this.#template = new Template(source);
    this.#bos = specialTokenText(config.bos_token);
    this.#eos = specialTokenText(config.eos_token);
  }

  render(messages: ChatMessage[], options: RenderOptions = {}): string {
    return withPythonStrings(() =>
      this.#template.render({
        ...options.kwargs,
        messages,
        tools: options.tools,
        add_generation_prompt: options.addGenerationPrompt ?? true,
        bos_token: this.#bos,
        eos_token: this.#eos,
      }),
    );
  }
}
