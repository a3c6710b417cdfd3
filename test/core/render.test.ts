// Rendering rules beyond the real-template comparisons: statuses for the fields that change the
// prompt, completions, default system, limits, and the segment-template binary codec.
import { describe, expect, it } from "vitest";
import {
  checkSegmentTemplateBytes,
  chunkHashes,
  encodeSegmentTemplate,
  hashRequest,
  renderChat,
  renderRequest,
} from "../../control-plane/src/core/kvroute-core.ts";
import type { SegmentTemplate } from "../../control-plane/src/core/segment-template.ts";
import { segmentTemplate, text } from "./helpers.ts";

const T: SegmentTemplate = {
  prefix: "<B>",
  roles: {
    system: { open: "<S>", close: "</S>" },
    user: { open: "<U>", close: "</U>" },
    assistant: { open: "<A>", close: "</A>" },
  },
  generationPrompt: "<A>",
  defaultSystem: null,
  trimContent: false,
  assistantHistoryThink: "none",
};
const user = (content: string) => ({ role: "user", content });
const body = (o: Record<string, unknown>) => JSON.stringify(o);

describe("chat statuses (wire-format §2)", () => {
  const msgs = [user("a"), { role: "assistant", content: "b" }, user("c")];

  it("exact with the generation prompt by default", () => {
    const r = renderChat(T, msgs);
    expect(r).toMatchObject({ status: "exact" });
    expect(text(r.stream)).toBe("<B><U>a</U><A>b</A><U>c</U><A>");
  });

  it("stops before an inexpressible message with an exact prefix", () => {
    const r = renderChat(T, [user("a"), { role: "assistant", content: "b", tool_calls: [{}] }, user("c")]);
    expect(r.status).toBe("partial");
    expect(text(r.stream)).toBe("<B><U>a</U>");
    expect(text(renderChat(T, [user("a"), { role: "tool", content: "x" }]).stream)).toBe("<B><U>a</U>");
  });

  it("chat_template_kwargs: messages exact, generation prompt unknown", () => {
    const r = renderChat(T, msgs, { chatTemplateKwargs: { enable_thinking: false } });
    expect(r.status).toBe("partial");
    expect(text(r.stream)).toBe("<B><U>a</U><A>b</A><U>c</U>");
  });

  it("continue_final_message leaves the last message out", () => {
    const r = renderChat(T, msgs, { continueFinalMessage: true, addGenerationPrompt: false });
    expect(r.status).toBe("partial");
    expect(text(r.stream)).toBe("<B><U>a</U><A>b</A>");
  });

  it("tools and documents keep only the prefix", () => {
    expect(text(renderChat(T, msgs, { tools: [{ type: "function" }] }).stream)).toBe("<B>");
    expect(renderRequest(body({ messages: msgs, documents: [{}] }), T).status).toBe("partial");
  });

  it("a custom chat_template, add_special_tokens: true, no messages or bad fields render nothing", () => {
    for (const b of [
      { messages: msgs, chat_template: "{{x}}" },
      { messages: msgs, add_special_tokens: true },
      { messages: [] },
      { messages: msgs, model: 5 },
      { messages: "x" },
    ]) {
      expect(renderRequest(body(b), T, "", { endpoint: "chat" }), JSON.stringify(b)).toMatchObject({
        status: "none",
        stream: new Uint8Array(0),
      });
    }
  });

  it("renders a default system message unless the conversation starts with one, trimmed when trimming", () => {
    const t = { ...T, defaultSystem: "  be brief ", trimContent: true };
    expect(text(renderChat(t, [user(" x ")]).stream)).toBe("<B><S>be brief</S><U>x</U><A>");
    expect(text(renderChat(t, [{ role: "system", content: "own" }, user("x")]).stream)).toBe(
      "<B><S>own</S><U>x</U><A>",
    );
  });

  it("decodes an escaped role before matching it", () => {
    const r = renderRequest(String.raw`{"messages":[{"role":"us\u0065r","content":"x"}]}`, T);
    expect(text(r.stream)).toBe("<B><U>x</U><A>");
  });

  it("cuts a stream past maxStreamBytes and calls it partial", () => {
    const r = renderRequest(body({ messages: [user("x".repeat(1000))] }), T, "", { maxStreamBytes: 100 });
    expect(r.status).toBe("partial");
    expect(text(r.stream)).toBe(`<B><U>${"x".repeat(94)}`);
  });

  it("qwen3 history: only an assistant turn containing </think> is cut, then lstrip('\\n')", () => {
    const q = segmentTemplate("qwen3");
    const r = renderChat(q, [
      user("1"),
      { role: "assistant", content: "\n\nkeep" },
      user("2"),
      { role: "assistant", content: "<think>x</think>\n\n y" },
      user("3"),
    ]);
    expect(text(r.stream)).toBe(
      "<|im_start|>user\n1<|im_end|>\n<|im_start|>assistant\n\n\nkeep<|im_end|>\n<|im_start|>user\n2<|im_end|>\n<|im_start|>assistant\n y<|im_end|>\n<|im_start|>user\n3<|im_end|>\n<|im_start|>assistant\n",
    );
  });
});

describe("completions", () => {
  it("is bosText ‖ prompt for a string or a single-string array", () => {
    for (const prompt of ["hi\\u00e9", ["hi\\u00e9"]]) {
      const b = body({ model: "m", prompt }).replace("\\\\", "\\");
      const r = renderRequest(b, null, "<s>");
      expect(r.status).toBe("exact");
      expect(text(r.stream)).toBe("<s>hié");
    }
  });

  it("omits the BOS with add_special_tokens: false; renders nothing for token ids, batches, suffix", () => {
    expect(text(renderRequest(body({ prompt: "x", add_special_tokens: false }), null, "<s>").stream)).toBe(
      "x",
    );
    for (const b of [
      { prompt: [1, 2] },
      { prompt: ["a", "b"] },
      { prompt: "x", suffix: "y" },
      { prompt: 3 },
    ]) {
      expect(renderRequest(body(b), null, "<s>", { endpoint: "completions" }).status).toBe("none");
    }
  });

  it("reports the scan error of a malformed body", () => {
    expect(renderRequest('{"prompt":"x', null, "")).toMatchObject({ status: "none", error: "truncated" });
  });
});

describe("hashRequest (the filter's pipeline)", () => {
  it("hashes the rendered stream with the request's cache_salt in h0", () => {
    const b = body({ messages: [user("z".repeat(300))], cache_salt: "s" });
    const a = hashRequest(b, { endpoint: "chat", template: T, model: "m", chunkSize: 64 });
    const c = hashRequest(body({ messages: [user("z".repeat(300))] }), {
      endpoint: "chat",
      template: T,
      model: "m",
      chunkSize: 64,
    });
    expect(a.status).toBe("exact");
    expect(a.hashes.length).toBe(Math.floor(a.stream.length / 64));
    expect(a.hashes[0]).not.toBe(c.hashes[0]);
  });

  it("gives the filter exactly the hashes the control plane derives from the same stream (DESIGN §2)", () => {
    const q = segmentTemplate("qwen3");
    const b = body({
      model: "alias",
      cache_salt: "t\u00e9",
      messages: [{ role: "system", content: "s".repeat(500) }, user("q".repeat(700))],
    }).replace("\\u00e9", "\u00e9");
    const filter = hashRequest(b, {
      endpoint: "chat",
      template: q,
      model: "Qwen/Qwen3-8B",
      lora: "ad",
      chunkSize: 32,
    });
    const stream = renderChat(q, [
      { role: "system", content: "s".repeat(500) },
      user("q".repeat(700)),
    ]).stream;
    expect(filter.stream).toEqual(stream);
    const controlPlane = chunkHashes({
      model: "Qwen/Qwen3-8B",
      lora: "ad",
      cacheSalt: "té",
      stream,
      chunkSize: 32,
    });
    expect([...filter.hashes]).toEqual([...controlPlane]);
    expect(controlPlane.length).toBe(Math.floor(stream.length / 32));
  });
});

describe("segment-template binary codec", () => {
  it("round-trips through the core's decoder (renders agree for every fixture template)", () => {
    for (const t of [T, segmentTemplate("qwen3"), segmentTemplate("llama3_1"), { ...T, defaultSystem: "" }]) {
      expect(checkSegmentTemplateBytes(encodeSegmentTemplate(t))).toBe(0);
    }
  });

  it("pins the layout of a small template", () => {
    const t: SegmentTemplate = {
      prefix: "P",
      roles: { user: { open: "u", close: "" } },
      generationPrompt: "",
      defaultSystem: "d",
      trimContent: true,
      assistantHistoryThink: "qwen3",
    };
    expect(Buffer.from(encodeSegmentTemplate(t)).toString("hex")).toBe(
      [
        "4b565354", // "KVST"
        "01", // version
        "03", // flags: trimContent | defaultSystem
        "01", // qwen3
        "01", // one role
        "01000000" + "50", // prefix "P"
        "00000000", // generationPrompt ""
        "01000000" + "64", // defaultSystem "d"
        "04000000" + "75736572", // "user"
        "01000000" + "75", // open "u"
        "00000000", // close ""
      ].join(""),
    );
  });

  it("rejects garbage, truncation and trailing bytes with an error code", () => {
    const good = encodeSegmentTemplate(segmentTemplate("llama3_1"));
    expect(checkSegmentTemplateBytes(new Uint8Array(0))).toBe(-1);
    expect(checkSegmentTemplateBytes(Uint8Array.from([...good.subarray(0, 4), 2, ...good.subarray(5)]))).toBe(
      -3,
    );
    expect(checkSegmentTemplateBytes(Uint8Array.from([0, ...good.subarray(1)]))).toBe(-2);
    expect(checkSegmentTemplateBytes(Uint8Array.from([...good, 0]))).toBe(-7);
    for (let n = 0; n < good.length; n++)
      expect(checkSegmentTemplateBytes(good.subarray(0, n))).toBeLessThan(0);
    // A duplicated role: a one-role template with its role record written twice.
    const one = encodeSegmentTemplate({ ...T, roles: { user: { open: "u", close: "" } } });
    const role = one.subarray(one.length - (4 + 4 + 4 + 1 + 4));
    const dup = Uint8Array.from([...one, ...role]);
    dup[7] = 2;
    expect(checkSegmentTemplateBytes(dup)).toBe(-6);
    dup[7] = 1;
    expect(checkSegmentTemplateBytes(dup)).toBe(-7);
    // Random bytes behind a valid header never trap.
    let seed = 1;
    for (let i = 0; i < 2000; i++) {
      const b = Uint8Array.from(good);
      for (let k = 0; k < 4; k++) {
        seed = (seed * 1103515245 + 12345) >>> 0;
        b[8 + (seed % (b.length - 8))] = seed >>> 24;
      }
      expect(typeof checkSegmentTemplateBytes(b)).toBe("number");
    }
  });
});

describe("the Node export surface refuses out-of-range arguments instead of trapping", () => {
  it("lengths past the I/O region, negative lengths and caps return an error code", async () => {
    const { core } = await import("../../control-plane/src/core/core-wasm.ts");
    const ex = core().ex;
    const huge = 1 << 30;
    expect(ex.scanIo(huge)).toBe(-7);
    expect(ex.scanIo(-1)).toBe(-7);
    expect(ex.renderIo(10, 1, 0, 0, -1)).toBe(-7);
    expect(ex.renderIo(huge, 2, 0, 0, 100)).toBe(-7);
    expect(ex.hashRequestIo(10, 1, 0, -5, 0, 0, 128, 100)).toBe(-7);
    expect(ex.chunkFeedIo(0n, huge, 128)).toBe(-7);
    expect(ex.chunkFeedIo(0n, 10, 0)).toBe(-7);
    expect(ex.templateLoad(huge)).toBe(-7);
    expect(ex.parseRankIo(huge)).toBe(-1n);
    expect(ex.decodeSpanIo(huge, 10, 1)).toBe(-7);
    expect(ex.renderIo(10, 9, 0, 0, 100)).toBeLessThan(0);
    // Lengths whose 32-bit sum would wrap around to a small number.
    const max = 0x7fffffff;
    expect(ex.hashRequestIo(0, 1, 0, max, max, 2, 128, 100)).toBe(-7);
    expect(ex.rootHashIo(max, max, 2)).toBe(0n);
    expect(ex.decodeSpanIo(max, max, 1)).toBe(-7);
  });
});
