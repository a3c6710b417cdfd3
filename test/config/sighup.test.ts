// `kvroute control-plane` as the container runs it (node --import tsx, one process): SIGHUP
// reloads the configuration file even when nothing changed on disk (counted as unchanged, so
// the signal itself is what reloaded it), and an edit of the file is picked up by the watch alone.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { freePortRange } from "../sim/helpers.ts";
import { until } from "../until.ts";

const REPO = new URL("../..", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "kvroute-sighup-"));
const file = join(dir, "config.yaml");
let port = 0;
let child: ChildProcess;
let exited: Promise<number | null>;

const config = (logLevel: string) =>
  stringify({
    listen: `127.0.0.1:${port}`,
    logLevel,
    pools: [{ name: "p", models: ["m"], endpoints: [{ address: "127.0.0.1:9", ranks: [0] }] }],
  });

const reloads = async (result: string): Promise<number> => {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const m = new RegExp(`^kvroute_config_reloads_total\\{result="${result}"\\} (\\d+)$`, "m").exec(text);
    return m === null ? -1 : Number(m[1]);
  } catch {
    return -1; // not listening yet
  }
};

beforeAll(async () => {
  port = await freePortRange(1);
  writeFileSync(file, config("info"));
  child = spawn(
    process.execPath,
    ["--import", "tsx", "control-plane/bin/kvroute.ts", "control-plane", "--config", file],
    {
      cwd: REPO,
      stdio: ["ignore", "ignore", "inherit"],
      env: { ...process.env, KVROUTE_AUTH_TOKEN: undefined },
    },
  );
  exited = new Promise((r) => child.once("exit", (code) => r(code)));
  await until("the control plane serving /metrics", async () => (await reloads("unchanged")) === 0);
}, 40_000);

afterAll(async () => {
  child.kill("SIGTERM");
  await exited;
  rmSync(dir, { recursive: true, force: true });
});

describe("kvroute control-plane reloads its configuration", () => {
  it("on SIGHUP", async () => {
    child.kill("SIGHUP");
    await until("the SIGHUP reload", async () => (await reloads("unchanged")) === 1);
    expect(await reloads("applied")).toBe(0);
    expect(child.exitCode).toBeNull();
  });

  it("when the file changes", async () => {
    writeFileSync(file, config("debug"));
    await until("the file watch's reload", async () => (await reloads("applied")) === 1);
  });
});
