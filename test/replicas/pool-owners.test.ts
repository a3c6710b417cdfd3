// Pool ownership without an election (replicas/pool-owners.ts, pool-shards.ts): every replica
// that hears the same replicas computes the same owner for every pool; a replica that leaves
// moves only its own pools, one that joins takes pools only for itself; and once a silent peer's
// timeout has passed (peer-slots.ts, the exchange's liveness), every pool is owned by a replica
// still heard.
import { describe, expect, it } from "vitest";
import { SlotTable } from "../../control-plane/src/model/slot-table.ts";
import { PeerSlotTables } from "../../control-plane/src/replicas/peer-slots.ts";
import { poolOwner, poolOwners } from "../../control-plane/src/replicas/pool-owners.ts";
import { PoolShards } from "../../control-plane/src/replicas/pool-shards.ts";

const POOLS = Array.from({ length: 60 }, (_, i) => `pool-${i}`);
const REPLICAS = ["replica-a", "replica-b", "replica-c"];

describe("rendezvous ownership", () => {
  it("is the same whatever order the replicas were heard in", () => {
    const owners = poolOwners(POOLS, REPLICAS);
    for (const order of [
      ["replica-c", "replica-a", "replica-b"],
      ["replica-b", "replica-c", "replica-a"],
    ])
      expect(poolOwners(POOLS, order)).toEqual(owners);
  });

  it("gives every pool one owner among the replicas, and every replica a share", () => {
    const owners = poolOwners(POOLS, REPLICAS);
    for (const owner of owners.values()) expect(REPLICAS).toContain(owner);
    for (const r of REPLICAS) expect([...owners.values()].filter((o) => o === r).length).toBeGreaterThan(0);
    expect(poolOwner("pool-0", [])).toBeNull();
  });

  it("a replica's loss moves its pools only, to the others", () => {
    const before = poolOwners(POOLS, REPLICAS);
    for (const gone of REPLICAS) {
      const after = poolOwners(
        POOLS,
        REPLICAS.filter((r) => r !== gone),
      );
      for (const pool of POOLS) {
        if (before.get(pool) === gone) expect(after.get(pool)).not.toBe(gone);
        else expect(after.get(pool)).toBe(before.get(pool));
      }
    }
  });

  it("a replica that joins takes pools for itself only", () => {
    const before = poolOwners(POOLS, REPLICAS);
    const after = poolOwners(POOLS, [...REPLICAS, "replica-d"]);
    const moved = POOLS.filter((p) => after.get(p) !== before.get(p));
    expect(moved.length).toBeGreaterThan(0);
    for (const p of moved) expect(after.get(p)).toBe("replica-d");
  });
});

describe("a replica's share (PoolShards)", () => {
  it("owns every pool until it hears a peer, then its share; gains and loses as peers come and go", () => {
    let live: string[] = [];
    const changes: Array<{ gained: readonly string[]; lost: readonly string[] }> = [];
    const shards = new PoolShards({
      self: "replica-a",
      pools: POOLS,
      live: () => live,
      changed: (gained, lost) => changes.push({ gained, lost }),
    });
    expect(shards.owned()).toEqual(POOLS);

    live = ["replica-b", "replica-c"];
    shards.refresh();
    const share = POOLS.filter((p) => poolOwner(p, REPLICAS) === "replica-a");
    expect(shards.owned()).toEqual(share);
    expect(changes).toEqual([{ gained: [], lost: POOLS.filter((p) => !share.includes(p)) }]);
    for (const p of POOLS) expect(shards.ownerOf(p)).toBe(poolOwner(p, REPLICAS));

    // The same set heard again: nothing to do.
    shards.refresh();
    expect(changes.length).toBe(1);

    // replica-c falls silent: a takes over the part of c's pools it wins against b.
    live = ["replica-b"];
    shards.refresh();
    const cPools = POOLS.filter((p) => poolOwner(p, REPLICAS) === "replica-c");
    const taken = cPools.filter((p) => poolOwner(p, ["replica-a", "replica-b"]) === "replica-a");
    expect(changes[1]).toEqual({ gained: taken, lost: [] });
    expect(shards.stats).toEqual({ gained: taken.length, lost: POOLS.length - share.length });
  });

  it("no pool stays with a silent replica once its timeout has passed", () => {
    const interval = 500;
    const timeout = 3 * interval;
    const tables = new PeerSlotTables(new SlotTable(8));
    const heard = (replica: string, now: number) => tables.learn({ replica, epoch: 1n, keys: [] }, now);
    const views = ["replica-a", "replica-b"].map(
      (self) =>
        new PoolShards({
          self,
          pools: POOLS,
          live: () =>
            tables
              .live(now, timeout)
              .map((p) => p.replica)
              .filter((r) => r !== self),
        }),
    );
    let now = 0;
    for (const r of REPLICAS) heard(r, now);
    for (const v of views) v.refresh();
    expect(views[0]?.owned().length).toBeGreaterThan(0);
    // replica-c stops announcing; a and b go on, every interval.
    for (now = interval; now <= timeout + interval; now += interval) {
      heard("replica-a", now);
      heard("replica-b", now);
      for (const v of views) v.refresh();
      // Within its timeout a silent replica is still taken as alive: its pools wait for it.
      if (now <= timeout) expect(views[0]?.replicas).toContain("replica-c");
    }
    expect(views[0]?.replicas).not.toContain("replica-c");
    for (const v of views) for (const p of POOLS) expect(["replica-a", "replica-b"]).toContain(v.ownerOf(p));
    // Both survivors agree, and between them they own every pool exactly once.
    const [a, b] = views as [PoolShards, PoolShards];
    expect([...a.owned(), ...b.owned()].sort()).toEqual([...POOLS].sort());
    for (const p of POOLS) expect(a.ownerOf(p)).toBe(b.ownerOf(p));
  });
});
