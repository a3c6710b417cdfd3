// Prompt → token ids as vLLM computes them, from the model's real tokenizer files:
// - /v1/completions: `encode(prompt)` with the tokenizer's own special-token rule (Llama-3
//   prepends <|begin_of_text|>, Qwen3 adds nothing);
// - /v1/chat/completions: the real Jinja chat template renders the conversation (it writes BOS
//   itself), then the text is encoded without adding special tokens.
import { Tokenizer } from "@huggingface/tokenizers";
import { type ChatMessage, type RenderOptions, SimChatTemplate } from "./chat-template.ts";
import { readModelFiles } from "./model-files.ts";

// Common English words; those that are one token in the vocabulary become the words the
// simulated model "writes", so generated text is readable and re-tokenizes to itself.
const OUTPUT_WORDS =
  "the of and to in is that it for on with as was at by be this from or an are not have but all they one " +
  "can which their more will about if has there so out what up when into time some other than then only " +
  "new like also two way could first any these may after over most made where through back years much well " +
  "before good many right must still while long great small world place system people state water light";

const loaded = new Map<string, SimTokenizer>();

export class SimTokenizer {
  /** Loading a vocabulary takes a second or more; engines and fronts of one process share it. */
  static load(dir: string): SimTokenizer {
    let t = loaded.get(dir);
    if (!t) {
      t = new SimTokenizer(dir);
      loaded.set(dir, t);
    }
    return t;
  }

  private readonly tokenizer: Tokenizer;
  private readonly renderer: SimChatTemplate | null;
  readonly outputVocab: number[];

  constructor(readonly dir: string) {
    const files = readModelFiles(dir);
    this.tokenizer = new Tokenizer(files.tokenizer, files.config);
    this.renderer = files.config.chat_template === undefined ? null : new SimChatTemplate(files.config);
    const vocab = new Set<number>();
    for (const w of OUTPUT_WORDS.split(" ")) {
      const ids = this.tokenizer.encode(` ${w}`, { add_special_tokens: false }).ids;
      if (ids.length === 1) vocab.add(ids[0] as number);
    }
    if (vocab.size === 0) throw new Error(`tokenizer in ${dir} has no single-token English words`);
    this.outputVocab = [...vocab].sort((a, b) => a - b);
  }

  get hasChatTemplate(): boolean {
    return this.renderer !== null;
  }

  encodeCompletion(prompt: string): number[] {
    return this.tokenizer.encode(prompt).ids;
  }

  /** Encodes without adding any special token. */
  encodeRaw(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  renderChat(messages: ChatMessage[], options: RenderOptions = {}): string {
    if (!this.renderer) throw new Error("this model's tokenizer_config.json has no chat template");
    return this.renderer.render(messages, options);
  }

  encodeChat(messages: ChatMessage[], options: RenderOptions = {}): number[] {
    return this.tokenizer.encode(this.renderChat(messages, options), { add_special_tokens: false }).ids;
  }

  decode(ids: number[]): string {
    return this.tokenizer.decode(ids, { skip_special_tokens: true });
  }
}
