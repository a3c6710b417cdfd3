// A gateway report larger than the NATS server's max_payload reaches the peer replica in parts,
// through a real nats-server configured with a small max_payload (2 KiB, so an ordinary report
// with a few hundred speculative routes exceeds it): the peer joins the parts and applies the
// report whole; small messages still travel whole.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { encodeReport } from "../../control-plane/src/reports/report-codec.ts";
import { until } from "../until.ts";
import { NatsServer, natsSkipReason } from "./nats-server.ts";

const TOKEN = "replica-test-token-0123456789";
const MAX_PAYLOAD = 2048;
const skipReason = natsSkipReason();
if (skipReason !== null) console.warn(skipReason);

let nats: NatsServer;
let a: ControlPlane;
let b: ControlPlane;
const E1 = "127.0.0.3:8000";

async function replica(id: string): Promise<ControlPlane> {
  const cfg = parseConfig(
    {
      authToken: TOKEN,
      pools: [{ name: "p", models: ["m"], endpoints: [{ address: E1, ranks: [0, 1] }] }],
      cache: { buckets: 64, ways: 4 },
      nats: { servers: [nats.url], replicaId: id, announceIntervalMs: 200 },
    },
    "test",
    {},
  );
  return startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
}

function post(cp: ControlPlane, body: Uint8Array) {
  return fetch(`${cp.url}/v1/report`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}` },
    body: Buffer.from(body),
  });
}

describe.skipIf(skipReason !== null)("replica messages over max_payload travel in parts", () => {
  beforeAll(async () => {
    nats = await NatsServer.start({ maxPayload: MAX_PAYLOAD });
    a = await replica("a");
    b = await replica("b");
    await until(
      "both replicas hear each other",
      () => a.replicas?.peers().length === 1 && b.replicas?.peers().length === 1,
    );
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await nats?.down();
  });

  it("a report of many times max_payload is applied whole by the peer", async () => {
    const slot = (a.slots.byKey(`p/${E1}#1`) as { id: number }).id;
    const speculative = Array.from({ length: 600 }, (_, i) => ({
      slot,
      depth: 1 + (i % 7),
      hash: 0x7000_0000_0000_0000n + BigInt(i) * 0x1_0001n,
      ttlMs: 60_000,
    }));
    const body = encodeReport({
      gateway: "g-large",
      inflight: new Map([[slot, 3]]),
      finished: [],
      speculative,
    });
    expect(body.length).toBeGreaterThan(4 * MAX_PAYLOAD);
    expect((await post(a, body)).status).toBe(204);

    const bSlot = (b.slots.byKey(`p/${E1}#1`) as { id: number }).id;
    await until("b applies a's large report", () => b.load.get(bSlot).inflight === 3);
    // Every route, the last part's included, is in b's index under b's slot id.
    for (const r of speculative) expect(b.index.chunks.get(r.hash)?.speculative?.has(bSlot)).toBe(true);
    expect(a.replicas?.stats.messagesSplit).toBe(1);
    expect(a.replicas?.stats.partsSent).toBeGreaterThanOrEqual(Math.ceil(body.length / MAX_PAYLOAD));
    expect(b.replicas?.stats.messagesJoined).toBe(1);
    expect(a.replicas?.stats.dropped.too_large).toBeUndefined();
    expect(b.replicas?.joining).toEqual({ messages: 0, bytes: 0 });
    const metrics = await (await fetch(`${b.url}/metrics`)).text();
    expect(metrics).toContain("kvroute_replica_messages_joined_total 1");
  });

  it("a small report still travels whole", async () => {
    const slot = (a.slots.byKey(`p/${E1}#0`) as { id: number }).id;
    const body = encodeReport({
      gateway: "g-small",
      inflight: new Map([[slot, 2]]),
      finished: [],
      speculative: [],
    });
    expect(body.length).toBeLessThan(MAX_PAYLOAD);
    const split = a.replicas?.stats.messagesSplit;
    expect((await post(a, body)).status).toBe(204);
    const bSlot = (b.slots.byKey(`p/${E1}#0`) as { id: number }).id;
    await until("b applies a's small report", () => b.load.get(bSlot).inflight === 2);
    expect(a.replicas?.stats.messagesSplit).toBe(split);
  });
});
