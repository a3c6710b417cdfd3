// The segment templates of Qwen3 and Llama-3.1, rendered by the core, must equal the models' real
// Jinja chat templates byte for byte (exact), or be an exact prefix of them (partial) only where
// wire-format §2 says a message is inexpressible.
import { describe, expect, it } from "vitest";
import { renderChat } from "../../control-plane/src/core/kvroute-core.ts";
import { randomConversation, seededRandom } from "../../control-plane/src/tokens/random-conversations.ts";
import { jinjaRenderer, type ModelName, segmentTemplate, text } from "./helpers.ts";

type Msg = { role: string; content: string };

const HAND_WRITTEN: Msg[][] = [
  [{ role: "user", content: "Hello!" }],
  [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "What is 2+2?" },
    { role: "assistant", content: "4" },
    { role: "user", content: "And 3+3?" },
  ],
  [
    { role: "user", content: "  padded \n\t" },
    { role: "assistant", content: "\u3000\u00a0wide spaces\u2003" },
    { role: "user", content: "\u0085\u001cpython-only whitespace\u001f\u0085" },
  ],
  [
    { role: "user", content: "" },
    { role: "assistant", content: "" },
    { role: "user", content: " " },
  ],
  [
    { role: "user", content: "日本語 🌍 naïve café \u{1F469}\u200D\u{1F469}\u200D\u{1F467}" },
    { role: "assistant", content: '<think>\nLet me think\n</think>\n\nThe answer is "42".' },
    { role: "user", content: "why? \\ backslash \u0000 nul \u001b esc" },
  ],
  [
    { role: "user", content: "q1" },
    { role: "assistant", content: "<think>a</think>\n\nfirst</think>\n\nsecond" },
    { role: "user", content: "q2" },
    { role: "assistant", content: "\n\nno think tag, leading newlines kept" },
    { role: "user", content: "q3" },
  ],
  [
    { role: "system", content: "first" },
    { role: "user", content: "u" },
    { role: "system", content: "mid-conversation system" },
    { role: "user", content: "<|im_start|>literal special tokens<|eot_id|>" },
  ],
  // Qwen3: a trailing assistant turn after the last query gets a think block → partial there.
  [
    { role: "user", content: "hi" },
    { role: "assistant", content: "<think>x</think>hello" },
  ],
  // Qwen3: a tool-response-wrapped user turn is not a query, so the assistant before it is "after" the last query.
  [
    { role: "user", content: "call it" },
    { role: "assistant", content: "<think>r</think>ok" },
    { role: "user", content: "<tool_response>42</tool_response>" },
  ],
];

/** Messages the core must stop at (wire-format §2) for this template; -1 if none. */
function firstInexpressible(model: ModelName, messages: Msg[]): number {
  const known = new Set(Object.keys(segmentTemplate(model).roles));
  let lastQuery = messages.length - 1;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Msg;
    if (
      m.role === "user" &&
      !(m.content.startsWith("<tool_response>") && m.content.endsWith("</tool_response>"))
    ) {
      lastQuery = i;
      break;
    }
  }
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as Msg;
    if (!known.has(m.role)) return i;
    if (model === "qwen3" && m.role === "assistant" && i > lastQuery) return i;
  }
  return -1;
}

for (const model of ["qwen3", "llama3_1"] as const) {
  describe(`${model} segment template vs the real Jinja template`, () => {
    const jinja = jinjaRenderer(model);
    const template = segmentTemplate(model);

    function check(messages: Msg[]): "exact" | "partial" {
      const ours = renderChat(template, messages);
      const want = jinja.render(messages);
      const stop = firstInexpressible(model, messages);
      if (stop < 0) {
        expect(ours.status).toBe("exact");
        expect(text(ours.stream)).toBe(want);
      } else {
        expect(ours.status).toBe("partial");
        expect(want.startsWith(text(ours.stream))).toBe(true);
        // The prefix ends exactly where the inexpressible message starts: find that start by
        // rendering with a marker as its content (the last header before the marker is its own).
        const marked = messages.map((m, i) => (i === stop ? { ...m, content: "\u0001MARK\u0001" } : m));
        const withMarker = jinja.render(marked);
        const header = model === "qwen3" ? "<|im_start|>" : "<|start_header_id|>";
        const start = withMarker.lastIndexOf(header, withMarker.indexOf("\u0001MARK\u0001"));
        expect(text(ours.stream)).toBe(withMarker.slice(0, start));
      }
      return ours.status as "exact" | "partial";
    }

    it("renders hand-written conversations byte for byte", () => {
      for (const messages of HAND_WRITTEN) check(messages);
    });

    it("renders 1500 random conversations byte for byte (or as an exact prefix where inexpressible)", () => {
      const rand = seededRandom(model === "qwen3" ? 11 : 12);
      let exact = 0;
      for (let i = 0; i < 1500; i++) {
        const messages = randomConversation(rand, model === "llama3_1" ? ["tool", "developer"] : ["tool"]);
        if (check(messages) === "exact") exact++;
      }
      // Most random conversations are expressible; a renderer that gave up everywhere would fail here.
      expect(exact).toBeGreaterThan(model === "qwen3" ? 400 : 1200);
    });

    it("omits the generation prompt for add_generation_prompt: false, still exactly", () => {
      const messages = HAND_WRITTEN[1] as Msg[];
      const ours = renderChat(template, messages, { addGenerationPrompt: false });
      expect(ours.status).toBe("exact");
      expect(text(ours.stream)).toBe(jinja.render(messages, { addGenerationPrompt: false }));
    });

    it("content given as text parts renders like the joined string (vLLM's string content format)", () => {
      const parts = renderChat(template, [
        {
          role: "user",
          content: [
            { type: "text", text: " one" },
            { type: "text", text: "two " },
          ],
        },
      ]);
      expect(parts.status).toBe("exact");
      expect(text(parts.stream)).toBe(jinja.render([{ role: "user", content: " one\ntwo " }]));
    });
  });
}
