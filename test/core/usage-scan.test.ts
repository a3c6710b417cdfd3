// The response scanner that reads the engine's served cached tokens as the body streams past
// (filter/core/usage-scan.ts, through build/kvroute-core.wasm): only the exact path
// usage.prompt_tokens_details.cached_tokens of a complete document counts, wherever the chunks
// are cut, and no input traps.
import { describe, expect, it } from "vitest";
import { scanServedUsage, servedUsageMode } from "../../control-plane/src/core/kvroute-core.ts";

const usageJson = (cached: string) =>
  `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],` +
  `"usage":{"prompt_tokens":300,"total_tokens":304,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":${cached}}},"kv_transfer_params":null}`;

const json = (body: string | string[]) => scanServedUsage(typeof body === "string" ? [body] : body, "json");
const sse = (body: string | string[]) => scanServedUsage(typeof body === "string" ? [body] : body, "sse");
const cached = (r: { cachedTokens?: number }) => r.cachedTokens;

/** vLLM's stream with include_usage: content chunks, the usage-only chunk, [DONE]. */
function vllmStream(details: string | null): string {
  const chunk = (content: string) =>
    `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"logprobs":null,"finish_reason":null}]}\n\n`;
  const usage =
    details === null
      ? `{"prompt_tokens":300,"total_tokens":304,"completion_tokens":4}`
      : `{"prompt_tokens":300,"total_tokens":304,"completion_tokens":4,"prompt_tokens_details":${details}}`;
  return (
    chunk("") +
    chunk("Hello") +
    chunk(' "usage":{"prompt_tokens_details":{"cached_tokens":999}}') +
    `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":${usage}}\n\n` +
    "data: [DONE]\n\n"
  );
}

describe("scanServedUsage: the path", () => {
  it("reads cached_tokens from a non-streaming response", () => {
    expect(json(usageJson("256"))).toMatchObject({ usage: true, cachedTokens: 256, cut: false });
  });

  it("reads it from the last SSE event that carries usage, and ignores [DONE]", () => {
    expect(sse(vllmStream('{"cached_tokens":128}'))).toMatchObject({ usage: true, cachedTokens: 128 });
  });

  it("tells usage without details (vLLM omits them for 0 cached, or without the flag) from no usage", () => {
    expect(sse(vllmStream(null))).toEqual(expect.objectContaining({ usage: true }));
    expect(cached(sse(vllmStream(null)))).toBeUndefined();
    expect(
      json(usageJson("0").replace(/"prompt_tokens_details":\{[^}]*\}/, '"prompt_tokens_details":null')),
    ).toEqual(expect.objectContaining({ usage: true }));
    const none = json('{"id":"x","choices":[]}');
    expect(none.usage).toBe(false);
    expect(cached(none)).toBeUndefined();
  });

  it("does not count the key inside content strings, with escaped quotes and backslashes", () => {
    const inContent = (s: string) =>
      `{"choices":[{"message":{"content":${JSON.stringify(s)}}}],"usage":{"prompt_tokens":1}}`;
    for (const s of [
      '"usage":{"prompt_tokens_details":{"cached_tokens":7}}',
      '\\"usage\\":{\\"prompt_tokens_details\\":{\\"cached_tokens\\":7}}',
      'x\\\\"usage":{"prompt_tokens_details":{"cached_tokens":7}}',
    ]) {
      const r = json(inContent(s));
      expect(r.usage).toBe(true);
      expect(cached(r)).toBeUndefined();
    }
  });

  it("reads through long non-ASCII content, and refuses a raw control byte deep in a long string", () => {
    // Escaped quotes and backslashes among multi-byte characters, in strings longer than a word.
    const content = `${"中文 emoji 🌍 é ".repeat(50)}\\\\ \\" ${"x".repeat(17)}`;
    const body = `{"choices":[{"message":{"content":"${content}"}}],"usage":{"prompt_tokens_details":{"cached_tokens":11}}}`;
    expect(JSON.parse(body).usage.prompt_tokens_details.cached_tokens).toBe(11);
    for (let i = 0; i < body.length; i += 13)
      expect(cached(json([body.slice(0, i), body.slice(i)]))).toBe(11);
    // An escaped control character is JSON; a raw one is not (and spoils only its own SSE event).
    expect(cached(json(body.replace("x".repeat(17), `${"x".repeat(9)}\\u0001`)))).toBe(11);
    const raw = body.replace("x".repeat(17), `${"x".repeat(9)}\x01${"x".repeat(7)}`);
    expect(cached(json(raw))).toBeUndefined();
    expect(cached(sse(`data: ${raw}\n\ndata: ${body}\n\n`))).toBe(11);
  });

  it("counts only the exact path, not the same keys elsewhere in the tree", () => {
    const miss = [
      '{"cached_tokens":5}',
      '{"prompt_tokens_details":{"cached_tokens":5}}',
      '{"choices":[{"usage":{"prompt_tokens_details":{"cached_tokens":5}}}]}',
      '{"x":{"usage":{"prompt_tokens_details":{"cached_tokens":5}}}}',
      '{"usage":{"cached_tokens":5}}',
      '{"usage":{"x":{"prompt_tokens_details":{"cached_tokens":5}}}}',
      '{"usage":{"prompt_tokens_details":{"x":{"cached_tokens":5}}}}',
      '{"usage":[{"prompt_tokens_details":{"cached_tokens":5}}]}',
      '{"usage":{"prompt_tokens_details":[{"cached_tokens":5}]}}',
      '[{"usage":{"prompt_tokens_details":{"cached_tokens":5}}}]',
      // near-miss keys: prefix, suffix, case, escape
      '{"usag":{"prompt_tokens_details":{"cached_tokens":5}}}',
      '{"usages":{"prompt_tokens_details":{"cached_tokens":5}}}',
      '{"Usage":{"prompt_tokens_details":{"cached_tokens":5}}}',
      '{"usage":{"prompt_tokens_detail":{"cached_tokens":5}}}',
      '{"usage":{"prompt_tokens_details":{"cached_token":5}}}',
      '{"usage":{"prompt_tokens_details":{"cached_tokens_":5}}}',
      '{"usage":{"prompt_tokens_details":{"Cached_tokens":5}}}',
      '{"usage":{"prompt_tokens_details":{"cached\\u005ftokens":5}}}',
    ];
    for (const body of miss) expect(cached(json(body)), body).toBeUndefined();
  });

  it("keeps the path through siblings, nested values and deep objects around it", () => {
    const deep = `${"[".repeat(40)}${"]".repeat(40)}`;
    const body =
      `{"a":{"b":{"c":{"d":{"usage":1}}}},"usage":{"x":${deep},"completion_tokens_details":{"cached_tokens":9},` +
      `"prompt_tokens_details":{"audio_tokens":null,"y":{"cached_tokens":8},"cached_tokens":42,"z":[1,{"q":"}"}]}},"tail":"]"}`;
    expect(cached(json(body))).toBe(42);
  });

  it("lets the last copy of a key win, like Python's json", () => {
    expect(cached(json('{"usage":{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}}'))).toBe(2);
    expect(
      cached(json('{"usage":{"prompt_tokens_details":{"cached_tokens":1}},"usage":{"prompt_tokens":3}}')),
    ).toBeUndefined();
    expect(
      cached(json('{"usage":{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":null}}}')),
    ).toBeUndefined();
    expect(json('{"usage":{"prompt_tokens":1},"usage":null}').usage).toBe(false);
  });
});

describe("scanServedUsage: values", () => {
  it.each([
    ["0", 0],
    ["7", 7],
    ["4294967295", 4294967295],
  ])("accepts the plain decimal %s", (v, want) => {
    expect(cached(json(usageJson(v)))).toBe(want);
    expect(cached(json(usageJson(` ${v} `)))).toBe(want);
  });

  it.each([
    "4294967296",
    "99999999999999999999999999",
    "-1",
    "-0",
    "1.0",
    "1.5",
    "1e3",
    "1E3",
    "007",
    "00",
    '"12"',
    "null",
    "true",
    "{}",
    "[12]",
    "12x",
  ])("does not count %s", (v) => {
    expect(cached(json(usageJson(v)))).toBeUndefined();
  });
});

describe("scanServedUsage: chunking and truncation", () => {
  it("finds the value wherever the body is cut in two, for JSON and SSE", () => {
    const body = usageJson("1234");
    const stream = vllmStream('{"cached_tokens":1234}');
    for (let i = 0; i <= body.length; i++)
      expect(cached(json([body.slice(0, i), body.slice(i)])), `json cut at ${i}`).toBe(1234);
    for (let i = 0; i <= stream.length; i++)
      expect(cached(sse([stream.slice(0, i), stream.slice(i)])), `sse cut at ${i}`).toBe(1234);
  });

  it("finds it when every byte is its own chunk", () => {
    expect(cached(json([...usageJson("77")]))).toBe(77);
    expect(cached(sse([...vllmStream('{"cached_tokens":77}')]))).toBe(77);
  });

  it("counts nothing from a truncated document", () => {
    const body = usageJson("1234");
    const end = body.indexOf("1234") + 4;
    for (const cut of [end - 2, end, end + 1, end + 2, body.length - 1])
      expect(cached(json(body.slice(0, cut))), `cut at ${cut}`).toBeUndefined();
    const stream = vllmStream('{"cached_tokens":1234}');
    const last = stream.indexOf("1234") + 6;
    expect(cached(sse(stream.slice(0, last)))).toBeUndefined();
  });

  it("counts a last SSE line without its newline, and CRLF framing", () => {
    expect(cached(sse('data: {"usage":{"prompt_tokens_details":{"cached_tokens":3}}}'))).toBe(3);
    expect(cached(sse('data:{"usage":{"prompt_tokens_details":{"cached_tokens":3}}}\r\n\r\n'))).toBe(3);
    expect(cached(sse(vllmStream('{"cached_tokens":5}').replaceAll("\n", "\r\n")))).toBe(5);
  });

  it("ignores SSE lines that are not data lines, and a data line cut by a raw newline", () => {
    const usage = '{"usage":{"prompt_tokens_details":{"cached_tokens":3}}}';
    expect(cached(sse(`event: x\n: comment ${usage}\nid: 1\n\n`))).toBeUndefined();
    expect(cached(sse(`xdata: ${usage}\n\n`))).toBeUndefined();
    expect(cached(sse(`Data: ${usage}\n\n`))).toBeUndefined();
    const cutInString =
      'data: {"choices":[{"text":"a\n"usage":{"prompt_tokens_details":{"cached_tokens":3}}}\n';
    expect(cached(sse(cutInString))).toBeUndefined();
    // A bad event does not spoil the next one.
    expect(cached(sse(`data: {"usage":}\n\ndata: ${usage}\n\n`))).toBe(3);
  });

  it("keeps a later event's value over an earlier one's, and an earlier one over later garbage", () => {
    const ev = (v: string) => `data: {"usage":{"prompt_tokens_details":{"cached_tokens":${v}}}}\n\n`;
    expect(cached(sse(ev("1") + ev("2")))).toBe(2);
    expect(cached(sse(`${ev("1")}data: {"usage":{"prompt_tokens_details":{"cached_tokens":2}\n\n`))).toBe(1);
  });

  it("refuses malformed documents: trailing bytes, mismatched brackets, control characters", () => {
    const v = '{"usage":{"prompt_tokens_details":{"cached_tokens":5}}}';
    for (const bad of [
      `${v}x`,
      `${v}}`,
      `${v}${v}`,
      v.replace("}}}", "}]}"),
      v.replace('"usage"', '"us\u0001age"'),
      v.replace(":5", "5"),
      v.replace('"usage":', '"usage"'),
      `{,${v.slice(1)}`,
    ])
      expect(cached(json(bad)), bad).toBeUndefined();
    expect(cached(json(`\n ${v}\n`))).toBe(5);
  });

  it("gives up at its byte budget and says so", () => {
    const body = usageJson("9");
    const r = scanServedUsage([body], "json", body.length - 3);
    expect(r).toMatchObject({ usage: false, cut: true, scanned: body.length - 3 });
    expect(cached(r)).toBeUndefined();
    expect(scanServedUsage([body], "json", body.length)).toMatchObject({ cachedTokens: 9, cut: false });
    // SSE keeps what complete events said before the cut.
    const ev = 'data: {"usage":{"prompt_tokens_details":{"cached_tokens":4}}}\n\n';
    const r2 = scanServedUsage([ev, ev.replace("4", "5")], "sse", ev.length + 10);
    expect(r2).toMatchObject({ cachedTokens: 4, cut: true });
  });

  it("never traps on mutated responses, random bytes or very deep nesting", () => {
    let seed = 17;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return seed % n;
    };
    const base = new TextEncoder().encode(vllmStream('{"cached_tokens":64}') + usageJson("64"));
    for (let i = 0; i < 400; i++) {
      const bytes = base.slice();
      for (let m = 0; m < 1 + rand(8); m++) bytes[rand(bytes.length)] = rand(256);
      const cut = rand(bytes.length);
      for (const mode of ["json", "sse"] as const) {
        const r = scanServedUsage([bytes.subarray(0, cut), bytes.subarray(cut)], mode);
        if (r.cachedTokens !== undefined) expect(r.cachedTokens).toBeLessThan(2 ** 32);
      }
    }
    const deep = `{"usage":${"[".repeat(200_000)}`;
    expect(json(deep).usage).toBe(false);
    expect(sse(`data: ${deep}\n\n`).usage).toBe(false);
  });
});

describe("servedUsageMode: which answers are read", () => {
  it.each([
    ["application/json", undefined, "json"],
    ["Application/JSON; charset=utf-8", undefined, "json"],
    ["  application/json  ", "identity", "json"],
    ["text/event-stream; charset=utf-8", undefined, "sse"],
    ["TEXT/EVENT-STREAM", " Identity ", "sse"],
    ["text/event-stream", "gzip", null],
    ["application/json", "br", null],
    ["application/json", "identity, gzip", null],
    ["application/json", "", null],
    ["application/jsonl", undefined, null],
    ["application/json-seq", undefined, null],
    ["application/jso", undefined, null],
    ["text/event-streams", undefined, null],
    ["text/plain", undefined, null],
    ["", undefined, null],
    [undefined, undefined, null],
  ] as const)("content-type %j, content-encoding %j → %s", (type, encoding, want) => {
    expect(servedUsageMode(type, encoding)).toBe(want);
  });
});
