// Envoy's cap on a VM's linear memory, modelled per module. proxy-wasm-cpp-host
// include/proxy-wasm/limits.h: PROXY_WASM_HOST_MAX_WASM_MEMORY_SIZE_BYTES = 1 GiB; src/v8/v8.cc
// engine() sets V8's wasm_max_mem_pages to it / 64 KiB = 16384 pages for every VM. V8 then lets no
// memory grow past 1 GiB: memory.grow returns -1, and AssemblyScript's allocator aborts on that (a
// trap, the VM is failed). Node's V8 allows 65536 pages (4 GiB), so a filter that traps in Envoy
// would run on here. Node has no per-engine flag we may set, so the module's own memory section
// says it instead: every defined memory gets a maximum of 16384 pages (a larger declared maximum
// is lowered; a smaller one stays). An imported memory is left alone: in Envoy, V8::link creates
// it with the import's limits in the same capped engine; the Node host supplies no memory import.
// A module whose initial size is past the cap fails to compile here, as it fails to instantiate
// in Envoy.
export const MAX_MEMORY_PAGES = 16384;

function leb(v: number): number[] {
  const out: number[] = [];
  do {
    let b = v & 0x7f;
    v >>>= 7;
    if (v !== 0) b |= 0x80;
    out.push(b);
  } while (v !== 0);
  return out;
}

/** Reads an unsigned LEB128 at `pos`: [value, next position]; [-1, pos] past the end. */
function readLeb(b: Uint8Array, pos: number): [number, number] {
  let v = 0;
  let scale = 1;
  for (;;) {
    const byte = b[pos++];
    if (byte === undefined) return [-1, pos];
    v += (byte & 0x7f) * scale;
    if ((byte & 0x80) === 0) return [v, pos];
    scale *= 128;
  }
}

/**
 * The module with every defined memory's maximum at most MAX_MEMORY_PAGES; the bytes themselves
 * when there is nothing to change or they do not parse (compiling them reports that).
 */
export function capMemory(code: Uint8Array): Uint8Array {
  let pos = 8;
  while (pos < code.length) {
    const start = pos;
    const id = code[pos++];
    const [size, bodyStart] = readLeb(code, pos);
    if (size < 0 || bodyStart + size > code.length) return code;
    pos = bodyStart + size;
    if (id !== 5) continue;
    const [count, first] = readLeb(code, bodyStart);
    if (count < 0) return code;
    const body = leb(count);
    let p = first;
    let changed = false;
    for (let k = 0; k < count; k++) {
      const flags = code[p];
      if (flags === undefined) return code;
      const [min, afterMin] = readLeb(code, p + 1);
      const [max, afterMax] = (flags & 1) === 1 ? readLeb(code, afterMin) : [-1, afterMin];
      if (min < 0 || ((flags & 1) === 1 && max < 0)) return code;
      // 0x02 shared is kept; memory64 (0x04) and anything newer is copied as it is.
      if ((flags & ~0x03) !== 0 || (max >= 0 && max <= MAX_MEMORY_PAGES)) {
        body.push(...code.subarray(p, afterMax));
      } else {
        body.push(flags | 1, ...leb(min), ...leb(MAX_MEMORY_PAGES));
        changed = true;
      }
      p = afterMax;
    }
    if (!changed || p !== pos) return code;
    const section = [5, ...leb(body.length), ...body];
    const out = new Uint8Array(code.length - (pos - start) + section.length);
    out.set(code.subarray(0, start), 0);
    out.set(section, start);
    out.set(code.subarray(pos), start + section.length);
    return out;
  }
  return code;
}
