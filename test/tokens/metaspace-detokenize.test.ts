// SentencePiece-style (metaspace) vocabularies, on the real Llama-2 tokenizer.json:
// `▁` is a space, `<0xNN>` is one byte, and the space of the `▁` the tokenizer prepends to
// every normalized segment (sequence start, and after each added token) is dropped, so the
// bytes are the text the engine was given.
import { describe, expect, it } from "vitest";
import { detokenize, SEQUENCE_START } from "../../control-plane/src/tokens/detokenize.ts";
import {
  randomContent,
  seededRandom,
  TEXT_PIECES,
  WHITESPACE_PIECES,
} from "../../control-plane/src/tokens/random-conversations.ts";
import {
  buildTokenBytesTable,
  type TokenBytesTable,
} from "../../control-plane/src/tokens/token-bytes-table.ts";
import { blockwise, encodeIds, loadModel, referenceTokenizer, utf8 } from "./models.ts";

function text(table: TokenBytesTable, ids: ArrayLike<number>, previous = SEQUENCE_START): string {
  return Buffer.from(bytes(table, ids, previous)).toString("utf8");
}
function bytes(table: TokenBytesTable, ids: ArrayLike<number>, previous = SEQUENCE_START): Uint8Array {
  const r = detokenize(table, ids, previous);
  if (!r.ok) throw new Error(`detokenize failed: ${JSON.stringify(r)}`);
  return r.bytes;
}

describe("llama2 (metaspace, legacy Prepend normalizer, byte fallback)", () => {
  const files = loadModel("llama2");
  const built = buildTokenBytesTable(files.tokenizer);
  if (!built.ok) throw new Error(built.reason);
  const table = built.table;
  const tokenizer = referenceTokenizer(files);

  it("is read as metaspace with a dummy prefix on every segment", () => {
    expect(table.scheme).toBe("metaspace");
    expect(table.dummyPrefix).toBe("always");
  });

  it("drops the dummy-prefix space at the sequence start only", () => {
    const ids = encodeIds(tokenizer, "Hello world");
    expect(ids).toEqual([22557, 1526]); // ▁Hello ▁world
    expect(text(table, ids)).toBe("Hello world");
    // A real leading space is its own ▁ before the prefixed one, and survives.
    expect(text(table, encodeIds(tokenizer, " Hello"))).toBe(" Hello");
    expect(text(table, encodeIds(tokenizer, "  Hello"))).toBe("  Hello");
  });

  it("drops it again after each added token, which starts a new segment", () => {
    const s = "<s> Hi</s>x<s><s>y";
    expect(text(table, encodeIds(tokenizer, s))).toBe(s);
    // add_special_tokens=true: BOS + text, the stream the filter writes as bosText ‖ prompt.
    expect(text(table, encodeIds(tokenizer, "Hello", true))).toBe("<s>Hello");
  });

  it("writes byte-fallback tokens as raw bytes", () => {
    const ids = encodeIds(tokenizer, "a\n\nb 🌍");
    expect(ids).toContain(13); // <0x0A>
    expect(text(table, ids)).toBe("a\n\nb 🌍");
    expect(bytes(table, [13])).toEqual(Uint8Array.of(0x0a));
  });

  it("needs the previous block's last token to place block-boundary spaces", () => {
    const ids = encodeIds(tokenizer, "one two three");
    const [first, ...rest] = ids;
    // Mid-sequence, ▁two keeps its space; read as a sequence start it would lose it.
    expect(text(table, rest, first as number)).toBe(" two three");
    expect(text(table, rest, SEQUENCE_START)).toBe("two three");
    // After an added token, the next token starts a segment again.
    expect(text(table, rest, 2)).toBe("two three");
  });

  it("round-trips random text, whole and in 16-token blocks, with and without BOS", () => {
    const rand = seededRandom(99);
    const pieces = [...TEXT_PIECES, ...WHITESPACE_PIECES];
    for (let i = 0; i < 200; i++) {
      let s = randomContent(rand) + pieces[i % pieces.length] + randomContent(rand);
      if (i % 3 === 0) s = `</s>${s}<s>${randomContent(rand)}`;
      for (const withBos of [false, true]) {
        const ids = encodeIds(tokenizer, s, withBos);
        const want = utf8((withBos ? "<s>" : "") + s);
        expect(Buffer.from(bytes(table, ids)).equals(want), JSON.stringify(s)).toBe(true);
        const blocks = blockwise(ids, (b, prev) => bytes(table, b, prev), 4);
        expect(Buffer.from(blocks).equals(want)).toBe(true);
      }
    }
  });

  it("reports an unknown previous id", () => {
    expect(detokenize(table, [1526], 999999)).toEqual({
      ok: false,
      error: "unknown-token-id",
      index: -1,
      id: 999999,
    });
  });
});

describe("dummy-prefix rules from a small hand-written tokenizer.json", () => {
  const tokenizer = (preTokenizer: unknown, normalizer: unknown = null) => ({
    normalizer,
    pre_tokenizer: preTokenizer,
    decoder: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    added_tokens: [{ id: 0, content: "<s>", special: true, normalized: false }],
    model: { type: "BPE", byte_fallback: true, vocab: { "<s>": 0, "▁a": 1, b: 2, "▁": 3, "<0xF0>": 4 } },
  });
  const meta = (scheme: string) => ({
    type: "Metaspace",
    replacement: "▁",
    prepend_scheme: scheme,
    split: true,
  });
  const build = (t: Record<string, unknown>) => {
    const r = buildTokenBytesTable(t);
    if (!r.ok) throw new Error(r.reason);
    return r.table;
  };

  it("first: only the first token of the sequence loses its space", () => {
    const table = build(tokenizer(meta("first")));
    expect(table.dummyPrefix).toBe("first");
    expect(text(table, [1, 2, 1])).toBe("ab a");
    expect(text(table, [0, 1])).toBe("<s> a");
  });

  it("always: also after an added token", () => {
    const table = build(tokenizer(meta("always")));
    expect(text(table, [0, 1, 0, 3, 1])).toBe("<s>a<s> a");
  });

  it("never / no prefix: every ▁ is a space", () => {
    expect(text(build(tokenizer(meta("never"))), [1, 2])).toBe(" ab");
    const replaceOnly = { type: "Replace", pattern: { String: " " }, content: "▁" };
    expect(text(build(tokenizer(null, replaceOnly)), [1])).toBe(" a");
  });

  it("byte fallback writes one raw byte", () => {
    expect(bytes(build(tokenizer(meta("never"))), [4])).toEqual(Uint8Array.of(0xf0));
  });

  it("refuses vocabularies whose bytes cannot be exact", () => {
    const wordPiece = { model: { type: "WordPiece", vocab: { a: 0 } } };
    expect(buildTokenBytesTable(wordPiece)).toMatchObject({ ok: false });
    const plain = { model: { type: "BPE", vocab: { a: 0 } } };
    expect(buildTokenBytesTable(plain)).toMatchObject({ ok: false });
    expect(buildTokenBytesTable({})).toMatchObject({ ok: false, reason: "tokenizer.json has no model" });
  });
});
