// The running build, three ways that must agree: `kvroute --version` (a real process), the
// `kvroute_build_info` metric and /v1/status `build` of a started control plane. The module hash
// is checked against an independent hash of build/kvroute.wasm, the commit against git itself.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { readBuildInfo } from "../../control-plane/src/common/build-info.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";

const REPO = new URL("../..", import.meta.url).pathname;
const pkgVersion = (JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string })
  .version;
const wasmSha = createHash("sha256")
  .update(readFileSync(join(REPO, "build/kvroute.wasm")))
  .digest("hex");
const head = (() => {
  try {
    return execFileSync("git", ["rev-parse", "HEAD"], { cwd: REPO, encoding: "utf8" }).trim();
  } catch {
    return null; // a source tree without git: the commit is "unknown" then, as asserted below
  }
})();

let cp: ControlPlane;
beforeAll(async () => {
  const cfg = parseConfig(
    { pools: [{ name: "p", models: ["m"], endpoints: [{ address: "127.0.0.1:9", ranks: [0] }] }] },
    "test",
    {},
  );
  cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
});
afterAll(async () => {
  await cp.stop();
});

describe("build info", () => {
  it("kvroute --version prints the package version, the git commit and the module's SHA-256", () => {
    const out = execFileSync(
      join(REPO, "node_modules/.bin/tsx"),
      ["control-plane/bin/kvroute.ts", "--version"],
      {
        cwd: REPO,
        encoding: "utf8",
        env: { ...process.env, KVROUTE_GIT_COMMIT: "" },
      },
    );
    expect(out.split("\n")).toEqual([
      `kvroute ${pkgVersion}`,
      `commit ${head ?? "unknown"}`,
      `filter build/kvroute.wasm sha256 ${wasmSha}`,
      "",
    ]);
  });

  it("the image build's KVROUTE_GIT_COMMIT wins; a tree with neither it nor .git says unknown", () => {
    const sha = "0123456789abcdef0123456789abcdef01234567";
    expect(readBuildInfo({ KVROUTE_GIT_COMMIT: sha.toUpperCase() }).commit).toBe(sha);
    const bare = mkdtempSync(join(tmpdir(), "kvroute-build-info-"));
    writeFileSync(join(bare, "package.json"), JSON.stringify({ version: "9.8.7" }));
    expect(readBuildInfo({}, bare)).toEqual({ version: "9.8.7", commit: null, wasmSha256: null });
    // Not a commit: ignored rather than shown.
    expect(readBuildInfo({ KVROUTE_GIT_COMMIT: "main; rm -rf" }, bare).commit).toBeNull();
  });

  it("kvroute_build_info and /v1/status name the same build", async () => {
    const metrics = await (await fetch(`${cp.url}/metrics`)).text();
    const line = metrics.split("\n").find((l) => l.startsWith("kvroute_build_info{"));
    expect(line).toBe(
      `kvroute_build_info{version="${pkgVersion}",commit="${head ?? "unknown"}",wasm_sha256="${wasmSha}"} 1`,
    );
    const status = (await (await fetch(`${cp.url}/v1/status`)).json()) as { build: unknown };
    expect(status.build).toEqual({ version: pkgVersion, commit: head, wasmSha256: wasmSha });
  });
});
