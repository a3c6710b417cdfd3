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
});
