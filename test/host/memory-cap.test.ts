// Envoy's 1 GiB cap on a VM's memory (proxy-wasm-cpp-host PROXY_WASM_HOST_MAX_WASM_MEMORY_SIZE_BYTES,
// V8's wasm_max_mem_pages = 16384): the host compiles every module with its memory's maximum at
// 16384 pages, so memory.grow past 1 GiB returns -1 inside the VM, as in Envoy. Hand-made modules:
// one exported function `grow(pages) -> memory.grow(pages)`.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { checkModule } from "../../host/loader.ts";
import { capMemory, MAX_MEMORY_PAGES } from "../../host/memory-cap.ts";
import { filterFile } from "./testing.ts";

const leb = (v: number): number[] => {
  const out: number[] = [];
  do {
    const b = v & 0x7f;
    v >>>= 7;
    out.push(v === 0 ? b : b | 0x80);
  } while (v !== 0);
  return out;
};
const str = (x: string) => [x.length, ...Buffer.from(x)];
const section = (id: number, body: number[]) => [id, ...leb(body.length), ...body];

/**
 * `(memory min max?)` defined, or imported as env.memory; `grow` (also exported as malloc and the
 * ABI marker, so checkModule takes it) does memory.grow and returns the old size or -1.
 */
function growModule(memory: { min: number; max?: number; imported?: boolean }): Uint8Array {
  const limits =
    memory.max === undefined ? [0x00, ...leb(memory.min)] : [0x01, ...leb(memory.min), ...leb(memory.max)];
  const names = ["grow", "malloc", "proxy_abi_version_0_2_1"];
  const exportBody = [names.length + 1, ...str("memory"), 0x02, 0x00];
  for (const n of names) exportBody.push(...str(n), 0x00, 0x00);
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...section(1, [0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f]), // (i32) -> i32
    ...(memory.imported ? section(2, [0x01, ...str("env"), ...str("memory"), 0x02, ...limits]) : []),
    ...section(3, [0x01, 0x00]),
    ...(memory.imported ? [] : section(5, [0x01, ...limits])),
    ...section(7, exportBody),
    // local.get 0; memory.grow 0; end
    ...section(10, [0x01, 0x06, 0x00, 0x20, 0x00, 0x40, 0x00, 0x0b]),
  ]);
}

function instantiate(bytes: Uint8Array, imports: WebAssembly.Imports = {}): (pages: number) => number {
  const instance = new WebAssembly.Instance(
    new WebAssembly.Module(bytes as Uint8Array<ArrayBuffer>),
    imports,
  );
  return instance.exports.grow as (pages: number) => number;
}

/** The limits of the module's first memory section entry: [flags, min, max?]. */
function memoryLimits(bytes: Uint8Array): number[] {
  let pos = 8;
  const read = (): number => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const b = bytes[pos++] ?? 0;
      v |= (b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v >>> 0;
      shift += 7;
    }
  };
  while (pos < bytes.length) {
    const id = bytes[pos++];
    const size = read();
    if (id !== 5) {
      pos += size;
      continue;
    }
    expect(read()).toBe(1);
    const flags = bytes[pos++] ?? -1;
    return flags & 1 ? [flags, read(), read()] : [flags, read()];
  }
  throw new Error("no memory section");
}

describe("Envoy's 1 GiB memory cap in the Node host", () => {
  it("a memory without a maximum gets 16384 pages (1 GiB): growing past it returns -1, up to it succeeds", () => {
    const raw = growModule({ min: 1 });
    const capped = capMemory(raw);
    expect(memoryLimits(raw)).toEqual([0x00, 1]);
    expect(memoryLimits(capped)).toEqual([0x01, 1, MAX_MEMORY_PAGES]);
    expect(MAX_MEMORY_PAGES * 65536).toBe(1024 * 1024 * 1024);
    const grow = instantiate(capped);
    expect(grow(MAX_MEMORY_PAGES)).toBe(-1); // 1 + 16384 pages: past the cap
    expect(grow(MAX_MEMORY_PAGES - 2)).toBe(1); // to 16383 pages
    expect(grow(1)).toBe(MAX_MEMORY_PAGES - 1); // to exactly 1 GiB
    expect(grow(1)).toBe(-1);
    expect(grow(0)).toBe(MAX_MEMORY_PAGES);
  });

  it("without the patch Node's V8 lets the same module grow past 1 GiB (the difference from Envoy)", () => {
    const grow = instantiate(growModule({ min: 1 }));
    expect(grow(MAX_MEMORY_PAGES)).toBe(1);
  });

  it("lowers a larger declared maximum; keeps a smaller one byte for byte", () => {
    const large = capMemory(growModule({ min: 2, max: 65536 }));
    expect(memoryLimits(large)).toEqual([0x01, 2, MAX_MEMORY_PAGES]);
    expect(instantiate(large)(MAX_MEMORY_PAGES - 1)).toBe(-1);
    const small = growModule({ min: 1, max: 100 });
    expect(capMemory(small)).toBe(small);
    expect(instantiate(capMemory(small))(100)).toBe(-1);
    const exact = growModule({ min: 1, max: MAX_MEMORY_PAGES });
    expect(capMemory(exact)).toBe(exact);
  });

  it("leaves an imported memory alone (Envoy's V8::link creates it itself, in the capped engine)", () => {
    const imported = growModule({ min: 1, imported: true });
    expect(capMemory(imported)).toBe(imported);
  });

  it("a multi-byte section size and LEB128 limits are re-encoded; the module stays valid", () => {
    // A maximum past 16384 needs three LEB bytes; the rewritten section is as long or shorter.
    const raw = growModule({ min: 300, max: 1 << 16 });
    const capped = capMemory(raw);
    expect(memoryLimits(capped)).toEqual([0x01, 300, MAX_MEMORY_PAGES]);
    expect(WebAssembly.validate(capped as Uint8Array<ArrayBuffer>)).toBe(true);
    expect(instantiate(capped)(MAX_MEMORY_PAGES - 300)).toBe(300);
  });

  it("an initial size past the cap is refused, as Envoy cannot instantiate it", () => {
    expect(() => checkModule(growModule({ min: MAX_MEMORY_PAGES + 1 }))).toThrow(
      "Failed to load Wasm bytecode",
    );
  });

  it("the shipped filter declares no maximum (AssemblyScript's default); the host gives it Envoy's", () => {
    const shipped = new Uint8Array(readFileSync(filterFile()));
    const [flags, min] = memoryLimits(shipped);
    expect(flags).toBe(0x00);
    expect(memoryLimits(capMemory(shipped))).toEqual([0x01, min, MAX_MEMORY_PAGES]);
  });

  it("the host's loader compiles with the cap", () => {
    const { module } = checkModule(growModule({ min: 1 }));
    const grow = new WebAssembly.Instance(module).exports.grow as (pages: number) => number;
    expect(grow(MAX_MEMORY_PAGES)).toBe(-1);
    expect(grow(MAX_MEMORY_PAGES - 1)).toBe(1);
  });
});
