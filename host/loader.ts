// Module checks in the order Envoy performs them (proxy-wasm-cpp-host src/wasm.cc WasmBase::load
// → src/v8/v8.cc V8::link → WasmBase::getFunctions): the ABI version export, then every import
// against the host's table (missing → "missing import", different signature → "import type
// mismatch", imported globals are refused), then malloc (or proxy_on_memory_allocate). Node's
// WebAssembly.Module.imports() carries no types, so the type and import sections are read here.
// The module is compiled with Envoy's 1 GiB cap on its memory (memory-cap.ts).
import { HOST_SIGNATURES, type Signature, type ValType } from "./abi/signatures.ts";
import { capMemory } from "./memory-cap.ts";

export class WasmLoadError extends Error {}

interface ImportEntry {
  module: string;
  name: string;
  kind: "function" | "table" | "memory" | "global";
  sig?: Signature;
}

const VALTYPES: Record<number, ValType | "f32" | "f64" | "v128" | "ref"> = {
  127: "i32",
  126: "i64",
  125: "f32",
  124: "f64",
  123: "v128",
  112: "ref",
  111: "ref",
};

class Reader {
  pos = 0;
  constructor(readonly b: Uint8Array) {}
  byte(): number {
    const v = this.b[this.pos++];
    if (v === undefined) throw new WasmLoadError("Failed to parse corrupted Wasm module");
    return v;
  }
  u32(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      const byte = this.byte();
      result |= (byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result >>> 0;
      shift += 7;
    }
  }
  name(): string {
    const n = this.u32();
    const s = new TextDecoder().decode(this.b.subarray(this.pos, this.pos + n));
    this.pos += n;
    return s;
  }
  limits(): void {
    const flags = this.byte();
    this.u32();
    if (flags & 1) this.u32();
  }
}

function valtype(code: number): ValType {
  const t = VALTYPES[code];
  // Envoy's host functions only take i32/i64; anything else can never match.
  return (t === "i32" || t === "i64" ? t : (`x${code}` as ValType)) as ValType;
}

export function readImports(bytes: Uint8Array): ImportEntry[] {
  const r = new Reader(bytes);
  r.pos = 8;
  const types: Signature[] = [];
  const imports: ImportEntry[] = [];
  while (r.pos < bytes.length) {
    const id = r.byte();
    const size = r.u32();
    const end = r.pos + size;
    if (id === 1) {
      const n = r.u32();
      for (let k = 0; k < n; k++) {
        r.byte(); // 0x60 func
        const params = Array.from({ length: r.u32() }, () => valtype(r.byte()));
        const results = Array.from({ length: r.u32() }, () => valtype(r.byte()));
        types.push({ params, results });
      }
    } else if (id === 2) {
      const n = r.u32();
      for (let k = 0; k < n; k++) {
        const module = r.name();
        const name = r.name();
        const kind = r.byte();
        if (kind === 0) imports.push({ module, name, kind: "function", sig: types[r.u32()] });
        else if (kind === 1) {
          r.byte();
          r.limits();
          imports.push({ module, name, kind: "table" });
        } else if (kind === 2) {
          r.limits();
          imports.push({ module, name, kind: "memory" });
        } else {
          r.byte();
          r.byte();
          imports.push({ module, name, kind: "global" });
        }
      }
    }
    r.pos = end;
  }
  return imports;
}

const fmt = (s: Signature) => `(${s.params.join(", ")}) -> (${s.results.join(", ")})`;
const same = (a: Signature, b: Signature) =>
  a.params.length === b.params.length &&
  a.results.length === b.results.length &&
  a.params.every((t, k) => t === b.params[k]) &&
  a.results.every((t, k) => t === b.results[k]);

export interface CheckedModule {
  module: WebAssembly.Module;
  imports: ImportEntry[];
  exports: Set<string>;
}

/** Throws WasmLoadError with Envoy's message for the first problem found. */
export function checkModule(code: Uint8Array): CheckedModule {
  let module: WebAssembly.Module;
  try {
    module = new WebAssembly.Module(capMemory(code) as Uint8Array<ArrayBuffer>);
  } catch {
    throw new WasmLoadError("Failed to load Wasm bytecode");
  }
  const exports = new Set(WebAssembly.Module.exports(module).map((e) => e.name));
  // BytecodeUtil::getAbiVersion: only the 0.2.x / 0.1.0 marker exports count; this host is 0.2.1.
  if (!exports.has("proxy_abi_version_0_2_1")) {
    throw new WasmLoadError(
      exports.has("proxy_abi_version_0_2_0") || exports.has("proxy_abi_version_0_1_0")
        ? "This host emulates only Proxy-Wasm ABI 0.2.1"
        : "Missing or unknown Proxy-Wasm ABI version",
    );
  }
  const imports = readImports(code);
  for (const imp of imports) {
    const full = `${imp.module}.${imp.name}`;
    if (imp.kind === "global")
      throw new WasmLoadError(`Failed to load Wasm module due to a missing import: ${full}`);
    if (imp.kind !== "function") continue;
    const host = HOST_SIGNATURES.get(full);
    if (host === undefined)
      throw new WasmLoadError(`Failed to load Wasm module due to a missing import: ${full}`);
    if (imp.sig === undefined || !same(imp.sig, host)) {
      throw new WasmLoadError(
        `Failed to load Wasm module due to an import type mismatch: ${full}, want: ${imp.sig ? fmt(imp.sig) : "?"}, but host exports: ${fmt(host)}`,
      );
    }
  }
  if (!exports.has("malloc") && !exports.has("proxy_on_memory_allocate")) {
    throw new WasmLoadError("Wasm module is missing malloc function.");
  }
  if (!exports.has("memory")) throw new WasmLoadError("Wasm module is missing its memory export.");
  return { module, imports, exports };
}
