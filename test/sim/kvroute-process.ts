// `control-plane/bin/kvroute.ts` as a child process (the CLI as an operator runs it): its exit
// code and output, or — with `untilReady` — a handle on it once it printed `"ready":true`.
import { spawn } from "node:child_process";

const BIN = "control-plane/bin/kvroute.ts";

export interface KvrouteRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** For a process still running: SIGTERM, then its exit code. */
  stop?: () => Promise<number | null>;
}

export function runKvroute(args: string[], untilReady = false): Promise<KvrouteRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", BIN, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
      if (untilReady && stdout.includes('"ready":true')) {
        const exited = new Promise<number | null>((r) => child.on("exit", r));
        resolve({
          code: null,
          stdout,
          stderr,
          stop: () => {
            child.kill("SIGTERM");
            return exited;
          },
        });
      }
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}
