// How the response scanner (filter/core/usage-scan.ts, through build/kvroute-core.wasm) reads a
// body cut into chunks: whole SSE events are only searched for `"usage"`, a line or document that
// straddles chunks is read by the state machine from its start, and the same exact path and byte
// budget hold whichever way the body is cut.
import { describe, expect, it } from "vitest";
import { scanServedUsage } from "../../control-plane/src/core/kvroute-core.ts";

const cached = (r: { cachedTokens?: number }) => r.cachedTokens;
const json = (chunks: string[], budget?: number) => scanServedUsage(chunks, "json", budget);
const sse = (chunks: string[], budget?: number) => scanServedUsage(chunks, "sse", budget);

/** The body cut at the given offsets (ascending, may repeat: empty chunks). */
const cutAt = (body: string, ...at: number[]) =>
  [0, ...at, body.length].slice(1).map((end, k) => body.slice([0, ...at][k], end));

const event = (content: string) =>
  `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"logprobs":null}]}\n\n`;
const usageEvent = (cachedTokens: number) =>
  `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":300,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":${cachedTokens}}}}\n\n`;
const DONE = "data: [DONE]\n\n";
/** A usage object as a model could write it in its answer: in the body it is an escaped string. */
const FAKE = '"usage":{"prompt_tokens_details":{"cached_tokens":999}}';

describe("usage split across chunks", () => {
  it("finds the key and the value wherever two cuts fall around them (JSON)", () => {
    const body = `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens_details":{"cached_tokens":4321}}}`;
    const key = body.indexOf('"usage"');
    const value = body.indexOf("4321");
    for (let i = key - 2; i <= key + 9; i++)
      for (let j = Math.max(i, value - 3); j <= value + 6; j++)
        expect(cached(json(cutAt(body, i, j))), `cuts at ${i}, ${j}`).toBe(4321);
  });

  it("finds them in an SSE stream of one event per chunk, the usage event cut at every pair of offsets", () => {
    const head = [event("Hello"), event(" world"), event(FAKE)];
    const u = usageEvent(4321);
    for (let i = 0; i <= u.length; i++)
      for (let j = i; j <= u.length; j += 7) {
        const chunks = [...head, u.slice(0, i), u.slice(i, j), u.slice(j), DONE];
        expect(cached(sse(chunks)), `cuts at ${i}, ${j}`).toBe(4321);
      }
  });

  it("finds them with CRLF framing, the stream cut at every offset", () => {
    const body = [event("a"), usageEvent(77), DONE].join("").replaceAll("\n", "\r\n");
    for (let i = 0; i <= body.length; i++) expect(cached(sse(cutAt(body, i))), `cut at ${i}`).toBe(77);
  });

  it("reads an event that straddles chunks from its start, even when the next chunk ends an event", () => {
    // The second chunk starts mid-line and ends with a line break: it is not a run of whole events.
    const u = usageEvent(5);
    const at = u.indexOf('"prompt_tokens"');
    expect(cached(sse([event("x"), u.slice(0, at), u.slice(at) + event("y"), DONE]))).toBe(5);
    // A bad first half spoils that event only.
    expect(cached(sse([event("x"), u.slice(0, at).replace("[]", "[}"), u.slice(at), DONE]))).toBeUndefined();
  });
});

describe('"usage" that is not the path, then the real one', () => {
  const notThePath = [
    event(FAKE), // escaped quotes in content
    event("usage"), // a value string "usage"
    event(`say "usage" then ${FAKE}`),
    'data: {"choices":[{"index":0,"usage":{"prompt_tokens_details":{"cached_tokens":999}}}]}\n\n', // another path
    'data: {"x":{"usage":{"prompt_tokens_details":{"cached_tokens":999}}}}\n\n',
    'data: {"usage":{"prompt_tokens_details":{"cached_tokens":999}},"usage":null}\n\n', // replaced
  ];

  it("counts only the real one, each event its own chunk or all in one", () => {
    for (const fake of notThePath) {
      expect(cached(sse([event("a"), fake, DONE])), fake).toBeUndefined();
      expect(cached(sse([event("a"), fake, usageEvent(12), DONE])), fake).toBe(12);
      expect(cached(sse([event("a") + fake + usageEvent(12) + DONE])), fake).toBe(12);
      // The real one first: a later event without the path does not replace it.
      expect(cached(sse([usageEvent(12), fake, DONE])), fake).toBe(12);
    }
  });

  it("counts only the real one in a JSON answer whose content spells usage", () => {
    const choices = `"choices":[{"message":{"content":${JSON.stringify(`${FAKE} "usage"`)}}}]`;
    expect(cached(json([`{${choices},"usage":{"prompt_tokens_details":{"cached_tokens":12}}}`]))).toBe(12);
    expect(cached(json([`{${choices}}`]))).toBeUndefined();
  });
});

describe("a chunk that starts inside a string", () => {
  // A long content whose text spells a usage object (escaped in the body), then the real usage.
  const content = `${"lorem ipsum ".repeat(20)}${FAKE}}]}${"dolor ".repeat(10)}`;

  it("carries the string (and a pending escape) into the next chunk: JSON", () => {
    const body = `{"choices":[{"message":{"content":${JSON.stringify(content)}}}],"usage":{"prompt_tokens_details":{"cached_tokens":31}}}`;
    const noUsage = `{"choices":[{"message":{"content":${JSON.stringify(content)}}}]}`;
    const from = body.indexOf("lorem");
    const to = body.indexOf("dolor") + 8;
    for (let i = from; i < to; i++) {
      expect(cached(json(cutAt(body, i))), `cut at ${i}`).toBe(31);
      expect(cached(json(cutAt(noUsage, i))), `cut at ${i}`).toBeUndefined();
    }
  });

  it("carries the string into the next chunk: SSE, the rest of the stream in whole events", () => {
    const e = event(content);
    const from = e.indexOf("lorem");
    const to = e.indexOf("dolor") + 8;
    for (let i = from; i < to; i++) {
      const [a, b] = cutAt(e, i) as [string, string];
      expect(cached(sse([a, b, usageEvent(31), DONE])), `cut at ${i}`).toBe(31);
      expect(cached(sse([a, b + DONE])), `cut at ${i}`).toBeUndefined();
    }
  });
});

describe("an answer larger than the budget", () => {
  const events = Array.from({ length: 40 }, (_, t) => event(`token ${t}`));
  const u = usageEvent(64);
  const stream = [...events, u, DONE];
  const before = events.join("").length;

  it("reads an SSE usage event that ends within the budget, not one past it", () => {
    const total = stream.join("").length;
    expect(sse(stream, total)).toMatchObject({ cachedTokens: 64, cut: false, scanned: total });
    // The budget ends right after the usage event's line break: [DONE] is not looked at.
    expect(sse(stream, before + u.length)).toMatchObject({ cachedTokens: 64, cut: true });
    // It ends inside the usage event, or before it (at an event's end: that chunk is cut short).
    for (const budget of [before + u.length - 2, before + 10, before, before - 1, 300]) {
      const r = sse(stream, budget);
      expect(r, `budget ${budget}`).toMatchObject({ usage: false, cut: true, scanned: budget });
      expect(cached(r)).toBeUndefined();
    }
  });

  it("keeps what an earlier event said when a later one is past the budget", () => {
    const r = sse([usageEvent(1), ...events, usageEvent(2), DONE], usageEvent(1).length + before);
    expect(r).toMatchObject({ cachedTokens: 1, cut: true });
  });

  it("counts nothing from a document the budget cut, even when the part read is complete", () => {
    const v = '{"usage":{"prompt_tokens_details":{"cached_tokens":5}}}';
    // What the budget left unread could spoil the document: it does not count either way.
    for (const rest of ["\n", "x"]) {
      expect(json([v + rest], v.length)).toMatchObject({ usage: false, cut: true });
      expect(cached(json([v + rest], v.length))).toBeUndefined();
    }
    expect(cached(json([`${v}\n`], v.length + 1))).toBe(5);
    expect(cached(sse([`data: ${v}\n`], 6 + v.length))).toBeUndefined();
    expect(cached(sse([`data: ${v}\n`], 7 + v.length))).toBe(5);
  });

  it("counts nothing from a JSON answer longer than the budget, in one chunk or many", () => {
    const body = `{"choices":[{"message":{"content":${JSON.stringify("word ".repeat(400))}}}],"usage":{"prompt_tokens_details":{"cached_tokens":8}}}`;
    const pieces = Array.from({ length: Math.ceil(body.length / 100) }, (_, k) =>
      body.slice(k * 100, k * 100 + 100),
    );
    for (const chunks of [[body], pieces]) {
      expect(json(chunks, body.length)).toMatchObject({ cachedTokens: 8, cut: false });
      const r = json(chunks, body.length - 1);
      expect(r).toMatchObject({ usage: false, cut: true, scanned: body.length - 1 });
      expect(cached(r)).toBeUndefined();
    }
  });
});
