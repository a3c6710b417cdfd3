// `kubectl kustomize` as an operator runs it (offline: it only reads the directory). CI installs
// Debian's kubectl (package kubernetes-client, .ci/run), so there a missing binary is a failure;
// only on a developer machine without it (CI unset) do the rendered-manifest tests skip, saying why.
import { execFileSync, spawnSync } from "node:child_process";
import { REPO } from "./artifacts.ts";

/** Why the rendered-manifest tests cannot run here, or null when they can (or must, in CI). */
export function kubectlSkipReason(): string | null {
  const probe = spawnSync("kubectl", ["version", "--client"], { stdio: "ignore" });
  if (probe.error === undefined || process.env.CI) return null;
  return "kubectl is not on PATH and CI is unset: skipping the rendered-manifest tests (apt-get install -y kubernetes-client)";
}

/** The YAML `kubectl kustomize <dir>` prints for a repository-relative directory. */
export function kustomize(dir: string): string {
  return execFileSync("kubectl", ["kustomize", dir], { cwd: REPO, encoding: "utf8" });
}
