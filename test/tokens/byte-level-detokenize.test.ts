// Byte-level BPE (Qwen3, Llama-3.1): the bytes of the ids of a rendered chat are the rendered
// text, byte for byte, special tokens included, and 16-token blocks concatenate to the whole.
import { describe, expect, it } from "vitest";
import { byteToCodePoint, codePointToByte } from "../../control-plane/src/tokens/byte-level-alphabet.ts";
import { detokenize, detokenizeInto, SEQUENCE_START } from "../../control-plane/src/tokens/detokenize.ts";
import {
  randomContent,
  randomConversation,
  seededRandom,
} from "../../control-plane/src/tokens/random-conversations.ts";
import { ChatTemplateRenderer } from "../../control-plane/src/tokens/render-chat-template.ts";
import {
  buildTokenBytesTable,
  type TokenBytesTable,
} from "../../control-plane/src/tokens/token-bytes-table.ts";
import { blockwise, encodeIds, loadModel, type ModelName, referenceTokenizer, utf8 } from "./models.ts";

function bytesOf(table: TokenBytesTable, ids: ArrayLike<number>, previous = SEQUENCE_START): Uint8Array {
  const r = detokenize(table, ids, previous);
  if (!r.ok) throw new Error(`detokenize failed: ${JSON.stringify(r)}`);
  return r.bytes;
}

describe("GPT-2 byte alphabet", () => {
  it("is a bijection between the 256 bytes and 256 code points", () => {
    expect(new Set(byteToCodePoint).size).toBe(256);
    for (let b = 0; b < 256; b++) expect(codePointToByte[byteToCodePoint[b] as number]).toBe(b);
    expect(byteToCodePoint[0x20]).toBe(0x120); // "Ġ", the space every GPT-2 vocabulary shows
    expect(byteToCodePoint[0x0a]).toBe(0x10a); // "Ċ"
    expect(byteToCodePoint[0x41]).toBe(0x41);
  });
});

// Qwen3 normalizes text to NFC before tokenizing, so its ids spell the NFC form.
const expectedText: Record<string, (s: string) => string> = {
  qwen3: (s) => s.normalize("NFC"),
  llama3_1: (s) => s,
};

for (const name of ["qwen3", "llama3_1"] as ModelName[]) {
  describe(`${name} (byte-level)`, () => {
    const files = loadModel(name);
    const built = buildTokenBytesTable(files.tokenizer);
    if (!built.ok) throw new Error(built.reason);
    const table = built.table;
    const tokenizer = referenceTokenizer(files);
    const jinja = new ChatTemplateRenderer(files.config);
    const normal = expectedText[name] as (s: string) => string;

    it("reads the vocabulary as byte-level with every added token literal", () => {
      expect(table.scheme).toBe("byte-level");
      expect(table.dummyPrefix).toBe("none");
      expect(table.whitespaceAbsorbingTokens).toEqual([]);
      expect(table.unusableVocabularyEntries).toBe(0);
      const added = files.tokenizer.added_tokens as Array<{ id: number; content: string }>;
      for (const a of added) expect(Buffer.from(bytesOf(table, [a.id])).toString("utf8")).toBe(a.content);
    });

    it("reproduces rendered chats byte for byte, whole and in 16-token blocks", () => {
      const rand = seededRandom(20261130);
      for (let i = 0; i < 60; i++) {
        const text = jinja.render(randomConversation(rand));
        const ids = encodeIds(tokenizer, text);
        const want = utf8(normal(text));
        expect(Buffer.from(bytesOf(table, ids)).equals(want), text).toBe(true);
        const blocks = blockwise(ids, (block, previous) => bytesOf(table, block, previous));
        expect(Buffer.from(blocks).equals(want)).toBe(true);
      }
    });

    it("reproduces special tokens, emoji, whitespace runs and control bytes", () => {
      const text =
        "<|im_start|>user\n  \t\t x  \n\n\n🏳️‍🌈👩‍👩‍👧‍👦 \u0000\u0001\u007f\r\n<|eot_id|>" +
        "<|begin_of_text|><|im_end|>日本語\u3000\u00a0 end   ";
      const ids = encodeIds(tokenizer, text);
      expect(Buffer.from(bytesOf(table, ids)).equals(utf8(normal(text)))).toBe(true);
    });

    it("yields block bytes that need not be valid UTF-8 but concatenate exactly", () => {
      const text = "🌍🌍🌍 漢字漢字漢字 👩‍👩‍👧‍👦".repeat(8);
      const ids = encodeIds(tokenizer, text);
      const single = ids.map((id) => bytesOf(table, [id]));
      // Some single tokens are partial UTF-8 sequences: the table must keep raw bytes.
      expect(single.some((b) => Buffer.from(b).toString("utf8").includes("\ufffd"))).toBe(true);
      expect(Buffer.concat(single).equals(utf8(normal(text)))).toBe(true);
    });

    it("writes into a caller buffer at an offset", () => {
      const ids = encodeIds(tokenizer, "Hello there, general");
      const out = new Uint8Array(100).fill(0xee);
      const n = detokenizeInto(table, ids, out, 7);
      expect(n).toBe(20);
      expect(Buffer.from(out.subarray(7, 27)).toString()).toBe("Hello there, general");
      expect(out[6]).toBe(0xee);
      expect(out[27]).toBe(0xee);
    });

    it("returns error values for unknown ids and short buffers, never throws", () => {
      const ok = encodeIds(tokenizer, "abc");
      for (const bad of [-1, table.size, table.size + 1000, 1.5, Number.NaN, 2 ** 32]) {
        const r = detokenize(table, [...ok, bad]);
        expect(r).toEqual({ ok: false, error: "unknown-token-id", index: ok.length, id: bad });
      }
      const r = detokenizeInto(table, ok, new Uint8Array(2));
      expect(r).toEqual({ ok: false, error: "buffer-too-small", needed: 3 });
      expect(detokenize(table, [])).toEqual({ ok: true, bytes: new Uint8Array(0) });
    });

    it("random content round-trips", () => {
      const rand = seededRandom(7);
      for (let i = 0; i < 200; i++) {
        const text = randomContent(rand, { think: true }) + randomContent(rand);
        const ids = encodeIds(tokenizer, text);
        expect(Buffer.from(bytesOf(table, ids)).equals(utf8(normal(text))), JSON.stringify(text)).toBe(true);
      }
    });
  });
}

describe("qwen3 NFC normalization", () => {
  it("spells decomposed input in NFC: a prompt with combining marks is not its own stream", () => {
    const files = loadModel("qwen3");
    const built = buildTokenBytesTable(files.tokenizer);
    if (!built.ok) throw new Error(built.reason);
    const tokenizer = referenceTokenizer(files);
    const text = "cafe\u0301";
    const bytes = bytesOf(built.table, encodeIds(tokenizer, text));
    expect(Buffer.from(bytes).toString()).toBe("caf\u00e9");
    expect(Buffer.from(bytes).equals(utf8(text))).toBe(false);
  });
});

describe("malformed byte-level vocabularies", () => {
  const vocab = (extra: Record<string, number>) => ({
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false },
    added_tokens: [{ id: 1, content: "▁added", special: true }],
    model: {
      type: "BPE",
      vocab: {
        a: 0,
        "▁added": 1,
        ...Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`t${i}`, 10 + i])),
        ...extra,
      },
    },
  });
  it("counts a stray entry and reads its id as unknown; an added token with that id is fine", () => {
    const built = buildTokenBytesTable(vocab({ "€": 2 }));
    if (!built.ok) throw new Error(built.reason);
    expect(built.table.unusableVocabularyEntries).toBe(1);
    expect(detokenize(built.table, [2])).toMatchObject({ ok: false, error: "unknown-token-id" });
    expect(Buffer.from(bytesOf(built.table, [1, 0])).toString()).toBe("▁addeda");
  });
  it("refuses a vocabulary that is mostly not byte-level", () => {
    const many = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`€${i}`, 300 + i]));
    expect(buildTokenBytesTable(vocab(many))).toMatchObject({ ok: false });
  });
});
