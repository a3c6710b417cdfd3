// `kvroute sim` as a process: flag validation, a busy port, and a real start in external-LB
// mode (rank r on port + r) that stops cleanly on SIGTERM.
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { onFreePortBase, post, QWEN3 } from "./helpers.ts";
import { runKvroute as run } from "./kvroute-process.ts";

const base = ["sim", "--model", "m", "--tokenizer", QWEN3, "--host", "127.0.0.1", "--num-gpu-blocks", "64"];

describe("kvroute sim CLI", () => {
  it("rejects invalid flags with a clear message and a non-zero exit", async () => {
    const bad = await run([...base, "--data-parallel-size", "two"]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--data-parallel-size.*must be a non-negative integer/);
    const combo = await run([...base, "--data-parallel-hybrid-lb", "--port", "0"]);
    expect(combo.code).not.toBe(0);
    expect(combo.stderr).toMatch(/--data-parallel-hybrid-lb requires --data-parallel-size-local/);
    const unknown = await run([...base, "--tensor-parallel-size", "2"]);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/unknown option '--tensor-parallel-size'/);
  });

  it("reports a busy port", async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
    const port = (blocker.address() as { port: number }).port;
    try {
      const r = await run([...base, "--port", String(port)]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`port ${port} on 127.0.0.1 is already in use`);
    } finally {
      blocker.close();
    }
  });

  it("external LB: one server per rank on port + r; SIGTERM stops it", async () => {
    // The process binds port and port + 1 itself; one of them taken → it exits → another base.
    const { port, p } = await onFreePortBase(async (port) => {
      const p = await run(
        [
          ...base,
          "--port",
          String(port),
          "--data-parallel-size",
          "2",
          "--data-parallel-external-lb",
          "--time-scale",
          "0.01",
        ],
        true,
      );
      if (p.stop === undefined) throw new Error(`kvroute sim exited ${p.code}: ${p.stderr}`);
      return { port, p };
    });
    expect(p.stdout).toContain(`"ports":[${port},${port + 1}]`);
    const r = await post(port + 1, "/v1/completions", { prompt: "hello", max_tokens: 2 });
    expect(r.headers.get("x-kvroute-sim-rank")).toBe("1");
    expect(await p.stop?.()).toBe(0);
  });
});
