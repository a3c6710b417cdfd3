// What a stored quality-bench row was measured with, as a digest of the sources it depends on: a
// row read back from a rows file (--rows) must come from the same simulator, workloads and peer
// policies — and for kvroute the same filter build, control plane and host — or it is measured
// again. Reading every source file costs a few milliseconds once per bench process.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { isAbsolute, join, relative } from "node:path";
import { FILTER_WASM } from "./policies/kvroute.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** Every file under the given directories of the repository (sorted, so the digest is stable). */
function filesUnder(dirs: readonly string[]): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const name of readdirSync(join(ROOT, rel)).sort()) {
      const child = join(rel, name);
      if (statSync(join(ROOT, child)).isDirectory()) walk(child);
      else out.push(child);
    }
  };
  for (const d of dirs) walk(d);
  return out;
}

/** A 16-hex-digit digest of the files' paths and contents (directories whole, less `except`);
 * absolute paths may lie outside the repository. */
export function digestOf(dirsOrFiles: readonly string[], except: readonly string[] = []): string {
  const h = createHash("sha256");
  const files = dirsOrFiles
    .map((p) => (isAbsolute(p) ? relative(ROOT, p) : p))
    .flatMap((p) => (statSync(join(ROOT, p)).isDirectory() ? filesUnder([p]) : [p]))
    .filter((f) => !except.includes(f));
  for (const f of files)
    h.update(f)
      .update("\0")
      .update(readFileSync(join(ROOT, f)))
      .update("\0");
  return h.digest("hex").slice(0, 16);
}

/** What every policy's rows depend on: the simulator, the harness, the workloads, the peers, and
 * the tokenizer and hashing code they import (not the report, charts or lab tools). */
export const PEER_SOURCES = [
  "control-plane/sim",
  "control-plane/src/tokens",
  "control-plane/src/core/kvroute-core.ts",
  "control-plane/src/events/endpoints.ts",
  "bench/quality/config.ts",
  "bench/quality/harness.ts",
  "bench/quality/metrics.ts",
  "bench/quality/text.ts",
  "bench/quality/tokens.ts",
  "bench/quality/workloads",
  "bench/quality/policies",
];
/** kvroute's policy is the shipped filter: a change to it alone leaves the peers' rows valid. */
export const PEER_EXCEPT = ["bench/quality/policies/kvroute.ts"];
/** What kvroute's rows depend on besides the peers' sources: the filter build, its policy driver,
 * the control plane, the host. */
export const SUBJECT_SOURCES = [
  // The build the kvroute policy runs (KVROUTE_BENCH_FILTER_WASM names another than build/'s).
  FILTER_WASM,
  // The control plane's routing core (its index, publication and bucket images): the virtual
  // control plane runs it, and its sources (filter/core) are not all in the filter build.
  "build/kvroute-core.wasm",
  "bench/quality/policies/kvroute.ts",
  "bench/quality/kvroute",
  "control-plane/src",
  "host",
];
