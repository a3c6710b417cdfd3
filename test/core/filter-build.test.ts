// The same golden vectors through the core compiled exactly as the Envoy filter compiles it
// (scripts/build.mjs: WASI shim, abort → proc_exit, -O3, incremental runtime), so flags that
// only the filter uses cannot change a hash or a render unnoticed.
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { vectorSuite } from "./vector-suite.ts";

const root = new URL("../../", import.meta.url).pathname;
// Keep in step with scripts/build.mjs (common + proxyWasmArgs).
const FILTER_FLAGS = [
  "--optimizeLevel",
  "3",
  "--shrinkLevel",
  "0",
  "--noAssert",
  "--runtime",
  "incremental",
  "--config",
  "node_modules/@assemblyscript/wasi-shim/asconfig.json",
  "--use",
  "abort=abort_proc_exit",
];

beforeAll(() => {
  const out = join(mkdtempSync(join(tmpdir(), "kvroute-core-")), "core-filter-flags.wasm");
  execFileSync(
    join(root, "node_modules/.bin/asc"),
    ["filter/core/index.ts", "--outFile", out, ...FILTER_FLAGS],
    {
      cwd: root,
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  // kvroute-core.ts loads its module on first use; this test file runs in its own worker.
  process.env.KVROUTE_CORE_WASM = out;
}, 120_000);

vectorSuite(
  "core compiled with the filter's flags",
  () => import("../../control-plane/src/core/kvroute-core.ts"),
);

describe("the filter-flags build", () => {
  it("is the module these vectors ran against (it has the WASI shim's _start)", async () => {
    const { core } = await import("../../control-plane/src/core/core-wasm.ts");
    expect(typeof (core().ex as unknown as Record<string, unknown>)._start).toBe("function");
  });
});
