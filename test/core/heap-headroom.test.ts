// Past 2 GiB of linear memory the core's allocator can no longer double memory and grew it by
// each allocation's size, and V8 answers every such grow with a full collection of the
// JavaScript heap (filter/core/heap-headroom.ts). keepHeadroom puts free space ahead instead.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { CoreModule } from "../../control-plane/src/core/core-wasm.ts";

const WASM = readFileSync(new URL("../../build/kvroute-core.wasm", import.meta.url));
const PAGE = 65536;

interface Runtime {
  memory: WebAssembly.Memory;
  keepHeadroom(): void;
  __new(size: number, id: number): number;
  __pin(ptr: number): number;
}

/**
 * A fresh core (its own memory) whose linear memory is `mib` MiB larger: grown from JavaScript,
 * so the pages stay untouched (no resident memory) and the core's allocator never uses them —
 * what matters to keepHeadroom is memory's size.
 */
function coreWith(mib: number): Runtime {
  const ex = new CoreModule(WASM).ex as unknown as Runtime;
  ex.memory.grow((mib * 2 ** 20) / PAGE);
  return ex;
}

const pages = (ex: Runtime) => ex.memory.buffer.byteLength / PAGE;

describe("keepHeadroom", () => {
  it("does nothing below 2 GiB, where the allocator still doubles memory", () => {
    const ex = coreWith(1024);
    const before = pages(ex);
    ex.keepHeadroom();
    expect(pages(ex)).toBe(before);
  });

  it("past 2 GiB, reserves an eighth of memory (at most 256 MiB) that the next allocations take without growing", () => {
    const ex = coreWith(2304);
    const before = pages(ex);
    expect(before).toBeGreaterThan(32768);
    ex.keepHeadroom();
    const after = pages(ex);
    expect(after - before).toBeGreaterThanOrEqual(Math.min(before >> 3, 4096) - 1);
    // 64 blocks of 2 MiB: the allocations a grown index makes, with no grow among them.
    for (let i = 0; i < 64; i++) ex.__pin(ex.__new(2 * 2 ** 20, 0));
    expect(pages(ex)).toBe(after);
    // Called again without growth since: nothing more.
    ex.keepHeadroom();
    expect(pages(ex)).toBe(after);
  });

  it("never reserves the last pages below 4 GiB, so the reserve cannot fail (a trap)", () => {
    for (const mib of [3500, 3800, 3900, 4000, 4040, 4070, 4085, 4090]) {
      const ex = coreWith(mib);
      const before = pages(ex);
      ex.keepHeadroom();
      expect(pages(ex)).toBeLessThanOrEqual(65536 - 4);
      expect(pages(ex)).toBeGreaterThanOrEqual(before);
    }
  });
});
