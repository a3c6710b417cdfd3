// Runs gateway mode from a shell, for the demo and manual checks:
//   tsx host/cli.ts --wasm build/kvroute.wasm --threads 2 --port 10000 \
//     --cluster backend=127.0.0.1:8000 --default-cluster backend --plugin-config-file cfg.json
// Prints "listening <url>" once ready and one access-log line per request; stops on SIGINT/SIGTERM.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { FailurePolicy } from "./core.ts";
import { startGateway } from "./gateway.ts";

const { values } = parseArgs({
  options: {
    wasm: { type: "string", default: "build/kvroute.wasm" },
    threads: { type: "string", default: "2" },
    port: { type: "string", default: "0" },
    cluster: { type: "string", multiple: true, default: [] },
    "default-cluster": { type: "string" },
    "plugin-config": { type: "string" },
    "plugin-config-file": { type: "string" },
    "vm-config": { type: "string" },
    "vm-id": { type: "string", default: "" },
    "root-id": { type: "string", default: "" },
    name: { type: "string", default: "" },
    "failure-policy": { type: "string", default: "FAIL_RELOAD" },
    "log-level": { type: "string", default: "2" },
  },
});

const clusters: Record<string, string> = {};
for (const c of values.cluster ?? []) {
  const eq = c.indexOf("=");
  if (eq <= 0) throw new Error(`--cluster wants name=ip:port, got ${c}`);
  clusters[c.slice(0, eq)] = c.slice(eq + 1);
}
const pluginConfig = values["plugin-config-file"]
  ? readFileSync(values["plugin-config-file"], "utf8")
  : (values["plugin-config"] ?? "");

const gw = await startGateway({
  wasm: values.wasm as string,
  threads: Number(values.threads),
  port: Number(values.port),
  clusters,
  defaultCluster: values["default-cluster"],
  pluginConfig,
  vmConfig: values["vm-config"] ?? "",
  vmId: values["vm-id"],
  rootId: values["root-id"],
  pluginName: values.name,
  failurePolicy: values["failure-policy"] as FailurePolicy,
  logLevel: Number(values["log-level"]),
  accessLog: (line) => process.stdout.write(`${line}\n`),
  logSink: (r) => {
    if (r.level >= 2) process.stderr.write(`[${r.thread}] ${r.message}\n`);
  },
});
process.stdout.write(`listening ${gw.url}\n`);
const stop = () => {
  void gw.close().then(() => process.exit(0));
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
