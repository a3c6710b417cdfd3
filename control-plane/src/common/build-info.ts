// What build is running: the package version, the git commit when known, and the SHA-256 of the
// filter module (build/kvroute.wasm). The module hash is the one Envoy's `remote.sha256`, Istio's
// WasmPlugin `sha256` and Envoy Gateway's `sha256` fields verify, so an operator can match the
// control plane to the filter their gateways load. The filter cannot hash itself (Proxy-Wasm gives
// a module no access to its own bytes), so the control plane hashes the file it ships with.
// Read once per process: `kvroute --version`, /v1/status `build` and `kvroute_build_info` agree.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

export interface BuildInfo {
  /** package.json `version`. */
  version: string;
  /** Full git commit, or null when neither KVROUTE_GIT_COMMIT nor a git checkout says. */
  commit: string | null;
  /** Hex SHA-256 of build/kvroute.wasm, or null when the module is not built. */
  wasmSha256: string | null;
}

const REPO_ROOT = new URL("../../../", import.meta.url).pathname;
const COMMIT = /^[0-9a-f]{7,64}$/;

/** The commit from the image build's KVROUTE_GIT_COMMIT, else from the checkout the code runs in. */
function gitCommit(env: NodeJS.ProcessEnv, root: string): string | null {
  const fromEnv = env.KVROUTE_GIT_COMMIT?.trim().toLowerCase();
  if (fromEnv !== undefined && COMMIT.test(fromEnv)) return fromEnv;
  // The container image has no .git (and no git); only a checkout asks git.
  if (!existsSync(join(root, ".git"))) return null;
  try {
    const out = execFileSync("git", ["rev-parse", "HEAD"], {
      cwd: root,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 5000,
    }).trim();
    return COMMIT.test(out) ? out : null;
  } catch {
    return null;
  }
}

function fileSha256(path: string): string | null {
  if (!existsSync(path)) return null;
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

export function readBuildInfo(env: NodeJS.ProcessEnv = process.env, root = REPO_ROOT): BuildInfo {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
  return {
    version: pkg.version,
    commit: gitCommit(env, root),
    wasmSha256: fileSha256(join(root, "build/kvroute.wasm")),
  };
}

let cached: BuildInfo | undefined;

/** This process's build, read on first use. */
export function buildInfo(): BuildInfo {
  cached ??= readBuildInfo();
  return cached;
}

/** The `kvroute --version` text: one line per fact, unknowns said as such. */
export function versionText(b: BuildInfo): string {
  return [
    `kvroute ${b.version}`,
    `commit ${b.commit ?? "unknown"}`,
    `filter build/kvroute.wasm sha256 ${b.wasmSha256 ?? "unknown (not built)"}`,
  ].join("\n");
}
