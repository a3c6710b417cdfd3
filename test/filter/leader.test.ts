// Leader election under Envoy's parallel ticks, step-down on a lost lease, and stale sync pages.
// The host runs the ticks by hand on a clock the test moves (lease = max(3 ticks, 1 s) = 1 s):
// the interleaved rounds are the start-up race at its worst — every root context reads the
// lease key before any of them writes it, and setting an absent key succeeds whatever the cas.
import { afterEach, describe, expect, it } from "vitest";
import type { Host } from "../../host/host.ts";
import type { WasmThread } from "../../host/thread.ts";
import {
  entry,
  type FakeControlPlane,
  manualHost,
  pollers,
  startFakeControlPlane,
  syncState,
  text,
} from "./fake-control-plane.ts";
import { until } from "./harness.ts";

let cp: FakeControlPlane | null = null;
let host: Host | null = null;
afterEach(async () => {
  host?.close();
  await cp?.close();
  host = null;
  cp = null;
});

const EPOCH = 77n;

/** `rounds` ticks of the given VMs (default all), 100 ms of clock apart. */
function rounds(
  h: Host,
  clock: { now: number },
  n: number,
  o: { interleaved?: boolean; vms?: WasmThread[] } = {},
) {
  for (let i = 0; i < n; i++) {
    h.tick(o);
    clock.now += 100;
  }
}

describe("leader election", () => {
  it("under the start-up race exactly one root context polls, and keeps being the only one", async () => {
    cp = await startFakeControlPlane();
    const clock = { now: 5_000_000 };
    host = manualHost(cp, () => clock.now);
    const h = host;
    rounds(h, clock, 1, { interleaved: true });
    // A claim is not a lease: nobody polls after one tick.
    expect(pollers(h)).toEqual([]);
    rounds(h, clock, 5, { interleaved: true });
    expect(pollers(h)).toHaveLength(1);
    await until(() => cp?.polls.length === 1, "the leader's poll at the control plane");
    rounds(h, clock, 20, { interleaved: true });
    expect(pollers(h)).toHaveLength(1);
    expect(cp.polls).toHaveLength(1);
    expect(cp.open()).toHaveLength(1);
    expect(h.gauge("kvroute.sync.leader")).toBe(1n);
  });

  it("a leader that lost the lease drops the answer to its poll and polls no more; the new leader's poll is the only one", async () => {
    cp = await startFakeControlPlane();
    const c = cp;
    const clock = { now: 5_000_000 };
    host = manualHost(cp, () => clock.now);
    const h = host;
    rounds(h, clock, 3, { interleaved: true });
    const [old] = pollers(h);
    if (old === undefined) throw new Error("no leader");
    await until(() => c.polls.length === 1, "the first poll");
    // The leader's thread stalls: the others tick on past its lease, then one takes it over.
    const others = h.vms().filter((t) => t !== old);
    rounds(h, clock, 10, { interleaved: true, vms: others });
    expect(pollers(h).filter((t) => t !== old)).toEqual([]);
    rounds(h, clock, 3, { interleaved: true, vms: others });
    const fresh = pollers(h).filter((t) => t !== old);
    expect(fresh).toHaveLength(1);
    await until(() => c.polls.length === 2, "the new leader's poll");
    // The control plane answers the old leader's poll now.
    c.answer(c.polls[0] as (typeof c.polls)[0], {
      epoch: EPOCH,
      version: 5,
      entries: [entry("kvr.test", "from the old leader")],
    });
    await until(() => !pollers(h).includes(old), "the old leader's answer delivered");
    expect(text(h, "kvr.test")).toBeNull();
    expect(syncState(h)).toBeNull();
    expect(pollers(h)).toEqual(fresh);
    rounds(h, clock, 3, { interleaved: true });
    expect(pollers(h)).toEqual(fresh);
    expect(c.polls).toHaveLength(2);
  });

  it("a page asked from an older state is never applied over a newer one", async () => {
    cp = await startFakeControlPlane();
    const c = cp;
    const clock = { now: 5_000_000 };
    // Two VMs: a (the first leader) and b.
    host = manualHost(cp, () => clock.now, { threads: 2, mainThread: false });
    const g = host;
    rounds(g, clock, 3);
    const [a] = pollers(g);
    const b = g.vms().find((t) => t !== a);
    if (a === undefined || b === undefined) throw new Error("no leader");
    await until(() => c.polls.length === 1, "a's first poll");
    c.answer(c.polls[0] as (typeof c.polls)[0], {
      epoch: EPOCH,
      version: 7,
      entries: [entry("kvr.test", "v7")],
    });
    await until(() => c.polls.length === 2, "a's poll from version 7");
    expect(syncState(g)).toEqual({ epoch: EPOCH, version: 7n });
    expect(c.polls[1]?.version).toBe(7n);
    // a stalls; b takes the lease, polls from 7 and gets 9.
    rounds(g, clock, 13, { vms: [b] });
    await until(() => c.polls.length === 3, "b's poll");
    c.answer(c.polls[2] as (typeof c.polls)[0], {
      epoch: EPOCH,
      version: 9,
      entries: [entry("kvr.test", "v9")],
    });
    await until(() => c.polls.length === 4, "b's poll from version 9");
    expect(syncState(g)).toEqual({ epoch: EPOCH, version: 9n });
    // Now b stalls and a comes back: it takes the lease again, its poll from 7 still out.
    rounds(g, clock, 13, { vms: [a] });
    expect(pollers(g)).toContain(a);
    // The answer to that old poll (7 → 8) must not overwrite version 9.
    c.answer(c.polls[1] as (typeof c.polls)[0], {
      epoch: EPOCH,
      version: 8,
      entries: [entry("kvr.test", "v8")],
    });
    await until(() => c.polls.length === 5, "a's next poll");
    expect(text(g, "kvr.test")).toBe("v9");
    expect(syncState(g)).toEqual({ epoch: EPOCH, version: 9n });
    // a asks again from what the cache holds.
    expect(c.polls[4]?.version).toBe(9n);
  });
});
