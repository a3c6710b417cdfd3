// `kvroute control-plane --config FILE`: runs the control plane until SIGINT/SIGTERM.
// `--check` validates the file (and the pools' tokenizers) and exits. A change of the file (a
// ConfigMap update) or SIGHUP reloads it: live fields apply, the rest waits for a restart.
import type { Command } from "commander";
import { startControlPlane } from "../app.ts";
import { ConfigError, loadConfigFile } from "../config/load-config.ts";
import { loadPoolTokens } from "../pools/pool-tokens.ts";
import { startTracing } from "../tracing/sdk.ts";

export function registerControlPlaneCommand(program: Command): void {
  program
    .command("control-plane")
    .description("run the control plane: KV events + load → routing cache → every gateway")
    .requiredOption("-c, --config <file>", "YAML configuration (docs/configuration.md)")
    .option("--check", "validate the configuration and tokenizers, then exit")
    .action(async (opts: { config: string; check?: boolean }) => {
      let cfg: ReturnType<typeof loadConfigFile>;
      try {
        cfg = loadConfigFile(opts.config);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        process.stderr.write(`${err.message}\n`);
        process.exit(2);
      }
      if (opts.check) {
        for (const pool of cfg.pools) {
          const tokens = loadPoolTokens(pool);
          const state = tokens.segmentTemplate !== null ? "segment template verified" : "chats route by load";
          process.stdout.write(
            `pool ${pool.name}: ${state}${tokens.problems.map((p) => `\n  - ${p}`).join("")}\n`,
          );
        }
        process.stdout.write(`${opts.config}: configuration is valid\n`);
        return;
      }
      // Before the control plane, so its parts find the SDK started (OTEL_* variables).
      const tracing = await startTracing();
      const cp = await startControlPlane(cfg, { configFile: opts.config }).catch(
        (err: NodeJS.ErrnoException) => {
          if (err.code === "EADDRINUSE") {
            process.stderr.write(
              `cannot listen on ${cfg.listen}: the port is in use (set listen or KVROUTE_LISTEN)\n`,
            );
            process.exit(2);
          }
          throw err;
        },
      );
      const stop = async () => {
        await cp.stop();
        await tracing?.shutdown(); // exports the spans still buffered
        process.exit(0);
      };
      process.on("SIGHUP", () => cp.reloadConfig(() => loadConfigFile(opts.config)));
      process.once("SIGINT", () => void stop());
      process.once("SIGTERM", () => void stop());
    });
}
