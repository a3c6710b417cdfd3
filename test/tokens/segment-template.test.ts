// Segment templates derived from real chat templates, verified against the routing core's
// renderer (build/kvroute-core.wasm), and templates that must be refused.
import { readFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";
import { describe, expect, it } from "vitest";
import { renderChat } from "../../control-plane/src/core/kvroute-core.ts";
import type { SegmentTemplate } from "../../control-plane/src/core/segment-template.ts";
import {
  deriveSegmentTemplate,
  deriveSegmentTemplateFromRenderer,
} from "../../control-plane/src/tokens/derive-segment-template.ts";
import { probeSegmentTemplate } from "../../control-plane/src/tokens/probe-segment-template.ts";
import { ChatTemplateRenderer } from "../../control-plane/src/tokens/render-chat-template.ts";
import {
  type CoreRenderChat,
  verifySegmentTemplate,
} from "../../control-plane/src/tokens/verify-segment-template.ts";
import { loadModel } from "./models.ts";

const fixture = (name: string): SegmentTemplate =>
  JSON.parse(
    readFileSync(new URL(`../fixtures/segment-templates/${name}.json`, import.meta.url), "utf8"),
  ) as SegmentTemplate;

const fromSource = (source: string, config: Record<string, unknown> = {}) =>
  deriveSegmentTemplateFromRenderer(new ChatTemplateRenderer(config, source), renderChat);

const probeSource = (source: string) => {
  const jinja = new ChatTemplateRenderer({}, source);
  return probeSegmentTemplate((messages, gen) => jinja.render(messages, { addGenerationPrompt: gen }));
};

describe("real chat templates", () => {
  const qwen3 = loadModel("qwen3");
  const llama3 = loadModel("llama3_1");

  it("qwen3: derives the hand-written golden template, verified by the core", () => {
    const r = deriveSegmentTemplate(qwen3, renderChat);
    if (!r.ok) throw new Error(r.reason);
    expect(r.template).toEqual(fixture("qwen3"));
    // Consecutive tool messages share one <|im_start|>user block: not open‖content‖close.
    expect(r.notes.find((n) => n.startsWith("tool: left out"))).toContain("EXACT stream differs");
    expect(r.notes.find((n) => n.startsWith("developer:"))).toContain("not written verbatim");
    expect(r.stats.exact).toBeGreaterThan(150);
  });

  it("llama3_1: derives the hand-written golden template with every role", () => {
    const r = deriveSegmentTemplate(llama3, renderChat);
    if (!r.ok) throw new Error(r.reason);
    expect(r.template).toEqual(fixture("llama3_1"));
    expect(r.notes).toEqual([]);
    expect(r.stats.exact).toBeGreaterThan(400);
  });

  it("verifies with other seeds too", () => {
    const jinja = new ChatTemplateRenderer(qwen3.config);
    for (const seed of [1, 2, 3]) {
      const r = verifySegmentTemplate(
        fixture("qwen3"),
        (m, g) => jinja.render(m, { addGenerationPrompt: g }),
        renderChat,
        {
          seed,
          conversations: 300,
        },
      );
      expect(r).toMatchObject({ ok: true });
    }
  });

  it("llama2: the config has no chat template, which is reported", () => {
    const r = deriveSegmentTemplate(loadModel("llama2"), renderChat);
    expect(r).toMatchObject({ ok: false });
    if (!r.ok) expect(r.reason).toContain("has no chat_template");
  });

  it("llama2's published chat template: user/assistant only, system folded into [INST] is left out", () => {
    // meta-llama/Llama-2-7b-chat-hf tokenizer_config.json chat_template.
    const source =
      "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
    const r = fromSource(source, { bos_token: "<s>", eos_token: "</s>" });
    if (!r.ok) throw new Error(r.reason);
    expect(r.template).toEqual({
      prefix: "",
      roles: {
        user: { open: "<s>[INST] ", close: " [/INST]" },
        assistant: { open: " ", close: " </s>" },
      },
      generationPrompt: "",
      defaultSystem: null,
      trimContent: true,
      assistantHistoryThink: "none",
    });
    expect(r.notes.some((n) => n.startsWith("system:"))).toBe(true);
    // Non-alternating chats make the template raise: the engine refuses them, nothing to route.
    expect(r.stats.rejected).toBeGreaterThan(0);
  });
});

// The system handling of Qwen2.5-Instruct's published template (tool branches cut): a default
// system prompt when the chat brings none.
const QWEN25_STYLE =
  "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}" +
  "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}" +
  "{%- for message in messages %}" +
  "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) or (message.role == 'assistant') %}" +
  "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}" +
  "{%- elif message.role == 'tool' %}" +
  "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}{{- '<|im_start|>user' }}{%- endif %}" +
  "{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}" +
  "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}{{- '<|im_end|>\\n' }}{%- endif %}" +
  "{%- endif %}{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

// The system handling of Llama-3.1-Instruct's published template (tool branches cut): a
// leading system message goes inside a fixed header block ("Cutting Knowledge Date…"), which
// is written even without one; later system messages get a plain header.
const LLAMA31_INSTRUCT_STYLE =
  "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = '26 Jul 2024' %}{%- endif %}" +
  "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}" +
  "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}" +
  "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}{{- 'Cutting Knowledge Date: December 2023\\n' }}" +
  "{{- 'Today Date: ' + date_string + '\\n\\n' }}{{- system_message }}{{- '<|eot_id|>' }}" +
  "{%- for message in messages %}" +
  "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}" +
  "{%- endfor %}{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

describe("published templates with special system handling", () => {
  it("Qwen2.5-style: the default system prompt is found and verified by the core", () => {
    const r = fromSource(QWEN25_STYLE);
    if (!r.ok) throw new Error(r.reason);
    expect(r.template).toEqual({
      prefix: "",
      roles: {
        system: { open: "<|im_start|>system\n", close: "<|im_end|>\n" },
        user: { open: "<|im_start|>user\n", close: "<|im_end|>\n" },
        assistant: { open: "<|im_start|>assistant\n", close: "<|im_end|>\n" },
      },
      generationPrompt: "<|im_start|>assistant\n",
      defaultSystem: "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
      trimContent: false,
      assistantHistoryThink: "none",
    });
    expect(r.notes.some((n) => n.startsWith("tool: left out"))).toBe(true);
  });

  it("Llama-3.1-Instruct-style: a first-only system header is not segmentable (the model has one system open)", () => {
    const r = fromSource(LLAMA31_INSTRUCT_STYLE, { bos_token: "<|begin_of_text|>" });
    expect(r).toMatchObject({ ok: false });
    if (!r.ok) expect(r.reason).toContain("not a prefix");
  });
});

describe("probing reads literals and content transforms", () => {
  it("finds a default system message and a BOS prefix", () => {
    const source =
      "{{ bos_token }}{% if messages[0].role != 'system' %}<sys>Be nice.</sys>{% endif %}" +
      "{% for m in messages %}{% if m.role == 'system' %}<sys>{{ m.content }}</sys>" +
      "{% else %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endif %}{% endfor %}" +
      "{% if add_generation_prompt %}<assistant>{% endif %}";
    const r = fromSource(source, { bos_token: "<B>" });
    if (!r.ok) throw new Error(r.reason);
    expect(r.template).toMatchObject({
      prefix: "<B>",
      defaultSystem: "Be nice.",
      generationPrompt: "<assistant>",
      roles: { system: { open: "<sys>", close: "</sys>" }, user: { open: "<user>", close: "</user>" } },
    });
  });
});

describe("templates that are not segmentable", () => {
  it("writes a default system block unlike a given system message", () => {
    // Without system segments the default block would sit in the prefix, which is wrong
    // exactly when the chat brings its own system message: verification must see that.
    const source =
      "{% if messages[0].role != 'system' %}<sys>Be nice.</sys>{% endif %}" +
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}";
    const probed = probeSource(source);
    expect(probed).toMatchObject({
      ok: true,
      template: { prefix: "<sys>Be nice.</sys>", defaultSystem: null },
    });
    const r = fromSource(source);
    expect(r).toMatchObject({ ok: false });
    if (!r.ok) expect(r.reason).toContain("not a prefix");
  });

  const loop = (body: string) =>
    `{% for m in messages %}${body}{% endfor %}{% if add_generation_prompt %}A:{% endif %}`;

  it("renders the message index", () => {
    const r = fromSource(loop("<{{ loop.index0 }}>{{ m.role }}: {{ m.content }}\n"));
    expect(r).toMatchObject({ ok: false });
    if (!r.ok) expect(r.reason).toMatch(/^not segmentable: .*first user message/);
  });

  it("uppercases content", () => {
    const r = fromSource(loop("{{ m.role }}: {{ m.content | upper }}\n"));
    expect(r).toEqual({
      ok: false,
      reason: "not segmentable: the content of message 0 (user) is not written verbatim",
    });
  });

  it("depends on the next message", () => {
    const r = fromSource(
      loop(
        "{{ m.role }}:{{ m.content }}{% if not loop.last and messages[loop.index0 + 1].role == 'assistant' %}=>{% endif %}\n",
      ),
    );
    expect(r).toMatchObject({ ok: false });
  });

  it("writes today's date", () => {
    const source =
      "<sys>Today Date: {{ strftime_now('%d %b %Y') }}</sys>" +
      loop("<{{ m.role }}>{{ m.content }}</{{ m.role }}>");
    expect(fromSource(source)).toEqual({
      ok: false,
      reason: "not segmentable: the template writes the current date (strftime_now)",
    });
    // The same template with the date removed is fine: the check is not a false alarm.
    expect(fromSource(source.replace("{{ strftime_now('%d %b %Y') }}", "26 Jul 2024"))).toMatchObject({
      ok: true,
    });
  });

  it("writes content twice", () => {
    expect(probeSource(loop("{{ m.content }}|{{ m.content }}"))).toMatchObject({
      ok: false,
      reason: "the content of message 0 (user) is written twice",
    });
  });

  it("strips only trailing whitespace (neither kept nor Python strip)", () => {
    expect(probeSource(loop("{{ m.role }}: {{ m.content.rstrip() }}\n"))).toMatchObject({ ok: false });
  });

  it("replaces empty content: probing passes, verification with the core finds it", () => {
    const source = loop("{{ m.role }}: {{ m.content if m.content else '(empty)' }}\n");
    expect(probeSource(source)).toMatchObject({ ok: true });
    const r = fromSource(source);
    expect(r).toMatchObject({ ok: false });
    if (!r.ok) expect(r.reason).toContain("EXACT stream differs from the chat template");
  });
});

describe("the verifier", () => {
  const llama3 = loadModel("llama3_1");
  const jinja = new ChatTemplateRenderer(llama3.config);
  const reference = (m: Parameters<typeof jinja.render>[0], addGenerationPrompt: boolean) =>
    jinja.render(m, { addGenerationPrompt });

  it("catches a renderer that is off by one byte", () => {
    const corrupt: CoreRenderChat = (t, m) => {
      const r = renderChat(t, m);
      const stream = r.stream.slice();
      if (stream.length > 40) stream[40] = (stream[40] as number) ^ 1;
      return { status: r.status, stream };
    };
    expect(verifySegmentTemplate(fixture("llama3_1"), reference, corrupt)).toMatchObject({ ok: false });
  });

  it("catches a PARTIAL stream that is not a prefix", () => {
    const wrong: CoreRenderChat = () => ({
      status: "partial",
      stream: new TextEncoder().encode("<|eot_id|>"),
    });
    const r = verifySegmentTemplate(fixture("llama3_1"), reference, wrong);
    expect(r).toMatchObject({ ok: false });
    if (!r.ok) expect(r.reason).toContain("not a prefix");
  });

  it("refuses a renderer that is never wrong because it never renders", () => {
    const nothing: CoreRenderChat = () => ({ status: "none", stream: new Uint8Array(0) });
    const r = verifySegmentTemplate(fixture("llama3_1"), reference, nothing);
    expect(r).toMatchObject({ ok: false });
    if (!r.ok) expect(r.reason).toMatch(/^only 0 of \d+ conversations rendered exactly/);
  });

  it("checks add_generation_prompt=false renders too", () => {
    const alwaysGen: CoreRenderChat = (t, m) => renderChat(t, m);
    const r = verifySegmentTemplate(fixture("llama3_1"), reference, alwaysGen);
    expect(r).toMatchObject({ ok: false });
    if (!r.ok) expect(r.reason).toContain("(add_generation_prompt=false)");
  });

  it("catches the wrong content transform in the template", () => {
    const untrimmed = { ...fixture("llama3_1"), trimContent: false };
    expect(verifySegmentTemplate(untrimmed, reference, renderChat)).toMatchObject({ ok: false });
  });

  it("needs the Python string semantics: plain @huggingface/jinja disagrees with the engine", () => {
    const qwen3 = loadModel("qwen3");
    const plain = new Template(qwen3.config.chat_template as string);
    const jsReference = (messages: Parameters<typeof jinja.render>[0], gen: boolean) =>
      plain.render({ messages, add_generation_prompt: gen, bos_token: "", eos_token: "<|im_end|>" });
    const r = verifySegmentTemplate(fixture("qwen3"), jsReference, renderChat);
    expect(r).toMatchObject({ ok: false });
  });
});
