// Loads a model's tokenizer files from a directory, the way vLLM finds them in a model
// folder: `tokenizer.json` (vocabulary, pre-tokenizer, added tokens) and
// `tokenizer_config.json` (chat template, BOS/EOS). The control plane starts here to detokenize
// KV events and derive segment templates (the simulator reads the files with its own code).
import { readFileSync } from "node:fs";
import { join } from "node:path";

export interface TokenizerFiles {
  dir: string;
  /** Parsed `tokenizer.json`. */
  tokenizer: Record<string, unknown>;
  /** Parsed `tokenizer_config.json`. */
  config: TokenizerConfig;
}

export interface TokenizerConfig {
  chat_template?: string | Array<{ name: string; template: string }>;
  bos_token?: string | { content: string } | null;
  eos_token?: string | { content: string } | null;
  add_bos_token?: boolean;
  [key: string]: unknown;
}

export class TokenizerFilesError extends Error {}

function readJson(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new TokenizerFilesError(`cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new TokenizerFilesError(`${path} is not valid JSON: ${(err as Error).message}`);
  }
}

export function loadTokenizerFiles(dir: string): TokenizerFiles {
  return {
    dir,
    tokenizer: readJson(join(dir, "tokenizer.json")),
    config: readJson(join(dir, "tokenizer_config.json")) as TokenizerConfig,
  };
}

/** A special token from the config, which stores it either as a string or as an AddedToken object. */
export function specialTokenText(token: TokenizerConfig["bos_token"]): string {
  if (token == null) return "";
  return typeof token === "string" ? token : token.content;
}

/** The default chat template (configs may list several named ones; vLLM uses "default"). */
export function chatTemplateOf(config: TokenizerConfig): string | undefined {
  const t = config.chat_template;
  if (t === undefined || typeof t === "string") return t;
  return (t.find((x) => x.name === "default") ?? t[0])?.template;
}
