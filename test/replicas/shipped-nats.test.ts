// The NATS deploy/ ships, run: deploy/nats.yaml's nats.conf with Debian's nats-server (its ports
// moved to free loopback ones), answering the /healthz its probes read, with the max_payload the
// file states; and two control planes configured with deploy/configmap.yaml's `nats` section (its
// servers pointed here) share it — they hear each other and split the pools between them.
import { pino } from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig, parseConfigYaml } from "../../control-plane/src/config/load-config.ts";
import { loadYamlFiles } from "../deploy/artifacts.ts";
import { until } from "../until.ts";
import { NatsServer, natsSkipReason } from "./nats-server.ts";

const skipReason = natsSkipReason();
if (skipReason !== null) console.warn(skipReason);

// biome-ignore lint/suspicious/noExplicitAny: tests walk parsed YAML whose shape they assert
type Obj = Record<string, any>;
const docs = loadYamlFiles("deploy").flatMap((f) => f.docs as Obj[]);
const configMap = (name: string) =>
  docs.find((d) => d.kind === "ConfigMap" && d.metadata?.name === name) as Obj;
const natsConf: string = configMap("kvroute-nats-config").data["nats.conf"];
const shipped = parseConfigYaml(configMap("kvroute-config").data["config.yaml"], "deploy/configmap.yaml", {});

let nats: NatsServer | null = null;
const cps: ControlPlane[] = [];
afterAll(async () => {
  for (const cp of cps) await cp.stop();
  await nats?.down();
});

describe.skipIf(skipReason !== null)("the NATS deploy/ ships", () => {
  it("runs with Debian's nats-server, and two replicas with the shipped nats section shard pools over it", {
    timeout: 60_000,
  }, async () => {
    expect(shipped.nats?.shardPools).toBe(true);
    const server = await NatsServer.start({ configText: natsConf });
    nats = server;
    const health = await fetch(`http://127.0.0.1:${server.monitorPort}/healthz`);
    expect(health.status).toBe(200);
    const varz = (await (await fetch(`http://127.0.0.1:${server.monitorPort}/varz`)).json()) as Obj;
    expect(varz.max_payload).toBe(Number(/max_payload: (\d+)MB/.exec(natsConf)?.[1]) * 1024 * 1024);

    const pools = ["a", "b", "c", "d"];
    for (const id of ["replica-x", "replica-y"]) {
      const cfg = parseConfig(
        {
          authToken: "shipped-nats-token-0123456789",
          pools: pools.map((name, i) => ({
            name,
            models: [`m-${name}`],
            endpoints: [{ address: `127.0.0.1:${41000 + i}`, ranks: [0] }],
          })),
          load: { scrapeIntervalMs: 60_000 },
          // The shipped section, pointed at this server, under a test's replica id and interval.
          nats: { ...shipped.nats, servers: [server.url], replicaId: id, announceIntervalMs: 200 },
        },
        "shipped-nats",
        {},
      );
      cps.push(await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) }));
    }
    await until("both replicas hear each other", () =>
      cps.every((cp) => cp.sharding?.shards.replicas.length === 2),
    );
    const owned = cps.map((cp) => cp.sharding?.shards.owned() ?? []);
    expect(owned.flat().sort()).toEqual(pools);
  });
});
