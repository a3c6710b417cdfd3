#!/usr/bin/env -S npx tsx
// The `kvroute` command: a thin list of subcommands, each registered by its own module.
import { Command } from "commander";
import { registerSimCommand } from "../sim/cli.ts";
import { registerControlPlaneCommand } from "../src/cli/control-plane-command.ts";
import { registerDemoCommand } from "../src/cli/demo-command.ts";

const program = new Command("kvroute")
  .description("KV-cache- and data-parallel-aware LLM router")
  .showHelpAfterError();

registerControlPlaneCommand(program);
registerDemoCommand(program);
registerSimCommand(program);

await program.parseAsync(process.argv);
