// The golden vectors of test/fixtures/core/, as one suite that runs against whichever core build
// the importing test file loads (the Node build, or the core compiled with the filter's flags).
import { describe, expect, it } from "vitest";
import type * as Core from "../../control-plane/src/core/kvroute-core.ts";
import type { SegmentTemplate } from "../../control-plane/src/core/segment-template.ts";
import { hex, readJson, segmentTemplate, text, utf8 } from "./helpers.ts";

type CoreApi = typeof Core;

interface XxhVectors {
  published: Array<{ utf8: string; seed: string; hash: string }>;
  swept: Array<{ hex: string; seed: string; hash: string }>;
}
interface ChunkCase {
  model: string;
  lora: string;
  cacheSalt: string;
  chunkSize: number;
  stream: string;
  hashes: string[];
}
interface RenderCase {
  model: "qwen3" | "llama3_1";
  messages: Array<{ role: string; content: string }>;
  stream: string;
}

export function vectorSuite(name: string, load: () => Promise<CoreApi>): void {
  describe(`golden vectors (${name})`, () => {
    it("XXH64: published values and the length/seed sweep", async () => {
      const core = await load();
      const v = readJson<XxhVectors>("test/fixtures/core/xxh64.json");
      for (const p of v.published) expect(hex(core.xxh64(utf8.encode(p.utf8), BigInt(p.seed)))).toBe(p.hash);
      for (const s of v.swept) {
        expect(hex(core.xxh64(Buffer.from(s.hex, "hex"), BigInt(s.seed))), `len ${s.hex.length / 2}`).toBe(
          s.hash,
        );
      }
      expect(v.swept.length).toBeGreaterThan(100);
    });

    it("chained chunk hashes: h0 and every complete chunk", async () => {
      const core = await load();
      const { cases } = readJson<{ cases: ChunkCase[] }>("test/fixtures/core/chunks.json");
      for (const c of cases) {
        const stream = utf8.encode(c.stream);
        expect(hex(core.rootHash(c.model, c.lora, c.cacheSalt))).toBe(c.hashes[0]);
        const got = core.chunkHashes({ ...c, stream });
        expect([...got].map(hex)).toEqual(c.hashes.slice(1));
        expect(got.length).toBe(Math.floor(stream.length / c.chunkSize));
      }
    });

    it("renders of real conversations equal the real chat templates", async () => {
      const core = await load();
      const cases = readJson<RenderCase[]>("test/fixtures/core/renders.json");
      const templates: Record<string, SegmentTemplate> = {
        qwen3: segmentTemplate("qwen3"),
        llama3_1: segmentTemplate("llama3_1"),
      };
      for (const c of cases) {
        const r = core.renderChat(templates[c.model] as SegmentTemplate, c.messages);
        expect(r.status).toBe("exact");
        expect(text(r.stream)).toBe(c.stream);
      }
    });

    it("strict rank-header table", async () => {
      const core = await load();
      const table = readJson<Array<[string | null, number | "absent" | "invalid"]>>(
        "test/fixtures/core/rank-headers.json",
      );
      for (const [value, want] of table) {
        const got = core.parseRankHeader(value ?? undefined);
        const expected = typeof want === "number" ? { kind: "rank", rank: want } : { kind: want };
        expect(got, JSON.stringify(value)).toEqual(expected);
      }
    });
  });
}
