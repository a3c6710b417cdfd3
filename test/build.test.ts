// The shipped filter must load in Envoy: it may import only what Envoy provides, and must
// export what Envoy looks for (REFERENCE §5).
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
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

// asconfig.json is where the build is defined (the AssemblyScript convention): scripts/build.mjs
// only expands its targets into asc runs, and asc itself reads each target's options.
interface AscRun {
  target: string;
  entry: string;
  out: string;
  args: string[];
}
const buildScript = new URL("../scripts/build.mjs", import.meta.url).href;
const ROOT = new URL("..", import.meta.url).pathname;

/** asc's own view of an invocation's options (--showConfig compiles nothing; asc prints it on stderr). */
function ascOptions(args: string[]): Record<string, unknown> {
  const r = spawnSync(join(ROOT, "node_modules/.bin/asc"), [...args, "--showConfig"], { cwd: ROOT });
  if (r.status !== 0) throw new Error(`asc ${args.join(" ")}: ${r.stderr.toString()}`);
  return (JSON.parse(r.stderr.toString()) as { options: Record<string, unknown> }).options;
}

const COMPILE = [
  "optimizeLevel",
  "shrinkLevel",
  "noAssert",
  "runtime",
  "use",
  "lib",
  "exportStart",
  "exportRuntime",
];
const pick = (o: Record<string, unknown>, keys: string[]) => Object.fromEntries(keys.map((k) => [k, o[k]]));

describe("asconfig.json drives the build", () => {
  it("scripts/build.mjs runs asc with asconfig.json's targets: the filter, the core, every test module", async () => {
    const { plan } = (await import(buildScript)) as { plan: () => AscRun[] };
    const runs = plan();
    for (const run of runs)
      expect(run.args.slice(1, 5)).toEqual(["--config", "asconfig.json", "--target", run.target]);
    const modules = readdirSync(join(ROOT, "test/host/modules"))
      .filter((f) => f.endsWith(".ts"))
      .sort()
      .map((f) => [
        "test-modules",
        `test/host/modules/${f}`,
        `build/test-modules/${f.replace(/\.ts$/, ".wasm")}`,
      ]);
    expect(runs.map((r) => [r.target, r.entry, r.out])).toEqual([
      ["filter", "filter/assembly/index.ts", "build/kvroute.wasm"],
      ["core", "filter/core/index.ts", "build/kvroute-core.wasm"],
      ...modules,
    ]);
  });

  it("the filter target compiles with the WASI shim's options (abort to proc_exit) and the core without them", () => {
    const filter = ascOptions([
      "filter/assembly/index.ts",
      "--config",
      "asconfig.json",
      "--target",
      "filter",
    ]);
    // The shim's own asconfig.json, as the filter was built before asconfig.json existed: any
    // drift of the shim package shows up here.
    const shim = ascOptions([
      "filter/assembly/index.ts",
      "--config",
      "node_modules/@assemblyscript/wasi-shim/asconfig.json",
      "--use",
      "abort=abort_proc_exit",
      "--optimizeLevel",
      "3",
      "--shrinkLevel",
      "0",
      "--noAssert",
      "--runtime",
      "incremental",
    ]);
    expect(pick(filter, COMPILE)).toEqual(pick(shim, COMPILE));
    expect((filter.use as string[])[0]).toBe("abort=abort_proc_exit");
    expect(filter.outFile).toBe("build/kvroute.wasm");
    const core = ascOptions(["filter/core/index.ts", "--config", "asconfig.json", "--target", "core"]);
    expect(core).toMatchObject({ outFile: "build/kvroute-core.wasm", exportRuntime: true, optimizeLevel: 3 });
    expect(core.use).toBeUndefined();
    expect(core.lib).toBeUndefined();
  });
});
