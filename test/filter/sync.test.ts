// Leader election across worker threads (timer ticks, real control plane), handover when the
// leader dies, routing on a stale cache while the control plane is down, and a full resync when a
// new control plane (a new epoch) answers. Every wait is on a condition; the exact timing of a
// takeover is checked on a test clock in leader.test.ts.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { pollers } from "./fake-control-plane.ts";
import { chatBody, post, QWEN, type Stack, startStack, synced, TOKEN, until } from "./harness.ts";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ engines: [[0, 1, 2, 3]], threads: 4 });
  await until(() => stack.cp.ready(), "control plane ready");
  await synced(stack);
});
afterAll(async () => stack?.close());

/** VMs with an outstanding /v1/sync call: the leader's long poll. */
const polling = () => pollers(stack.gateway.host).filter((t) => !t.failed);
const syncedEpoch = () =>
  Buffer.from(stack.gateway.host.sharedData("kvr.sync")?.value ?? new Uint8Array(16)).readBigUInt64LE(0);

describe("leader election and sync", () => {
  it("has exactly one VM polling the control plane, and always the same one", async () => {
    const leaders = new Set<string>();
    const sample = () => {
      const now = polling();
      expect(now.length).toBeLessThanOrEqual(1);
      for (const t of now) leaders.add(t.name);
    };
    // Five new versions, each synced by long polls; every check of the wait samples the pollers.
    for (let i = 0; i < 5; i++) {
      stack.cp.index.chunks.speculate(BigInt(1000 + i), 1, 0, Date.now(), Date.now() + 60_000);
      stack.cp.publish();
      const want = BigInt(stack.cp.log.version);
      await until(() => {
        sample();
        const v = stack.gateway.host.sharedData("kvr.sync");
        return v !== null && Buffer.from(v.value).readBigUInt64LE(8) >= want;
      }, `sync to version ${want}`);
    }
    expect(leaders.size).toBe(1);
  });

  it("hands the lease over when the leader's VM dies, and the new leader keeps the cache current", async () => {
    await until(() => polling().length === 1, "a leader");
    const leader = polling()[0];
    if (leader === undefined) throw new Error("no leader");
    leader.fail("test: the leader's VM stopped");
    await until(() => polling().some((t) => t !== leader), "another VM to take the lease");
    stack.cp.index.chunks.speculate(12345n, 1, 0, Date.now(), Date.now() + 60_000);
    await synced(stack);
    expect(polling()).toHaveLength(1);
  });

  it("keeps routing on the last cache while the control plane is down, then resyncs from a new epoch", async () => {
    // A fresh gateway: no VM failed by the test above.
    await stack.close();
    stack = await startStack({ engines: [[0, 1, 2, 3]], threads: 2 });
    await until(() => stack.cp.ready(), "control plane ready");
    await synced(stack);
    const address = new URL(stack.cp.url).host;
    const oldEpoch = stack.cp.epoch;
    expect(syncedEpoch()).toBe(oldEpoch);
    await stack.cp.stop();
    const errorsBefore = Number(stack.gateway.host.counter("kvroute.sync.errors") ?? 0);
    // Zero failed requests while the control plane is gone: the cache is stale but valid.
    for (let i = 0; i < 30; i++) {
      const r = await post(stack, "/v1/chat/completions", chatBody("s", `while down ${i}`));
      expect(r.status).toBe(200);
    }
    await until(
      () => Number(stack.gateway.host.counter("kvroute.sync.errors") ?? 0) > errorsBefore,
      "sync errors counted",
    );

    const cfg = parseConfig(
      {
        authToken: TOKEN,
        pools: [
          {
            name: "qwen",
            models: ["qwen3"],
            tokenizer: QWEN,
            endpoints: [{ address: stack.engines[0]?.address, ranks: [0, 1, 2, 3] }],
          },
        ],
        cache: { buckets: 256, ways: 16 },
        load: { scrapeIntervalMs: 50 },
        sync: { longPollMs: 300 },
      },
      "test",
      {},
    );
    stack.cp = await startControlPlane(cfg, { listen: address, logger: pino({ level: "silent" }) });
    expect(stack.cp.epoch).not.toBe(oldEpoch);
    await until(() => syncedEpoch() === stack.cp.epoch, "resync to the new epoch", 8000);
    await synced(stack);
    expect(Number(stack.gateway.host.counter("kvroute.sync.resets") ?? 0)).toBeGreaterThanOrEqual(2);
  });
});
