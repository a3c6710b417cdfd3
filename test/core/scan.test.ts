// The single-pass request scanner: fields in any order, exact string decoding, flags, and an
// error code (never a trap) for every malformed input.
import { describe, expect, it } from "vitest";
import {
  type ScannedRequest,
  type ScanResult,
  scanRequest,
} from "../../control-plane/src/core/kvroute-core.ts";

function ok(body: string | Uint8Array): ScannedRequest {
  const r = scanRequest(body);
  if (!r.ok) throw new Error(`scan failed: ${r.error}`);
  return r;
}
const err = (body: string | Uint8Array): string => {
  const r: ScanResult = scanRequest(body);
  return r.ok ? "ok" : r.error;
};

describe("scanRequest fields", () => {
  it("reads a chat body whatever the key order", () => {
    const a = ok(
      '{"model":"qwen","stream":true,"messages":[{"role":"user","content":"hi"}],"cache_salt":"s1"}',
    );
    const b = ok(
      '{"cache_salt":"s1","messages":[{"content":"hi","role":"user"}],"stream":true,"model":"qwen"}',
    );
    for (const r of [a, b]) {
      expect(r.model).toBe("qwen");
      expect(r.stream).toBe(true);
      expect(r.cacheSalt).toBe("s1");
      expect(r.messages).toEqual([{ role: "user", texts: ["hi"], flags: [] }]);
      expect(r.flags).toEqual([]);
    }
  });

  it("decodes every escape to exact UTF-8, surrogate pairs joined, lone surrogates as U+FFFD", () => {
    const r = ok(
      String.raw`{"model":"a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u4e2d\uD83C\uDF0D|\uD800|\uDC00|\uD83Cx|\u0000"}`,
    );
    expect(r.model).toBe('a"b\\c/d\b\f\n\r\tAé中🌍|\uFFFD|\uFFFD|\uFFFDx|\u0000');
  });

  it("matches keys written with escapes, as json.loads would", () => {
    expect(ok(String.raw`{"mod\u0065l":"x","\u0073tream":false}`)).toMatchObject({
      model: "x",
      stream: false,
    });
  });

  it("lets a repeated key win last, like Python's json", () => {
    const r = ok('{"model":"a","model":"b","messages":[{"role":"user","content":"1"}],"messages":[]}');
    expect(r.model).toBe("b");
    expect(r.messages).toEqual([]);
  });

  it("classifies prompts: string, strings, token ids, other", () => {
    expect(ok('{"prompt":"x"}').prompt).toEqual({ kind: "string", count: 0, first: "x" });
    expect(ok('{"prompt":["a","b"]}').prompt).toEqual({ kind: "strings", count: 2, first: "a" });
    expect(ok('{"prompt":[1,2,3]}').prompt).toEqual({ kind: "tokens", count: 3 });
    expect(ok('{"prompt":[[1,2],[3]]}').prompt.kind).toBe("other");
    expect(ok('{"prompt":["a",1]}').prompt.kind).toBe("other");
    expect(ok('{"prompt":[]}').prompt.kind).toBe("other");
    expect(ok("{}").prompt.kind).toBe("absent");
  });

  it("records message fields that make a message inexpressible", () => {
    const r = ok(
      JSON.stringify({
        messages: [
          { role: "assistant", content: null, tool_calls: [{ id: "1" }] },
          { role: "tool", content: "r", tool_call_id: "1" },
          { role: "user", content: "x", name: "bob" },
          { role: "assistant", content: "y", reasoning_content: "z" },
          { role: "user", content: [{ type: "image_url", image_url: { url: "u" } }] },
          {
            role: "user",
            content: [
              { type: "text", text: "a" },
              { text: "b", type: "text", cache_control: {} },
            ],
          },
          { role: "user", content: "x", weird: 1 },
          { role: "user", content: "x", name: null, tool_calls: null },
          { content: "no role" },
          "not an object",
        ],
      }),
    );
    expect(r.messages?.map((m) => m.flags)).toEqual([
      ["toolCalls", "noContent"],
      ["toolCallId"],
      ["name"],
      ["reasoning"],
      ["nonTextPart", "contentParts"],
      ["contentParts"],
      ["unknownField"],
      [],
      ["noRole"],
      ["noContent", "bad", "noRole"],
    ]);
    expect(r.messages?.[5]?.texts).toEqual(["a", "b"]);
  });

  it("flags request fields that change the prompt", () => {
    const r = ok(
      '{"add_generation_prompt":false,"continue_final_message":true,"chat_template":"x","chat_template_kwargs":{"enable_thinking":false},"tools":[{}],"documents":[1],"add_special_tokens":true,"suffix":"s","prompt_embeds":"e"}',
    );
    expect(r.flags).toEqual([
      "addGenerationPromptFalse",
      "continueFinalMessage",
      "chatTemplate",
      "chatTemplateKwargs",
      "tools",
      "documents",
      "addSpecialTokensTrue",
      "suffix",
      "promptEmbeds",
    ]);
    // Defaults and nulls change nothing.
    expect(
      ok('{"add_generation_prompt":true,"continue_final_message":false,"tools":null,"chat_template":null}')
        .flags,
    ).toEqual([]);
    expect(ok('{"model":1}').flags).toEqual(["badField"]);
    expect(ok('{"cache_salt":["x"]}').flags).toEqual(["badField"]);
    expect(ok('{"stream":"yes"}').flags).toEqual(["badField"]);
    expect(ok('{"messages":{}}').flags).toEqual(["badMessages"]);
    expect(ok('{"lora_path":"sql"}').loraPath).toBe("sql");
  });

  it("skips unneeded values of any shape", () => {
    const r = ok(
      '{"x":{"a":[1,-2.5e+10,true,false,null,{"b":"\\"}"}],"c":{}},"y":[],"z":-0,"model":"m","n":1E-3,"w":"]}"}',
    );
    expect(r.model).toBe("m");
  });
});

describe("scanRequest errors (never a trap)", () => {
  const table: Array<[string, string]> = [
    ["", "truncated"],
    ["   ", "truncated"],
    ["[]", "not-object"],
    ['"x"', "not-object"],
    ["{", "truncated"],
    ['{"model"', "truncated"],
    ['{"model":', "truncated"],
    ['{"model":"abc', "truncated"],
    ['{"model":"a\\', "truncated"],
    ['{"model":"\\u12', "truncated"],
    ['{"model":tru', "truncated"],
    ['{"a":[1,2', "truncated"],
    ['{"model":"a"} x', "syntax"],
    ['{"model":"a",}', "syntax"],
    ['{"a":01}', "syntax"],
    ['{"a":1.}', "syntax"],
    ['{"a":.5}', "syntax"],
    ['{"a":NaN}', "syntax"],
    ['{"a":[1,]}', "syntax"],
    ['{"a":[1}', "syntax"],
    ['{"a":{"b":1]}', "syntax"],
    ['{"a":"\\x"}', "syntax"],
    ['{"a":"\\u12G4"}', "syntax"],
    ['{"a":"tab\there"}', "syntax"],
    ["{'a':1}", "syntax"],
    ['{"a":1 "b":2}', "syntax"],
  ];
  it.each(table)("%j → %s", (body, want) => {
    expect(err(body)).toBe(want);
  });

  it("rejects malformed UTF-8 in strings", () => {
    const wrap = (bytes: number[]): Uint8Array =>
      Uint8Array.from([...Buffer.from('{"model":"'), ...bytes, 0x22, 0x7d]);
    for (const bad of [
      [0x80],
      [0xc0, 0x80],
      [0xe0, 0x80, 0x80],
      [0xed, 0xa0, 0x80],
      [0xf4, 0x90, 0x80, 0x80],
      [0xff],
      [0xe4, 0xb8],
    ]) {
      expect(err(wrap(bad)), bad.join(",")).toBe("utf8");
    }
    expect(ok(wrap([0xf0, 0x9f, 0x8c, 0x8d])).model).toBe("🌍");
  });

  it("rejects deep nesting and 10 MB of '[' with an error code", () => {
    expect(err(`{"a":${"[".repeat(10 << 20)}`)).toBe("depth");
    expect(err(`{"a":${"[".repeat(400)}${"]".repeat(400)}}`)).toBe("ok");
    expect(err(`{"a":${'{"b":'.repeat(600)}1${"}".repeat(600)}}`)).toBe("depth");
  });

  it("accepts huge numbers and huge strings without converting them", () => {
    expect(err(`{"a":${"9".repeat(100000)}e${"9".repeat(1000)},"model":"m"}`)).toBe("ok");
    expect(ok(`{"model":"${"é".repeat(1 << 20)}"}`).model?.length).toBe(1 << 20);
  });
});
