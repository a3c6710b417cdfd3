// The host functions a VM links against: Envoy's proxy_* ABI under "env" and the WASI subset under
// both WASI module names. host.ts registers this with the thread (thread.ts registerHostImports).
import type { WasmThread } from "../thread.ts";
import { proxyImports } from "./proxy.ts";
import { wasiImports } from "./wasi.ts";

export function hostImports(t: WasmThread): WebAssembly.Imports {
  return {
    env: proxyImports(t),
    wasi_snapshot_preview1: wasiImports(t),
    wasi_unstable: wasiImports(t),
  };
}
