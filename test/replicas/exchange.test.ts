// Two control-plane replicas sharing gateway reports over a real nats-server: a report posted to
// one replica shows in the other's model under that replica's own slot ids (the two number their
// slots differently), a gateway that moves is counted once, a peer's speculative routes reach the
// index, and a NATS outage leaves each replica ready on its own view, then heals.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { encodeReport, type Report } from "../../control-plane/src/reports/report-codec.ts";
import { until } from "../until.ts";
import { NatsServer, natsSkipReason } from "./nats-server.ts";

const TOKEN = "replica-test-token-0123456789";
const skipReason = natsSkipReason();
if (skipReason !== null) console.warn(skipReason);

let nats: NatsServer;
let engine: Server;
let a: ControlPlane;
let b: ControlPlane;
let e1: string;
let e2: string;

async function replica(id: string, endpoints: string[]): Promise<ControlPlane> {
  const cfg = parseConfig(
    {
      authToken: TOKEN,
      pools: [
        {
          name: "p",
          models: ["m"],
          endpoints: endpoints.map((address) => ({
            address,
            ranks: [0, 1],
            metricsUrl: `http://${e1}/metrics`,
          })),
        },
      ],
      cache: { buckets: 64, ways: 4 },
      nats: { servers: [nats.url], replicaId: id, announceIntervalMs: 200 },
    },
    "test",
    {},
  );
  return startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
}

function report(
  cp: ControlPlane,
  gateway: string,
  inflight: Array<[string, number]>,
  extra: Partial<Report> = {},
) {
  const slotId = (key: string) => (cp.slots.byKey(key) as { id: number }).id;
  const body = encodeReport({
    gateway,
    inflight: new Map(inflight.map(([key, n]) => [slotId(key), n])),
    finished: [],
    speculative: [],
    ...extra,
  });
  return fetch(`${cp.url}/v1/report`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}` },
    body: Buffer.from(body),
  });
}

const inflightOf = (cp: ControlPlane, key: string) =>
  cp.load.get((cp.slots.byKey(key) as { id: number }).id).inflight;
const metric = async (cp: ControlPlane, line: string) =>
  (await (await fetch(`${cp.url}/metrics`)).text()).includes(line);

describe.skipIf(skipReason !== null)("control-plane replicas over NATS", () => {
  beforeAll(async () => {
    nats = await NatsServer.start();
    engine = createServer((_req, res) => res.writeHead(200).end("\n"));
    await new Promise<void>((r) => engine.listen(0, "127.0.0.1", r));
    e1 = `127.0.0.1:${(engine.address() as AddressInfo).port}`;
    e2 = "127.0.0.2:8000";
    // The same endpoints in the opposite order: the replicas' slot ids differ.
    a = await replica("a", [e1, e2]);
    b = await replica("b", [e2, e1]);
    await until(
      "both replicas hear each other",
      () => a.replicas?.peers().length === 1 && b.replicas?.peers().length === 1,
    );
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await nats?.down();
    engine?.closeAllConnections();
    await new Promise((r) => engine?.close(r));
  });

  it("numbers slots differently on the two replicas (the premise of the mapping)", () => {
    expect(a.slots.byKey(`p/${e1}#0`)?.id).toBe(0);
    expect(b.slots.byKey(`p/${e1}#0`)?.id).toBe(2);
  });

  it("a gateway's report to one replica counts in the other's in-flight, on the same (endpoint, rank)", async () => {
    expect(
      (
        await report(a, "g1", [
          [`p/${e1}#0`, 3],
          [`p/${e2}#1`, 2],
        ])
      ).status,
    ).toBe(204);
    expect((await report(b, "g2", [[`p/${e1}#0`, 4]])).status).toBe(204);
    await until(
      "each replica sees both gateways",
      () => inflightOf(a, `p/${e1}#0`) === 7 && inflightOf(b, `p/${e1}#0`) === 7,
    );
    expect(inflightOf(b, `p/${e2}#1`)).toBe(2);
    expect(inflightOf(a, `p/${e2}#1`)).toBe(2);
    expect(inflightOf(b, `p/${e2}#0`)).toBe(0);
  });

  it("a gateway that moves to the other replica is counted once", async () => {
    expect((await report(b, "g1", [[`p/${e1}#0`, 1]])).status).toBe(204);
    await until(
      "g1's report through b replaces its report through a",
      () => inflightOf(a, `p/${e1}#0`) === 5,
    );
    expect(inflightOf(b, `p/${e1}#0`)).toBe(5);
  });

  it("a peer's speculative routes enter the index", async () => {
    const slot = (b.slots.byKey(`p/${e2}#1`) as { id: number }).id;
    const hash = 0x1234_5678_9abc_def0n;
    const speculative = [{ slot, depth: 1, hash, ttlMs: 60_000 }];
    expect((await report(b, "g3", [], { speculative })).status).toBe(204);
    const aSlot = (a.slots.byKey(`p/${e2}#1`) as { id: number }).id;
    await until(
      "a indexes b's gateway's speculative route",
      () => a.index.chunks.get(hash)?.speculative?.has(aSlot) === true,
    );
  });

  it("a peer's session routes enter the fleet's session table under our slot ids", async () => {
    const slot = (b.slots.byKey(`p/${e2}#0`) as { id: number }).id;
    const sessions = [{ slot, outcome: 0, hash: 0x5e55_1011n, expiresMs: BigInt(Date.now() + 60_000) }];
    expect((await report(b, "g4", [], { sessions })).status).toBe(204);
    const aSlot = (a.slots.byKey(`p/${e2}#0`) as { id: number }).id;
    await until("a learns b's gateway's session", () => a.sessions.slotOf(0x5e55_1011n) === aSlot);
  });

  it("NATS down: both stay ready, say so in /readyz and /metrics; sharing resumes when it is back", async () => {
    await nats.down();
    await until(
      "both see the outage",
      () => a.replicas?.connected === false && b.replicas?.connected === false,
    );
    const ready = await fetch(`${a.url}/readyz`);
    expect(ready.status).toBe(200);
    expect((await ready.json()).replicas).toEqual({ connected: false, peers: expect.any(Number) });
    expect(await metric(a, "kvroute_replica_nats_connected 0")).toBe(true);
    // A report during the outage applies here and is not queued for later.
    expect((await report(a, "g4", [[`p/${e2}#0`, 6]])).status).toBe(204);
    expect(inflightOf(a, `p/${e2}#0`)).toBe(6);
    expect(await metric(a, 'kvroute_replica_messages_dropped_total{reason="disconnected"}')).toBe(true);

    // A replica that starts while NATS is down serves at once and connects once NATS is there.
    const c = await replica("c", [e1]);
    try {
      expect((await fetch(`${c.url}/readyz`)).status).toBe(200);
      expect(c.replicas?.connected).toBe(false);
      await nats.up();
      await until("c connects for the first time", () => c.replicas?.connected === true);
      await until("c hears a and b", () => c.replicas?.peers().length === 2);
    } finally {
      await c.stop();
    }
    await until("both reconnect", () => a.replicas?.connected === true && b.replicas?.connected === true);
    expect(await metric(a, "kvroute_replica_nats_disconnects_total 1")).toBe(true);
    expect((await report(a, "g4", [[`p/${e2}#0`, 8]])).status).toBe(204);
    await until("b sees g4 after the outage", () => inflightOf(b, `p/${e2}#0`) === 8);
  });
});
