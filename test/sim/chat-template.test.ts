// The simulator renders chat templates with its own code (control-plane/sim/chat-template.ts),
// not the router's; it must still render exactly as vLLM's Python jinja2 does. The goldens are
// the router's too (test/tokens/fixtures/jinja2-renders.json, made by Python jinja2).
import { describe, expect, it } from "vitest";
import { pyStrip, SimChatTemplate } from "../../control-plane/sim/chat-template.ts";
import { loadJinja2Renders } from "../tokens/fixtures/jinja2-renders.ts";

const fixture = loadJinja2Renders();

describe("the simulator's chat template agrees with Python jinja2", () => {
  for (const t of fixture.templates) {
    it(`${t.name}: byte-identical to ${fixture.renderer}`, () => {
      const template = new SimChatTemplate({ chat_template: t.source, bos_token: t.bos, eos_token: t.eos });
      for (const c of t.conversations) {
        const got = template.render(c.messages, { addGenerationPrompt: c.addGenerationPrompt });
        expect(got, JSON.stringify(c.messages)).toBe(c.expected);
      }
    });
  }

  it("a named template list renders its 'default' one", () => {
    const template = new SimChatTemplate({
      chat_template: [
        { name: "tool_use", template: "tools" },
        { name: "default", template: "{{ bos_token }}{{ messages[0].content | trim }}" },
      ],
      bos_token: { content: "<s>" },
    });
    expect(template.render([{ role: "user", content: " hi\u0085" }])).toBe("<s>hi");
  });
});

describe("pyStrip is Python's str.strip/lstrip/rstrip", () => {
  it.each([
    [" \t a \n", "strip", null, "a"],
    ["\u001c a \ufeff", "strip", null, "a \ufeff"],
    ["\n\n a \n", "lstrip", "\n", " a \n"],
    ["xxaxx", "rstrip", "x", "xxa"],
    ["😀a😀", "strip", "😀", "a"],
  ] as const)("%j.%s(%j) = %j", (s, side, chars, want) => {
    expect(pyStrip(s, side, chars)).toBe(want);
  });
});
