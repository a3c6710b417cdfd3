// bosText for /v1/completions: the reference tokenizer with add_special_tokens=true yields
// exactly bosText ‖ prompt ‖ suffixText once detokenized.
import { describe, expect, it } from "vitest";
import { bosTextOf, completionText } from "../../control-plane/src/tokens/bos-text.ts";
import { detokenize } from "../../control-plane/src/tokens/detokenize.ts";
import { randomContent, seededRandom } from "../../control-plane/src/tokens/random-conversations.ts";
import { buildTokenBytesTable } from "../../control-plane/src/tokens/token-bytes-table.ts";
import { encodeIds, loadModel, type ModelName, referenceTokenizer } from "./models.ts";

const expected: Record<ModelName, string> = { qwen3: "", llama3_1: "<|begin_of_text|>", llama2: "<s>" };

for (const name of ["qwen3", "llama3_1", "llama2"] as ModelName[]) {
  describe(name, () => {
    const files = loadModel(name);
    const built = buildTokenBytesTable(files.tokenizer);
    if (!built.ok) throw new Error(built.reason);
    const table = built.table;

    it(`bosText is ${JSON.stringify(expected[name])} and matches the tokenizer`, () => {
      const r = completionText(files.tokenizer, table);
      expect(r).toEqual({ ok: true, bosText: expected[name], suffixText: "" });
      expect(bosTextOf(files.tokenizer, table)).toBe(expected[name]);
      const tokenizer = referenceTokenizer(files);
      const rand = seededRandom(5);
      for (let i = 0; i < 40; i++) {
        const prompt = `${randomContent(rand)}x${randomContent(rand)}`.normalize("NFC");
        const out = detokenize(table, encodeIds(tokenizer, prompt, true));
        if (!out.ok) throw new Error(JSON.stringify(out));
        expect(Buffer.from(out.bytes).toString(), JSON.stringify(prompt)).toBe(expected[name] + prompt);
      }
    });
  });
}

describe("post-processor shapes", () => {
  const built = buildTokenBytesTable({
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false },
    added_tokens: [
      { id: 0, content: "<cls>", special: true },
      { id: 1, content: "<sep>", special: true },
    ],
    model: { type: "BPE", vocab: { a: 2 } },
  });
  if (!built.ok) throw new Error(built.reason);
  const table = built.table;
  it("reads text after the prompt and Bert-style cls/sep", () => {
    const tp = {
      type: "TemplateProcessing",
      single: [
        { SpecialToken: { id: "<cls>" } },
        { Sequence: { id: "A" } },
        { SpecialToken: { id: "<sep>" } },
      ],
      special_tokens: { "<cls>": { ids: [0] }, "<sep>": { ids: [1] } },
    };
    expect(completionText({ post_processor: tp }, table)).toEqual({
      ok: true,
      bosText: "<cls>",
      suffixText: "<sep>",
    });
    const bert = { type: "BertProcessing", cls: ["<cls>", 0], sep: ["<sep>", 1] };
    expect(completionText({ post_processor: bert }, table)).toEqual({
      ok: true,
      bosText: "<cls>",
      suffixText: "<sep>",
    });
    expect(completionText({}, table)).toEqual({ ok: true, bosText: "", suffixText: "" });
  });
  it("reports what it cannot read", () => {
    expect(completionText({ post_processor: { type: "Mystery" } }, table)).toMatchObject({ ok: false });
    expect(bosTextOf({ post_processor: { type: "Mystery" } }, table)).toBe("");
    expect(bosTextOf({ model: { type: "WordPiece", vocab: {} } })).toBe("");
    const unknownId = {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<x>" } }, { Sequence: { id: "A" } }],
      special_tokens: { "<x>": { ids: [99] } },
    };
    expect(completionText({ post_processor: unknownId }, table)).toMatchObject({ ok: false });
  });
});
