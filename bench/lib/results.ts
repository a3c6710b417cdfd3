// Where benches write what they measured: bench/results/<name>.md (the README links them), next
// to the console output. Regenerated from scratch by every run — so an exploratory run (another
// rank count, a variant build) names another directory with `--out=DIR` (or `--out DIR`), and
// the committed results stay those of the runs they describe.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const RESULTS_DIR = new URL("../results", import.meta.url).pathname;

/** The directory `--out` names on the command line, else bench/results/. */
export function resultsDir(argv: readonly string[] = process.argv): string {
  const eq = argv.find((a) => a.startsWith("--out="));
  if (eq !== undefined) return eq.slice("--out=".length);
  const i = argv.indexOf("--out");
  const next = i >= 0 ? argv[i + 1] : undefined;
  if (i >= 0 && (next === undefined || next.startsWith("--")))
    throw new Error("--out needs a directory (--out=DIR)");
  return next ?? RESULTS_DIR;
}

export function writeResult(name: string, markdown: string): string {
  const dir = resultsDir();
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.md`);
  writeFileSync(path, `${markdown.trimEnd()}\n`);
  return path;
}

export const median = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
