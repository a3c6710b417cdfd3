// The shipped filter must load in Envoy: it may import only what Envoy provides, and must
// export what Envoy looks for (REFERENCE §5).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const filter = new WebAssembly.Module(readFileSync(new URL("../build/kvroute.wasm", import.meta.url)));

describe("build/kvroute.wasm", () => {
  it("imports only proxy_* host calls and the WASI calls Envoy provides", () => {
    const allowedWasi = new Set([
      "fd_write",
      "proc_exit",
      "clock_time_get",
      "random_get",
      "environ_get",
      "environ_sizes_get",
      "args_get",
      "args_sizes_get",
    ]);
    for (const imp of WebAssembly.Module.imports(filter)) {
      if (imp.module === "env") expect(imp.name).toMatch(/^proxy_/);
      else {
        expect(imp.module).toBe("wasi_snapshot_preview1");
        expect(allowedWasi.has(imp.name), imp.name).toBe(true);
      }
    }
  });

  it("exports the Proxy-Wasm 0.2.1 entry points", () => {
    const names = WebAssembly.Module.exports(filter).map((e) => e.name);
    for (const required of [
      "proxy_abi_version_0_2_1",
      "_start",
      "malloc",
      "memory",
      "proxy_on_context_create",
    ]) {
      expect(names).toContain(required);
    }
  });
});
