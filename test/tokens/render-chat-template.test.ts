// The Jinja renderer must match Python jinja2 (what vLLM runs) on the string methods chat
// templates use; @huggingface/jinja alone does not.
import { Template } from "@huggingface/jinja";
import { describe, expect, it } from "vitest";
import { pythonStrip } from "../../control-plane/src/tokens/python-strip.ts";
import { ChatTemplateRenderer } from "../../control-plane/src/tokens/render-chat-template.ts";
import { loadJinja2Renders } from "./fixtures/jinja2-renders.ts";

const render = (source: string, content: string) =>
  new ChatTemplateRenderer({}, source).render([{ role: "user", content }]);

describe("pythonStrip", () => {
  it("uses Python's whitespace set, not JavaScript's", () => {
    expect(pythonStrip("\u0085\u001c x \u3000\u00a0", null)).toBe("x");
    expect(pythonStrip("\ufeffx\ufeff", null)).toBe("\ufeffx\ufeff");
  });
  it("strips only the given characters, by code point, on the requested side", () => {
    expect(pythonStrip("\n\n x \n", "\n", "left")).toBe(" x \n");
    expect(pythonStrip("\n\n x \n", "\n", "right")).toBe("\n\n x ");
    expect(pythonStrip("ab🌍xba🌍", "ab🌍")).toBe("x");
    expect(pythonStrip("🌍", "\udf0d")).toBe("🌍"); // half a surrogate pair is not a code point of it
    expect(pythonStrip("", null)).toBe("");
    expect(pythonStrip("   ", null)).toBe("");
  });
});

describe("ChatTemplateRenderer string semantics", () => {
  const content = "\n\n  x\u0085 \ufeff\n";
  it("lstrip/rstrip/strip with chars strip only those chars", () => {
    const source =
      "{{ messages[0].content.lstrip('\\n') }}|{{ messages[0].content.rstrip('\\n') }}|{{ messages[0].content.strip('\\n') }}";
    expect(render(source, content)).toBe("  x\u0085 \ufeff\n|\n\n  x\u0085 \ufeff|  x\u0085 \ufeff");
    // The library alone strips all whitespace here, which vLLM's jinja2 does not.
    expect(new Template(source).render({ messages: [{ role: "user", content }] })).not.toBe(
      render(source, content),
    );
  });
  it("strip() and | trim use Python whitespace", () => {
    expect(render("[{{ messages[0].content.strip() }}]", content)).toBe("[x\u0085 \ufeff]");
    expect(render("[{{ messages[0].content | trim }}]", "\u0085 y \u001c")).toBe("[y]");
    expect(render("[{{ messages[0].content | trim('x') }}]", "xxyx")).toBe("[y]");
  });
  it("leaves other methods and filters alone and restores the library afterwards", () => {
    expect(render("{{ messages[0].content.upper() }}{{ messages[0].content | length }}", "ab")).toBe("AB2");
    expect(new Template("{{ ' a\u0085' | trim }}").render({})).toBe("a\u0085");
  });
});

describe("agreement with Python jinja2 on real chat templates", () => {
  const fixture = loadJinja2Renders();

  for (const t of fixture.templates) {
    it(`${t.name}: byte-identical to ${fixture.renderer}`, () => {
      const renderer = new ChatTemplateRenderer({ bos_token: t.bos, eos_token: t.eos }, t.source);
      const plain = new Template(t.source);
      let libraryDiffers = 0;
      for (const c of t.conversations) {
        const got = renderer.render(c.messages, { addGenerationPrompt: c.addGenerationPrompt });
        expect(got, JSON.stringify(c.messages)).toBe(c.expected);
        const raw = plain.render({
          messages: c.messages,
          add_generation_prompt: c.addGenerationPrompt,
          bos_token: t.bos,
          eos_token: t.eos,
        });
        if (raw !== c.expected) libraryDiffers++;
      }
      // The fixture exercises the differences the Python overrides exist for.
      expect(libraryDiffers).toBeGreaterThan(0);
    });
  }
});
