// The pieces of the replica exchange that need no NATS: the two message formats, and how a peer's
// slot ids become ours — by slot key, unknown slots skipped when the report applies, "not routed"
// kept, another epoch refused — plus the `nats` configuration section.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import { SessionTable } from "../../control-plane/src/model/session-table.ts";
import { LoadModel } from "../../control-plane/src/model/slot-load.ts";
import { SlotTable } from "../../control-plane/src/model/slot-table.ts";
import { PeerSlotTables } from "../../control-plane/src/replicas/peer-slots.ts";
import {
  decodeRelayedReport,
  decodeSlotTable,
  encodeRelayedReport,
  encodeSlotTable,
  ReplicaDecodeError,
} from "../../control-plane/src/replicas/replica-codec.ts";
import { applyReport } from "../../control-plane/src/reports/apply-report.ts";
import { RecentDecisions } from "../../control-plane/src/reports/recent-decisions.ts";
import { decodeReport, encodeReport, NO_SLOT } from "../../control-plane/src/reports/report-codec.ts";

const pool = (endpoints: string[]) =>
  parseConfig(
    {
      pools: [{ name: "p", models: ["m"], endpoints: endpoints.map((address) => ({ address, ranks: [0] })) }],
    },
    "t",
    {},
  ).pools[0] as ReturnType<typeof parseConfig>["pools"][number];

function table(endpoints: string[]): SlotTable {
  const p = pool(endpoints);
  const t = new SlotTable(16);
  for (const e of p.endpoints) t.setEndpointRanks(p, e, [0]);
  return t;
}

const finished = (slot: number) => ({
  slot,
  status: 200,
  outcome: 1,
  priority: 0,
  promptBytes: 10,
  cachedBytes: 0,
  servedFlags: 0,
  ttftMs: 5,
  durationMs: 9,
  requestId: `r${slot}`,
});

describe("replica messages", () => {
  it("round-trip, and refuse truncation, another magic and another protocol", () => {
    const report = new Uint8Array([1, 2, 3]);
    expect(decodeRelayedReport(encodeRelayedReport({ replica: "a", epoch: 7n, report }))).toEqual({
      replica: "a",
      epoch: 7n,
      report,
    });
    const t = { replica: "b", epoch: 9n, keys: ["p/1.2.3.4:80#0", "p/1.2.3.4:80#1"] };
    const bytes = encodeSlotTable(t);
    expect(decodeSlotTable(bytes)).toEqual({ ...t, shardsPools: false });
    // The sharding flag rides in the header's former reserved field: a table without it (an older
    // replica) reads as not sharding, one with it as sharding, the rest of the bytes unchanged.
    const sharding = encodeSlotTable({ ...t, shardsPools: true });
    expect(decodeSlotTable(sharding)).toEqual({ ...t, shardsPools: true });
    expect(sharding.length).toBe(bytes.length);
    expect([...sharding.subarray(8)]).toEqual([...bytes.subarray(8)]);
    expect(() => decodeSlotTable(bytes.subarray(0, bytes.length - 1))).toThrow(ReplicaDecodeError);
    expect(() => decodeSlotTable(encodeRelayedReport({ replica: "a", epoch: 1n, report }))).toThrow(
      /bad magic/,
    );
    const other = bytes.slice();
    other[4] = 2;
    expect(() => decodeSlotTable(other)).toThrow(/protocol 2/);
    expect(() => decodeSlotTable(new Uint8Array([...bytes, 0]))).toThrow(/trailing/);
  });
});

describe("a peer's slot ids", () => {
  const ours = table(["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"]);
  // The peer found the endpoints in another order, and knows one we do not.
  const theirs = ["p/10.0.0.3:80#0", "p/10.0.0.9:80#0", "p/10.0.0.1:80#0"];

  it("map by slot key; unknown ones map to nothing; 0xFFFF stays 'not routed'", () => {
    const peers = new PeerSlotTables(ours);
    expect(peers.learn({ replica: "b", epoch: 5n, keys: theirs }, 0)).toBe("new");
    const map = peers.mapperFor("b", 5n, 0);
    expect(map).not.toBeNull();
    expect([0, 1, 2, 3, NO_SLOT].map((s) => map?.(s))).toEqual([2, -1, 0, -1, NO_SLOT]);
    expect(peers.mapperFor("b", 6n, 0)).toBeNull();
    expect(peers.mapperFor("c", 5n, 0)).toBeNull();
  });

  it("a relayed report applies on our slots and skips the ones we lack", () => {
    const peers = new PeerSlotTables(ours);
    peers.learn({ replica: "b", epoch: 5n, keys: theirs }, 0);
    const body = encodeReport({
      gateway: "g",
      inflight: new Map([
        [0, 4],
        [1, 9],
        [2, 1],
      ]),
      finished: [finished(1), finished(0), finished(NO_SLOT)],
      speculative: [
        { slot: 1, depth: 1, hash: 11n, ttlMs: 1000 },
        { slot: 0, depth: 1, hash: 12n, ttlMs: 1000 },
      ],
      sessions: [
        { slot: 1, outcome: 0, hash: 21n, expiresMs: 1000n },
        { slot: 0, outcome: 1, hash: 22n, expiresMs: 1000n },
      ],
    });
    const report = decodeReport(body, peers.mapperFor("b", 5n, 0) ?? undefined);
    const load = new LoadModel(3);
    const index = new PrefixIndex({ buckets: 16, ways: 4, maxSlots: 16 });
    const decisions = new RecentDecisions();
    const sessions = new SessionTable(1000);
    applyReport({ load, slots: ours, index, decisions, sessions }, report, 0);
    expect([0, 1, 2].map((s) => load.get(s).inflight)).toEqual([1, 0, 4]);
    expect(decisions.list().map((d) => d.slot)).toEqual([NO_SLOT, 2]);
    expect(index.chunks.get(11n)).toBeUndefined();
    expect(index.chunks.get(12n)?.speculative?.has(2)).toBe(true);
    expect([sessions.slotOf(21n), sessions.slotOf(22n)]).toEqual([undefined, 2]);
  });

  it("follow our table as it grows, and forget silent peers", () => {
    const grow = table(["10.0.0.1:80"]);
    const peers = new PeerSlotTables(grow);
    peers.learn({ replica: "b", epoch: 5n, keys: ["p/10.0.0.2:80#0"] }, 0);
    expect(peers.mapperFor("b", 5n, 0)?.(0)).toBe(-1);
    const p = pool(["10.0.0.2:80"]);
    grow.setEndpointRanks(p, p.endpoints[0] as (typeof p.endpoints)[number], [0]);
    expect(peers.mapperFor("b", 5n, 0)?.(0)).toBe(1);
    expect(peers.live(1000, 5000)).toHaveLength(1);
    expect(peers.live(10_000, 5000)).toHaveLength(0);
    expect(peers.mapperFor("b", 5n, 10_000)).toBeNull();
  });
});

describe("the nats section", () => {
  const cfg = (nats: unknown) =>
    parseConfig(
      { pools: [{ name: "p", models: ["m"], endpoints: [{ address: "1.2.3.4:80", ranks: [0] }] }], nats },
      "t",
      {},
    );
  it("has defaults, and refuses bad servers, prefixes and missing credentials", () => {
    expect(cfg({ servers: ["nats://127.0.0.1:4222"] }).nats).toEqual({
      servers: ["nats://127.0.0.1:4222"],
      subjectPrefix: "kvroute",
      announceIntervalMs: 2000,
      // Sharding is opt-in: by default every replica ingests every pool itself.
      shardPools: false,
    });
    expect(cfg(undefined).nats).toBeUndefined();
    expect(() => cfg({ servers: [] })).toThrow(/servers/);
    expect(() => cfg({ servers: ["http://x:1"] })).toThrow(/nats:\/\/host:port/);
    expect(() => cfg({ servers: ["nats://x:1"], subjectPrefix: "a.>" })).toThrow(/subjectPrefix/);
    expect(() => cfg({ servers: ["nats://x:1"], subjectPrefix: "a..b" })).toThrow(/subjectPrefix/);
    expect(() => cfg({ servers: ["nats://x:1"], credentialsFile: "/nonexistent.creds" })).toThrow(
      /file not found/,
    );
    expect(() => cfg({ servers: ["nats://x:1"], replicaID: "x" })).toThrow();
  });
});
