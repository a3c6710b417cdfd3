// Builds every Wasm module the project ships or tests with, from the targets of asconfig.json
// (the AssemblyScript convention): `filter` (the Proxy-Wasm filter Envoy loads), `core` (the same
// routing core for Node via @assemblyscript/loader) and `test-modules` (purpose-built Proxy-Wasm
// modules that exercise the Node host, test/host/modules/*.ts).
//
// The filter and the test modules carry the options of @assemblyscript/wasi-shim inline (its lib
// and its `use` aliases, with abort going to proc_exit: Envoy has no env.abort, REFERENCE §5);
// the core must not have them (the loader supplies env.abort). asc reads a target's options but
// not its entries, so this script passes each entry (and, for test modules, the output file) on
// the command line: `asc <entry> --config asconfig.json --target <name>`.
//
// Usage: node scripts/build.mjs [target-name | substring-of-entry ...]
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
export const ASCONFIG = "asconfig.json";

/** `dir/*.ts` → the .ts files of dir (the only pattern asconfig.json uses), else the entry itself. */
function expand(entry) {
  const m = /^(.*)\/\*\.ts$/.exec(entry);
  if (m === null) return [entry];
  const dir = join(root, m[1]);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".ts"))
    .sort()
    .map((f) => `${m[1]}/${f}`);
}

/** The asc runs the build makes: [{target, entry, out, args}], in asconfig.json's target order. */
export function plan(config = JSON.parse(readFileSync(join(root, ASCONFIG), "utf8"))) {
  const runs = [];
  for (const [target, t] of Object.entries(config.targets)) {
    for (const entry of (t.entries ?? []).flatMap(expand)) {
      const args = [entry, "--config", ASCONFIG, "--target", target];
      let out = t.outFile;
      if (t.outDir !== undefined) {
        out = `${t.outDir}/${basename(entry, ".ts")}.wasm`;
        args.push("--outFile", out, "--textFile", out.replace(/\.wasm$/, ".wat"));
      }
      if (out === undefined) throw new Error(`${ASCONFIG}: target ${target} has neither outFile nor outDir`);
      runs.push({ target, entry, out, args });
    }
  }
  return runs;
}

function main() {
  const asc = join(root, "node_modules/.bin/asc");
  const only = process.argv.slice(2);
  let failed = false;
  for (const run of plan()) {
    if (only.length > 0 && !only.some((o) => o === run.target || run.entry.includes(o))) continue;
    mkdirSync(join(root, dirname(run.out)), { recursive: true });
    try {
      execFileSync(asc, run.args, { cwd: root, stdio: ["ignore", "inherit", "inherit"] });
      process.stdout.write(`built ${run.out}\n`);
    } catch {
      failed = true;
      process.stderr.write(`build of ${run.entry} failed\n`);
    }
  }
  process.exit(failed ? 1 : 0);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
