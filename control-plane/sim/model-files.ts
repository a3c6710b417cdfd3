// The simulator's reading of a model folder, as vLLM (through transformers) reads it:
// `tokenizer.json` for the tokenizer and `tokenizer_config.json` for the chat template and the
// BOS/EOS text. The simulator stands for the engine, so it reads these files itself rather
// than through the router's loader (control-plane/src/tokens): a loading bug in the router
// then shows up as a disagreement with the simulator instead of hiding behind it.
import { readFileSync } from "node:fs";
import { join } from "node:path";

/** The fields of `tokenizer_config.json` the simulator uses. */
export interface ModelTokenizerConfig {
  chat_template?: string | Array<{ name: string; template: string }>;
  bos_token?: string | { content: string } | null;
  eos_token?: string | { content: string } | null;
  [key: string]: unknown;
}

export interface ModelFiles {
  /** Parsed `tokenizer.json`. */
  tokenizer: Record<string, unknown>;
  /** Parsed `tokenizer_config.json`. */
  config: ModelTokenizerConfig;
}

function readJsonFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new Error(`cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`${path} is not valid JSON: ${(err as Error).message}`);
  }
}

export function readModelFiles(dir: string): ModelFiles {
  return {
    tokenizer: readJsonFile(join(dir, "tokenizer.json")),
    config: readJsonFile(join(dir, "tokenizer_config.json")) as ModelTokenizerConfig,
  };
}

/**
 * The chat template vLLM applies: the string itself, or from a list of named templates the one
 * named "default" (transformers' choice when no name is asked for), else the first.
 */
export function defaultChatTemplate(config: ModelTokenizerConfig): string | undefined {
  const t = config.chat_template;
  if (t === undefined || typeof t === "string") return t;
  const named = t.find((x) => x.name === "default") ?? t[0];
  return named?.template;
}

/** BOS/EOS as the template sees them: a plain string, or an AddedToken's `content`; "" if unset. */
export function tokenText(token: ModelTokenizerConfig["bos_token"]): string {
  if (token === undefined || token === null) return "";
  if (typeof token === "string") return token;
  return token.content;
}
