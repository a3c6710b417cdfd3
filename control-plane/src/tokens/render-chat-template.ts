// Renders a model's real Jinja chat template the way vLLM does for /v1/chat/completions
// (add_generation_prompt defaults to true; BOS/EOS come from the tokenizer config).
// The simulator tokenizes this text; the segment-template deriver verifies against it.
import { Template } from "@huggingface/jinja";
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

export class ChatTemplateRenderer {
  readonly #template: Template;
  readonly #bos: string;
  readonly #eos: string;

  constructor(config: TokenizerConfig) {
    const source = chatTemplateOf(config);
    if (source === undefined) throw new Error("tokenizer_config.json has no chat_template");
    this.#template = new Template(source);
    this.#bos = specialTokenText(config.bos_token);
    this.#eos = specialTokenText(config.eos_token);
  }

  render(messages: ChatMessage[], options: RenderOptions = {}): string {
    return this.#template.render({
      ...options.kwargs,
      messages,
      tools: options.tools,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: this.#bos,
      eos_token: this.#eos,
    });
  }
}
