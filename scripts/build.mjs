// Builds every Wasm module the project ships or tests with. One script instead of asconfig
// targets because the filter needs the WASI shim (Envoy has no env.abort; abort goes to
// proc_exit, REFERENCE §5) while the Node core must not have it (the loader supplies
// env.abort). Usage: node scripts/build.mjs [substring-of-entry ...]
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const asc = join(root, "node_modules/.bin/asc");
const proxyWasmArgs = [
  "--config",
  // Relative on purpose: asc mis-resolves the shim's "lib" when the config path is absolute.
  "node_modules/@assemblyscript/wasi-shim/asconfig.json",
  "--use",
  "abort=abort_proc_exit",
];
const common = ["--optimizeLevel", "3", "--shrinkLevel", "0", "--noAssert", "--runtime", "incremental"];

const modules = [
  // The Proxy-Wasm filter loaded by Envoy.
  { entry: "filter/assembly/index.ts", out: "build/kvroute.wasm", args: proxyWasmArgs },
  // The same routing core for Node via @assemblyscript/loader.
  { entry: "filter/core/index.ts", out: "build/kvroute-core.wasm", args: ["--exportRuntime"] },
];

// Purpose-built Proxy-Wasm modules that exercise the Node host (test/host/modules/*.ts).
const testModuleDir = join(root, "test/host/modules");
if (existsSync(testModuleDir)) {
  for (const file of readdirSync(testModuleDir).sort()) {
    if (!file.endsWith(".ts")) continue;
    modules.push({
      entry: `test/host/modules/${file}`,
      out: `build/test-modules/${basename(file, ".ts")}.wasm`,
      args: proxyWasmArgs,
    });
  }
}

const only = process.argv.slice(2);
let failed = false;
for (const m of modules) {
  if (only.length > 0 && !only.some((o) => m.entry.includes(o))) continue;
  mkdirSync(join(root, dirname(m.out)), { recursive: true });
  try {
    execFileSync(
      asc,
      [m.entry, "--outFile", m.out, "--textFile", m.out.replace(/\.wasm$/, ".wat"), ...common, ...m.args],
      {
        cwd: root,
        stdio: ["ignore", "inherit", "inherit"],
      },
    );
    process.stdout.write(`built ${m.out}\n`);
  } catch {
    failed = true;
    process.stderr.write(`build of ${m.entry} failed\n`);
  }
}
process.exit(failed ? 1 : 0);
