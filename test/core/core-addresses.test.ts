// Wasm hands an i32 to JavaScript signed, so an address past 2 GiB in the core's linear memory —
// which a core indexing hundreds of ranks reaches — must be read unsigned wherever an export
// returns one (control-plane/src/core/core-wasm.ts unsignedAddresses).
import { describe, expect, it } from "vitest";
import { core, unsignedAddresses } from "../../control-plane/src/core/core-wasm.ts";

describe("the core's address exports", () => {
  it("read an address past 2 GiB as unsigned, and leave other exports alone", () => {
    const ex = unsignedAddresses({
      ingestOutPtr: () => -2_147_483_632, // 0x80000010 as Wasm returns it
      journalImagePtr: (id: number, bucket: number) => (0xc0000000 + id * 16 + bucket) | 0,
      ioReserve: (n: number) => (0x90000000 + n) | 0,
      chunkTableSize: () => -1,
      memory: "kept",
    }) as Record<string, (...a: number[]) => number>;
    expect(ex.ingestOutPtr?.()).toBe(0x80000010);
    expect(ex.journalImagePtr?.(2, 3)).toBe(0xc0000023);
    expect(ex.ioReserve?.(64)).toBe(0x90000040);
    expect(ex.chunkTableSize?.()).toBe(-1);
    expect(ex.memory as unknown).toBe("kept");
  });

  it("are wrapped on the real core", () => {
    const c = core();
    expect(c.ex.ingestOutPtr()).toBeGreaterThan(0);
    expect(c.io(16)).toBe(c.io(16));
  });
});
