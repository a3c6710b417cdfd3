// Where benches write what they measured: bench/results/<name>.md (the README links them), next
// to the console output. Regenerated from scratch by every run.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const RESULTS_DIR = new URL("../results", import.meta.url).pathname;

export function writeResult(name: string, markdown: string): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, `${name}.md`);
  writeFileSync(path, `${markdown.trimEnd()}\n`);
  return path;
}

export const median = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
