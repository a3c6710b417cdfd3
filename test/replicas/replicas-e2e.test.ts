// Issue 18 §1 end to end: 2 control-plane replicas sharing gateway reports over NATS, 3 gateways
// (the shipped filter in the Node host, 2 threads each), 2 simulated vLLM workers × 4 ranks.
// - Under load, each replica's fleet in-flight per slot equals the sum over all three gateways'
//   own counts — also for the gateways attached to the other replica.
// - Killing a replica mid-load fails no request, and the cache hit rate stays within 2 points of
//   a single-replica run of the same workload (fresh engines each run); the gateways attached to
//   the killed replica fail over to the other and resync from it (the time is logged).
// - Restarting NATS mid-load fails no request.
import { afterAll, describe, expect, it } from "vitest";
import type { ControlPlane } from "../../control-plane/src/app.ts";
import { until } from "../until.ts";
import { NatsServer, natsSkipReason } from "./nats-server.ts";
import { type Answer, chat, gatewayInflight, REPORT_MS, type Stack, startStack } from "./stack.ts";

const skipReason = natsSkipReason();
if (skipReason !== null) console.warn(skipReason);

const GATEWAYS = 3;
const GROUPS = 8;
const FOLLOWERS = 14;
const CONCURRENCY = 3;

/** A system prompt per group, long enough for many chunks, and a short user turn per request. */
const system = (g: number) =>
  `You are assistant ${g} of the replica test. ${"Answer briefly and precisely, citing the manual section you used. ".repeat(100)}`;
const user = (g: number, i: number) => `Question ${i} for group ${g}: what is ${i} + ${g}?`;

/** The same workload every run: each group's first request, then its followers interleaved. */
function workload(): Array<{ group: number; i: number }> {
  const firsts = Array.from({ length: GROUPS }, (_, g) => ({ group: g, i: 0 }));
  const rest: Array<{ group: number; i: number }> = [];
  for (let i = 1; i <= FOLLOWERS; i++)
    for (let g = 0; g < GROUPS; g++) rest.push({ group: (g * 3 + i) % GROUPS, i });
  return [...firsts, ...rest];
}

interface RunResult {
  answers: Answer[];
  hitRate: number;
}

/** Runs the workload over the gateways in turn, CONCURRENCY at a time; `at(k)` runs before request k. */
async function run(s: Stack, at: (k: number) => Promise<void> = async () => {}): Promise<RunResult> {
  const items = workload();
  const answers: Answer[] = new Array(items.length);
  // The groups' first requests alone and in order: each group's prefix is cached somewhere first.
  for (let k = 0; k < GROUPS; k++) {
    const { group, i } = items[k] as { group: number; i: number };
    answers[k] = await chat(s, k % GATEWAYS, system(group), user(group, i));
  }
  // Every gateway holds the firsts' blocks before the followers start.
  await synced(s);
  let next = GROUPS;
  const lane = async () => {
    while (next < items.length) {
      const k = next++;
      await at(k);
      const { group, i } = items[k] as { group: number; i: number };
      answers[k] = await chat(s, k % GATEWAYS, system(group), user(group, i));
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  const prompt = answers.reduce((a, r) => a + r.promptTokens, 0);
  const cached = answers.reduce((a, r) => a + r.cached, 0);
  return { answers, hitRate: cached / prompt };
}

const epochOf = (s: Stack, g: number) => {
  const v = s.gateways[g]?.host.sharedData("kvr.sync");
  return v === null || v === undefined ? null : Buffer.from(v.value).readBigUInt64LE(0);
};
const resyncing = (s: Stack, g: number) => {
  const v = s.gateways[g]?.host.sharedData("kvr.sync");
  return v === null || v === undefined || (Buffer.from(v.value).readUInt32LE(16) & 1) !== 0;
};
/** Every gateway holds what its replica has published so far. */
async function synced(s: Stack): Promise<void> {
  const want = s.replicas.map((cp) => {
    cp?.publish();
    return cp?.log.version ?? 0;
  });
  await until("every gateway at its replica's version", () =>
    s.gateways.every((gw, g) => {
      const v = gw.host.sharedData("kvr.sync");
      return (
        v !== null &&
        Number(Buffer.from(v.value).readBigUInt64LE(8)) >= (want[s.preferred[g] as number] as number)
      );
    }),
  );
}
async function allSynced(s: Stack): Promise<void> {
  await until("every gateway synced from its preferred replica", () =>
    s.gateways.every(
      (_, g) => epochOf(s, g) === s.replicas[s.preferred[g] as number]?.epoch && !resyncing(s, g),
    ),
  );
}

const stacks: Stack[] = [];
let nats: NatsServer | null = null;
afterAll(async () => {
  for (const s of stacks) await s.close();
  await nats?.down();
});

describe.skipIf(skipReason !== null)("control-plane replicas over NATS, end to end", () => {
  let single: RunResult;

  it("a single replica: the baseline hit rate", { timeout: 120_000 }, async () => {
    const s = await startStack({ workers: 2, replicas: 1, gateways: GATEWAYS, threads: 2 });
    stacks.push(s);
    await allSynced(s);
    single = await run(s);
    expect(single.answers.every((a) => a.status === 200)).toBe(true);
    expect(single.hitRate).toBeGreaterThan(0.5);
    await s.close();
    stacks.splice(stacks.indexOf(s), 1);
  });

  it("two replicas: shared in-flight, a replica killed and NATS restarted mid-load fail nothing", {
    timeout: 180_000,
  }, async () => {
    nats = await NatsServer.start();
    const s = await startStack({ workers: 2, replicas: 2, gateways: GATEWAYS, threads: 2, nats: nats.url });
    stacks.push(s);
    const [a, b] = s.replicas as [ControlPlane, ControlPlane];
    await until(
      "the replicas hear each other",
      () => a.replicas?.peers().length === 1 && b.replicas?.peers().length === 1,
    );
    await allSynced(s);

    // In-flight: long requests held open on every gateway; each replica's per-slot view must equal
    // the sum over the gateways' own counts (gateway 1 reports to b, gateways 0 and 2 to a).
    const held = Array.from({ length: 12 }, (_, k) =>
      chat(s, k % GATEWAYS, `You are held request ${k}.`, "Tell a long story.", 2000),
    );
    const fleetView = (cp: ControlPlane) => {
      const m = new Map<number, number>();
      for (const slot of cp.slots.present()) {
        const n = cp.load.get(slot.id).inflight;
        if (n > 0) m.set(slot.id, n);
      }
      return m;
    };
    const gatewaySum = () => {
      const m = new Map<number, number>();
      for (const gw of s.gateways)
        for (const [slot, n] of gatewayInflight(gw)) if (n > 0) m.set(slot, (m.get(slot) ?? 0) + n);
      return m;
    };
    const total = (m: Map<number, number>) => [...m.values()].reduce((x, y) => x + y, 0);
    const same = (x: Map<number, number>, y: Map<number, number>) =>
      x.size === y.size && [...x].every(([k, v]) => y.get(k) === v);
    let settledAt = 0;
    await until("both replicas count every gateway's in-flight requests", () => {
      const truth = gatewaySum();
      if (total(truth) !== 12) return false;
      settledAt ||= performance.now();
      return same(fleetView(a), truth) && same(fleetView(b), truth);
    });
    console.log(
      `replica e2e: both replicas' in-flight matched the gateways' ${(performance.now() - settledAt).toFixed(0)} ms after the gateways counted all 12 (report interval ${REPORT_MS} ms)`,
    );
    expect((await Promise.all(held)).every((r) => r.status === 200)).toBe(true);

    // Failover: replica 0 (preferred by gateways 0 and 2) dies a third into the followers; NATS
    // restarts at two thirds.
    const items = GROUPS * (FOLLOWERS + 1);
    let failoverMs = 0;
    let failover: Promise<void> = Promise.resolve();
    let outage: Promise<void> = Promise.resolve();
    const replicated = await run(s, async (k) => {
      if (k === GROUPS + Math.floor((items - GROUPS) / 3)) {
        failover = (async () => {
          const t0 = performance.now();
          await s.stopReplica(0);
          await until("the killed replica's gateways resync from the other", () =>
            [0, 2].every((g) => epochOf(s, g) === b.epoch && !resyncing(s, g)),
          );
          failoverMs = performance.now() - t0;
        })();
      }
      if (k === GROUPS + Math.floor((2 * (items - GROUPS)) / 3)) {
        outage = (async () => {
          await nats?.down();
          await nats?.up();
        })();
      }
    });
    await failover;
    await outage;
    console.log(
      `replica e2e: hit rate ${(replicated.hitRate * 100).toFixed(1)} % with a replica killed and NATS restarted, ` +
        `${(single.hitRate * 100).toFixed(1)} % on a single replica; failover resync ${failoverMs.toFixed(0)} ms`,
    );
    expect(replicated.answers.filter((r) => r.status !== 200)).toEqual([]);
    expect(Math.abs(replicated.hitRate - single.hitRate)).toBeLessThanOrEqual(0.02);
    await until("b reconnects to NATS", () => b.replicas?.connected === true);
  });
});
