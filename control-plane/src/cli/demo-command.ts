// Registers `kvroute demo`. The demo itself (simulated workers, the Node Proxy-Wasm host, dev-only
// tokenizer files) is imported only when the command runs, so `kvroute control-plane` in the
// production image loads nothing it does not use.
import type { Command } from "commander";
import type { DemoOptions } from "./demo.ts";

export function registerDemoCommand(program: Command): void {
  const int = (v: string) => Number.parseInt(v, 10);
  program
    .command("demo")
    .description("run simulated workers + control plane + gateway, send a demo workload, print the result")
    .option("--gateway-port <port>", "gateway listener", int, 10000)
    .option("--control-plane-port <port>", "control plane (sync, status, dashboard)", int, 9090)
    .option("--sim-port <port>", "first simulated worker's HTTP port (worker w on port + w)", int, 8001)
    .option("--zmq-port <port>", "first KV-event port (worker w publishes on port + 20·w + rank)", int, 5557)
    .option("--workers <n>", "simulated workers", int, 2)
    .option("--ranks <n>", "DP ranks per worker", int, 4)
    .option("--exit", "stop after printing the result instead of serving until Ctrl-C")
    .action(async (o: DemoOptions) => {
      const { runDemo } = await import("./demo.ts");
      await runDemo(o);
    });
}
