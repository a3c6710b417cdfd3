// GuestMemory.readString remembers short strings by where they were read; what it answers must
// always be what the bytes there say now — rewritten bytes, another length, another place, a
// grown memory and out-of-bounds reads included.
import { describe, expect, it } from "vitest";
import { GuestMemory } from "../../host/abi/memory.ts";

function guest(pages = 1) {
  const memory = new WebAssembly.Memory({ initial: pages });
  const mem = new GuestMemory(memory, () => 0);
  const put = (ptr: number, text: string) =>
    new Uint8Array(memory.buffer).set(new TextEncoder().encode(text), ptr);
  return { memory, mem, put };
}

describe("GuestMemory.readString", () => {
  it("reads what the bytes say now, at the same place and length too", () => {
    const { mem, put } = guest();
    put(64, "kvr.gwb");
    expect(mem.readString(64, 7)).toBe("kvr.gwb");
    expect(mem.readString(64, 7)).toBe("kvr.gwb");
    put(64, "kvr.gwc");
    expect(mem.readString(64, 7)).toBe("kvr.gwc");
    expect(mem.readString(64, 3)).toBe("kvr");
    put(64 + 256, "x-data-parallel-rank");
    expect(mem.readString(64 + 256, 20)).toBe("x-data-parallel-rank");
    expect(mem.readString(64, 7)).toBe("kvr.gwc");
  });

  it("reads long strings and non-ASCII bytes as UTF-8, and refuses out-of-bounds ranges", () => {
    const { mem, put, memory } = guest();
    const long = "metadata\0filter_metadata\0".repeat(8);
    put(1024, long);
    expect(mem.readString(1024, long.length)).toBe(long);
    put(2048, "héllo");
    expect(mem.readString(2048, 6)).toBe("héllo");
    put(2048, "hallo!");
    expect(mem.readString(2048, 6)).toBe("hallo!");
    expect(mem.readString(memory.buffer.byteLength - 2, 4)).toBeNull();
  });

  it("reads the grown memory's bytes after a grow", () => {
    const { mem, put, memory } = guest();
    put(128, "before");
    expect(mem.readString(128, 6)).toBe("before");
    memory.grow(1);
    put(128, "after!");
    expect(mem.readString(128, 6)).toBe("after!");
    put(70000, "far");
    expect(mem.readString(70000, 3)).toBe("far");
  });

  it("reads one- and two-byte strings as UTF-8, digits rewritten in place included", () => {
    const { mem, put } = guest();
    for (const digit of ["0", "7", "3"]) {
      put(1744, digit);
      expect(mem.readString(1744, 1)).toBe(digit);
    }
    put(1744, "12");
    expect(mem.readString(1744, 2)).toBe("12");
    put(1744, "é");
    expect(mem.readString(1744, 2)).toBe("é");
    expect(mem.readString(1744, 0)).toBe("");
  });

  it("keeps serving every string of many 16-byte-aligned places, each as its bytes say", () => {
    const { mem, put } = guest();
    const at = (k: number) => 4096 + 16 * k;
    for (let k = 0; k < 40; k++) put(at(k), `name-${k}`.padEnd(12, "."));
    for (let round = 0; round < 3; round++)
      for (let k = 0; k < 40; k++) expect(mem.readString(at(k), 12)).toBe(`name-${k}`.padEnd(12, "."));
  });
});
