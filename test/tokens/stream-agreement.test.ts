// The contract of DESIGN §2 end to end: the stream the filter renders for a chat (the core's
// renderChat through the derived segment template) equals the bytes the control plane gets
// back from the engine's token ids (tokenize the real chat template's output, detokenize in
// 16-token blocks as KV events deliver them).
import { describe, expect, it } from "vitest";
import { renderChat } from "../../control-plane/src/core/kvroute-core.ts";
import { deriveSegmentTemplate } from "../../control-plane/src/tokens/derive-segment-template.ts";
import { detokenize } from "../../control-plane/src/tokens/detokenize.ts";
import { randomConversation, seededRandom } from "../../control-plane/src/tokens/random-conversations.ts";
import { ChatTemplateRenderer } from "../../control-plane/src/tokens/render-chat-template.ts";
import { buildTokenBytesTable } from "../../control-plane/src/tokens/token-bytes-table.ts";
import { blockwise, encodeIds, loadModel, type ModelName, referenceTokenizer } from "./models.ts";

for (const name of ["qwen3", "llama3_1"] as ModelName[]) {
  describe(name, () => {
    const files = loadModel(name);
    const derived = deriveSegmentTemplate(files, renderChat);
    const table = buildTokenBytesTable(files.tokenizer);
    const tokenizer = referenceTokenizer(files);
    const jinja = new ChatTemplateRenderer(files.config);

    it("filter stream = detokenized engine tokens, for every exactly rendered chat", () => {
      if (!derived.ok) throw new Error(derived.reason);
      if (!table.ok) throw new Error(table.reason);
      const rand = seededRandom(4242);
      let exact = 0;
      for (let i = 0; i < 80; i++) {
        const messages = randomConversation(rand);
        const filter = renderChat(derived.template, messages);
        const ids = encodeIds(tokenizer, jinja.render(messages));
        const control = blockwise(ids, (block, previous) => {
          const r = detokenize(table.table, block, previous);
          if (!r.ok) throw new Error(JSON.stringify(r));
          return r.bytes;
        });
        if (filter.status === "exact") {
          exact++;
          expect(Buffer.from(filter.stream).equals(control), JSON.stringify(messages)).toBe(true);
        } else {
          expect(Buffer.from(control.subarray(0, filter.stream.length)).equals(filter.stream)).toBe(true);
        }
      }
      expect(exact).toBeGreaterThan(20);
    });
  });
}

describe("qwen3 think history next to tool-response user turns", () => {
  const files = loadModel("qwen3");
  const derived = deriveSegmentTemplate(files, renderChat);
  const jinja = new ChatTemplateRenderer(files.config);
  const think = { role: "assistant", content: "<think>\nplan\n</think>\n\n answer" };

  it("strips <think> before the last real user turn, keeping lstrip('\\n') exact", () => {
    if (!derived.ok) throw new Error(derived.reason);
    const messages = [{ role: "user", content: "q1" }, think, { role: "user", content: "q2" }];
    const r = renderChat(derived.template, messages);
    expect(r.status).toBe("exact");
    expect(Buffer.from(r.stream).toString()).toBe(jinja.render(messages));
    expect(jinja.render(messages)).toContain("<|im_start|>assistant\n answer<|im_end|>");
  });

  it("a user turn that is only a <tool_response> is not a query: the think block stays", () => {
    if (!derived.ok) throw new Error(derived.reason);
    const messages = [
      { role: "user", content: "q1" },
      think,
      { role: "user", content: "<tool_response>42</tool_response>" },
    ];
    const text = jinja.render(messages);
    expect(text).toContain("<think>\nplan\n</think>");
    const r = renderChat(derived.template, messages);
    expect(r.status).not.toBe("exact");
    expect(text.startsWith(Buffer.from(r.stream).toString())).toBe(true);
  });
});
