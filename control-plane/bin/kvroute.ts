#!/usr/bin/env -S npx tsx
// The `kvroute` command: a thin list of subcommands, each registered by its own module.
import { Command } from "commander";
import { registerSimCommand } from "../sim/cli.ts";
import { registerControlPlaneCommand } from "../src/cli/control-plane-command.ts";
import { registerDemoCommand } from "../src/cli/demo-command.ts";
import { buildInfo, versionText } from "../src/common/build-info.ts";

const program = new Command("kvroute")
  .description("KV-cache- and data-parallel-aware LLM router")
  .showHelpAfterError()
  // Not commander's .version(): that wants the text up front, and reading the commit and
  // hashing the module on every invocation is wasted work.
  .option("-V, --version", "print the version, git commit and filter module hash")
  .on("option:version", () => {
    process.stdout.write(`${versionText(buildInfo())}\n`);
    process.exit(0);
  });

registerControlPlaneCommand(program);
registerDemoCommand(program);
registerSimCommand(program);

await program.parseAsync(process.argv);
