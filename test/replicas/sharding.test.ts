// Pool ownership over a real nats-server (nats.shardPools): three control-plane replicas with six
// pools agree on one owner per pool, each owning a share; a replica that goes away without a word
// (its NATS connection closed, nothing announced) has its pools taken over by the survivors
// after its silence timeout; when it comes back, it takes its share back from them. /metrics
// says how many pools each owns. A replica on the bus that does not shard is given no pool.
// Without NATS every replica owns every pool (as without sharding); when NATS is back they split
// them again.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { until } from "../until.ts";
import { NatsServer, natsSkipReason } from "./nats-server.ts";

const skipReason = natsSkipReason();
if (skipReason !== null) console.warn(skipReason);

const POOLS = Array.from({ length: 6 }, (_, i) => `pool-${i}`);
const IDS = ["replica-0", "replica-1", "replica-2"];
let nats: NatsServer;
const running = new Map<string, ControlPlane>();

async function replica(id: string, shardPools = true): Promise<ControlPlane> {
  const cfg = parseConfig(
    {
      authToken: "sharding-test-token-0123456789",
      pools: POOLS.map((name, i) => ({
        name,
        models: [`m${i}`],
        endpoints: [{ address: `127.0.0.1:${40000 + i}`, ranks: [0] }],
      })),
      cache: { buckets: 64, ways: 4 },
      load: { scrapeIntervalMs: 60_000 },
      nats: { servers: [nats.url], replicaId: id, announceIntervalMs: 200, shardPools },
    },
    "sharding-test",
    {},
  );
  const cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
  running.set(id, cp);
  return cp;
}

/** Every running replica names the same owner for every pool, one of the running ones, and owns what it names itself for. */
function agreed(): boolean {
  const cps = [...running.entries()];
  return POOLS.every((pool) => {
    const owners = new Set(cps.map(([, cp]) => cp.sharding?.shards.ownerOf(pool)));
    const [owner] = owners;
    return owners.size === 1 && owner !== undefined && owner !== null && running.has(owner);
  });
}
const owned = () => new Map([...running].map(([id, cp]) => [id, cp.sharding?.shards.owned() ?? []]));

beforeAll(async () => {
  if (skipReason !== null) return;
  nats = await NatsServer.start();
});
afterAll(async () => {
  for (const cp of running.values()) await cp.stop();
  await nats?.down();
});

describe.skipIf(skipReason !== null)("pools sharded over replicas on a real nats-server", () => {
  it("three replicas own six pools between them; a lost one's pools are taken over, and given back when it returns", {
    timeout: 60_000,
  }, async () => {
    for (const id of IDS) await replica(id);
    await until(
      "the replicas hear each other and agree on every pool's owner",
      () => [...running.values()].every((cp) => cp.sharding?.shards.replicas.length === 3) && agreed(),
    );
    const before = owned();
    expect([...before.values()].flat().sort()).toEqual(POOLS);
    const victim = [...before].sort((a, b) => b[1].length - a[1].length)[0]?.[0] as string;
    expect(before.get(victim)?.length).toBeGreaterThan(0);
    const metrics = await (await fetch(`${running.get(victim)?.url}/metrics`)).text();
    expect(metrics).toContain(`kvroute_replica_pools_owned ${before.get(victim)?.length}`);

    // The victim goes without a word: the survivors notice its silence and take its pools.
    const cp = running.get(victim) as ControlPlane;
    running.delete(victim);
    await cp.stop();
    await until("the survivors own the lost replica's pools", () => agreed());
    const after = owned();
    expect([...after.values()].flat().sort()).toEqual(POOLS);
    for (const [id, pools] of after) {
      // A survivor keeps its own pools and gains only the lost replica's.
      for (const p of before.get(id) ?? []) expect(pools).toContain(p);
      for (const p of pools.filter((p) => !(before.get(id) ?? []).includes(p)))
        expect(before.get(victim)).toContain(p);
      expect(running.get(id)?.sharding?.shards.stats.gained).toBe(
        pools.length - (before.get(id)?.length ?? 0),
      );
    }

    // It comes back (a new process, the same id): the same share as before, taken back.
    await replica(victim);
    await until(
      "the returning replica's share is back with it",
      () =>
        agreed() &&
        running.size === 3 &&
        [...running.values()].every((cp) => cp.sharding?.shards.replicas.length === 3),
    );
    expect(owned()).toEqual(before);
  });

  it("a replica that does not shard (another version, a rolling change of the setting) is given no pool", {
    timeout: 60_000,
  }, async () => {
    const before = owned();
    const plain = await replica("replica-plain", false);
    running.delete("replica-plain");
    try {
      await until("the sharding replicas hear it", () =>
        [...running.values()].every((cp) => cp.replicas?.peers().some((p) => p.replica === "replica-plain")),
      );
      // Heard, yet not counted: it ingests everything itself and relays nothing.
      for (const cp of running.values()) expect(cp.sharding?.shards.replicas).not.toContain("replica-plain");
      expect(owned()).toEqual(before);
      expect(plain.sharding).toBeNull();
    } finally {
      await plain.stop();
    }
  });

  it("NATS down: each replica owns every pool (ingests everything itself); back up: they split them again", {
    timeout: 60_000,
  }, async () => {
    const before = owned();
    await nats.down();
    await until("every replica owns every pool", () =>
      [...running.values()].every((cp) => cp.sharding?.shards.owned().length === POOLS.length),
    );
    await nats.up();
    await until(
      "the replicas hear each other again and split the pools as before",
      () => [...running.values()].every((cp) => cp.sharding?.shards.replicas.length === 3) && agreed(),
    );
    expect(owned()).toEqual(before);
  });
});
