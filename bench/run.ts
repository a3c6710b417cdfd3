// `npm run bench`: runs every bench/*.bench.ts, one child process each (a fresh JIT and heap, so
// one bench cannot skew the next), in name order, with its output streamed through.
//   tsx bench/run.ts [--quick] [--flag=value ...] [name-substring ...]
// A bench is any script that runs itself when executed (`tsx bench/x.bench.ts`); `--quick` and
// KVROUTE_BENCH_QUICK=1 are passed on so it may shorten its runs, and every other `--flag` or
// `--flag=value` is passed on as written (a bench ignores flags it does not know), e.g.
// `npm run bench -- quality --quick --out=/tmp/q --seed=2`. Every bench writes its results to
// bench/results/ unless `--out=DIR` names another directory (lib/results.ts). Adding a bench =
// adding a file.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";

const dir = new URL(".", import.meta.url).pathname;
const args = process.argv.slice(2);
const quick = args.includes("--quick");
const only = args.filter((a) => !a.startsWith("--"));
const passed = args.filter((a) => a.startsWith("--") && a !== "--quick");
const benches = readdirSync(dir)
  .filter((f) => f.endsWith(".bench.ts"))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();

if (benches.length === 0) {
  process.stderr.write(`no bench matches ${only.join(", ")}\n`);
  process.exit(2);
}
/** V8 flags for a bench's process. The quality bench allocates millions of short-lived objects
 * per run (requests, token arrays, simulator events); a 64 MiB young generation spends less of
 * its time in scavenges (about 10–20% less wall time) and changes no result. */
const nodeFlags: Record<string, string[]> = { "quality.bench.ts": ["--max-semi-space-size=64"] };
const failed: string[] = [];
for (const file of benches) {
  process.stdout.write(`\n== ${file}${quick ? " (quick)" : ""}\n`);
  const started = performance.now();
  const r = spawnSync(
    process.execPath,
    [
      ...(nodeFlags[file] ?? []),
      "--import",
      "tsx",
      join(dir, file),
      ...(quick ? ["--quick"] : []),
      ...passed,
    ],
    {
      stdio: "inherit",
      env: { ...process.env, ...(quick ? { KVROUTE_BENCH_QUICK: "1" } : {}) },
    },
  );
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (r.status !== 0) failed.push(file);
  process.stdout.write(
    `== ${file}: ${r.status === 0 ? "done" : `FAILED (${r.status ?? r.signal})`} in ${seconds} s\n`,
  );
}
process.exit(failed.length === 0 ? 0 : 1);
