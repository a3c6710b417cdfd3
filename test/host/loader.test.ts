// Loading and start-up like Envoy: export/import checks with Envoy's messages, the restricted
// _start, the start-up callback order, configuration buffers and rejection.

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { createHost } from "../../host/host.ts";
import { checkModule, readImports } from "../../host/loader.ts";
import { callbacks, filterFile, moduleFile } from "./testing.ts";

describe("module checks", () => {
  it("refuses an import Envoy lacks, naming it", () => {
    expect(() => createHost({ wasm: moduleFile("bad_import") })).toThrow(
      "Failed to load Wasm module due to a missing import: env.proxy_clear_route_cache",
    );
  });

  it("refuses an import with the wrong signature (the SDK's 10-parameter proxy_grpc_call)", () => {
    expect(() => createHost({ wasm: moduleFile("bad_signature") })).toThrow(
      /import type mismatch: env.proxy_grpc_call, want: \(i32(, i32){9}\) -> \(i32\), but host exports: \(i32(, i32){11}\) -> \(i32\)/,
    );
  });

  it("refuses a module without the ABI version marker", () => {
    expect(() => createHost({ wasm: moduleFile("no_abi") })).toThrow(
      "Missing or unknown Proxy-Wasm ABI version",
    );
  });

  it("refuses bytes that are not Wasm", () => {
    expect(() => checkModule(new Uint8Array([1, 2, 3]))).toThrow("Failed to load Wasm bytecode");
  });

  it("reads import signatures from the binary, including i64 parameters", () => {
    const imps = readImports(new Uint8Array(readFileSync(moduleFile("abi"))));
    const inc = imps.find((i) => i.name === "proxy_increment_metric");
    expect(inc?.sig).toEqual({ params: ["i32", "i64"], results: ["i32"] });
  });

  it("the real filter passes the checks", () => {
    const m = checkModule(new Uint8Array(readFileSync(filterFile())));
    expect(m.exports.has("malloc")).toBe(true);
  });
});

/** A hand-made module: one `() -> ()` function exported under `exports`, optional imports. */
function tinyModule(
  exports: string[],
  imports: Array<{ module: string; name: string; global?: boolean }> = [],
): Uint8Array {
  const str = (x: string) => [x.length, ...Buffer.from(x)];
  const section = (id: number, body: number[]) => [id, body.length, ...body];
  const importBody = [imports.length];
  for (const i of imports)
    importBody.push(...str(i.module), ...str(i.name), ...(i.global ? [0x03, 0x7f, 0x00] : [0x00, 0x00]));
  const exportBody = [exports.length + 1, ...str("memory"), 0x02, 0x00];
  const funcIndex = imports.filter((i) => !i.global).length;
  for (const e of exports) exportBody.push(...str(e), 0x00, funcIndex);
  return new Uint8Array([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, [0x01, 0x60, 0x00, 0x00]),
    ...(imports.length ? section(2, importBody) : []),
    ...section(3, [0x01, 0x00]),
    ...section(5, [0x01, 0x00, 0x01]),
    ...section(7, exportBody),
    ...section(10, [0x01, 0x02, 0x00, 0x0b]),
  ]);
}

describe("module checks on hand-made binaries", () => {
  it("refuses an imported global like V8::link", () => {
    const m = tinyModule(["proxy_abi_version_0_2_1", "malloc"], [{ module: "env", name: "g", global: true }]);
    expect(() => checkModule(m)).toThrow("Failed to load Wasm module due to a missing import: env.g");
  });

  it("refuses a module without malloc or proxy_on_memory_allocate", () => {
    expect(() => checkModule(tinyModule(["proxy_abi_version_0_2_1"]))).toThrow(
      "Wasm module is missing malloc function.",
    );
    expect(
      checkModule(tinyModule(["proxy_abi_version_0_2_1", "proxy_on_memory_allocate"])).exports.size,
    ).toBe(3);
  });

  it("accepts a void-typed import only where the host's function is void", () => {
    // proc_exit is (i32) -> (); a () -> () import of it is a type mismatch.
    const m = tinyModule(
      ["proxy_abi_version_0_2_1", "malloc"],
      [{ module: "wasi_snapshot_preview1", name: "proc_exit" }],
    );
    expect(() => checkModule(m)).toThrow(
      "import type mismatch: wasi_snapshot_preview1.proc_exit, want: () -> (), but host exports: (i32) -> ()",
    );
  });
});

describe("start-up", () => {
  it("traps a host call outside the allow-list during _start; logging is allowed", () => {
    const logs: string[] = [];
    expect(() =>
      createHost({ wasm: moduleFile("start_restricted"), logSink: (r) => logs.push(r.message) }),
    ).toThrow(/Failed to start base Wasm: Function: _start failed: restricted_callback/);
    expect(logs).toContain("start: logging is allowed here");
  });

  it("creates the root context, then on_vm_start, then on_configure, with the right buffers", () => {
    const host = createHost({
      wasm: moduleFile("lifecycle"),
      vmConfig: "vm-config",
      pluginConfig: "a=1",
      mainThread: false,
    });
    // Root context 1; VM config readable in on_vm_start, plugin config only in on_configure (1 NotFound there).
    expect(callbacks(host.logs())).toEqual([
      "create 1 0",
      "vm_start 9 vm=0:vm-config plugin=1",
      "configure 3 0 a=1",
    ]);
    host.close();
  });

  it("starts every worker VM and Envoy's main-thread VM, each with root context 1", () => {
    const host = createHost({ wasm: moduleFile("lifecycle"), threads: 3 });
    const creates = host.core.logs.filter((r) => r.message === "cb:create 1 0").map((r) => r.thread);
    expect(creates).toEqual(["main", "worker_0", "worker_1", "worker_2"]);
    host.close();
  });

  it("on_configure returning false rejects the configuration", () => {
    expect(() => createHost({ wasm: moduleFile("lifecycle"), pluginConfig: "reject=1" })).toThrow(
      "Failed to configure base Wasm plugin: proxy_on_configure returned false",
    );
  });

  it("on_vm_start returning false rejects the VM", () => {
    expect(() => createHost({ wasm: moduleFile("lifecycle"), vmConfig: "reject-vm" })).toThrow(
      "Failed to start base Wasm: proxy_on_vm_start returned false",
    );
  });
});
