// The control-plane image's entry point, started from the image's file layout. The runtime stage
// of deploy/Dockerfile is read (COPY lines, the `npm ci` of its RUN lines, ENV, ENTRYPOINT, CMD),
// its files are laid out in a temporary directory exactly as those COPY lines place them, the
// production dependencies are installed the way the image installs them, and the ENTRYPOINT + CMD
// runs with a minimal static configuration until /healthz answers 200. An entry that needs a file
// the image lacks (test/, a dev dependency) fails here, as the first container did.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, isAbsolute, join, posix } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO, readRepoFile } from "./artifacts.ts";
import { parseDockerfile, type Stage } from "./dockerfile.ts";

const stages = parseDockerfile(readRepoFile("deploy/Dockerfile"));
const runtime = stages.at(-1) as Stage;

/** Where a COPY source comes from on this machine: the build context, or a build stage's output. */
function sourcePath(from: string | null, source: string): string {
  if (from === null) return join(REPO, source);
  const stage = stages.find((s) => s.name === from);
  if (stage === undefined) throw new Error(`COPY --from=${from}: no such stage`);
  // A build stage works on a copy of the repository in its WORKDIR; its outputs are what
  // `npm run build` leaves in this checkout.
  const rel = posix.relative(stage.workdir, source);
  if (rel.startsWith("..") || isAbsolute(rel)) throw new Error(`${source} is outside ${stage.workdir}`);
  return join(REPO, rel);
}

/** Docker's COPY: into a directory when dest ends in / or there are several sources; a directory's contents. */
function layOut(app: string): void {
  for (const copy of runtime.copies) {
    const destDir = copy.dest.endsWith("/") || copy.sources.length > 1;
    const dest = posix.isAbsolute(copy.dest)
      ? join(app, posix.relative(runtime.workdir, copy.dest))
      : join(app, copy.dest);
    for (const source of copy.sources) {
      const from = sourcePath(copy.from, source);
      if (!existsSync(from)) throw new Error(`COPY ${source}: ${from} does not exist (npm run build first?)`);
      const to = destDir && !statSync(from).isDirectory() ? join(dest, basename(source)) : dest;
      mkdirSync(destDir ? dest : join(to, ".."), { recursive: true });
      cpSync(from, to, { recursive: true });
    }
  }
}

/** The `npm ci …` commands of the stage's RUN lines (other commands only trim the image). */
function npmInstalls(stage: Stage): string[][] {
  return stage.runs
    .flatMap((run) => run.split("&&").map((c) => c.trim()))
    .filter((c) => c.startsWith("npm ci"))
    .map((c) => c.split(/\s+/).slice(1));
}

const TOKEN = "production-entry-token-0123456789";

describe("the control-plane image's entry point, from the image's file layout", () => {
  let dir = "";
  let app = "";
  let child: ChildProcess | null = null;
  let stderr = "";

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "kvroute-image-"));
    app = join(dir, "app");
    mkdirSync(app);
    layOut(app);
    const installs = npmInstalls(runtime);
    expect(installs.length).toBe(1);
    // --prefer-offline: the packages come from this machine's npm cache when it has them.
    execFileSync("npm", [...(installs[0] as string[]), "--prefer-offline"], {
      cwd: app,
      stdio: ["ignore", "ignore", "inherit"],
    });
  }, 300_000);

  afterAll(async () => {
    if (child !== null && child.exitCode === null && child.signalCode === null) {
      const c = child;
      const gone = new Promise((r) => c.once("exit", r));
      c.kill("SIGKILL");
      await gone;
    }
    if (dir !== "") rmSync(dir, { recursive: true, force: true });
  });

  it("lays out only what the COPY lines name: no test/, no dev dependencies; host/ for the endpoint picker", () => {
    expect(existsSync(join(app, "control-plane/bin/kvroute.ts"))).toBe(true);
    expect(existsSync(join(app, "build/kvroute-core.wasm"))).toBe(true);
    expect(existsSync(join(app, "build/kvroute.wasm"))).toBe(true);
    expect(existsSync(join(app, "test"))).toBe(false);
    expect(existsSync(join(app, "host/index.ts"))).toBe(true);
    expect(existsSync(join(app, "node_modules/tsx"))).toBe(true);
    expect(existsSync(join(app, "node_modules/vitest"))).toBe(false);
    expect(existsSync(join(app, "node_modules/assemblyscript"))).toBe(false);
  });

  it("starts with ENTRYPOINT + CMD, answers /healthz 200, and stops cleanly on SIGTERM", async () => {
    const config = join(dir, "config.yaml");
    // One static endpoint, no tokenizer: the smallest configuration the control plane runs with;
    // port 0 so the test never collides with anything.
    writeFileSync(
      config,
      [
        "listen: 127.0.0.1:0",
        // The endpoint picker too: it loads host/ and build/kvroute.wasm from the image's layout.
        "epp:",
        "  listen: 127.0.0.1:0",
        "pools:",
        "  - name: p",
        "    models: [m]",
        "    endpoints:",
        "      - address: 127.0.0.1:9",
        "        ranks: [0]",
        "",
      ].join("\n"),
    );
    const entrypoint = runtime.entrypoint ?? [];
    const cmd = [...(runtime.cmd ?? [])];
    const at = cmd.indexOf("--config");
    expect(at).toBeGreaterThanOrEqual(0);
    cmd[at + 1] = config;
    const tmp = join(dir, "tmp");
    mkdirSync(tmp);
    const [exe, ...args] = [...entrypoint, ...cmd];
    child = spawn(exe as string, args, {
      cwd: app,
      // The container's environment: the Dockerfile's ENV and the Secret's token, nothing else.
      env: { PATH: process.env.PATH, ...runtime.env, TMPDIR: tmp, KVROUTE_AUTH_TOKEN: TOKEN },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const c = child;
    c.stderr?.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const url = await new Promise<string>((resolve, reject) => {
      const lines = createInterface({ input: c.stdout as NodeJS.ReadableStream });
      lines.on("line", (line) => {
        try {
          const rec = JSON.parse(line) as { msg?: string; url?: string };
          if (rec.msg === "control plane listening" && typeof rec.url === "string") resolve(rec.url);
        } catch {
          // not a log record
        }
      });
      c.once("exit", (code, signal) =>
        reject(new Error(`the entry point exited (${code ?? signal}) before listening:\n${stderr}`)),
      );
    });
    const res = await fetch(`${url}/healthz`);
    expect(res.status).toBe(200);
    const exited = new Promise<number | null>((r) => c.once("exit", (code) => r(code)));
    c.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 60_000);
});
