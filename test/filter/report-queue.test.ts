// Report records travel to the leader in one batch per VM per tick, and the shared queue stays
// bounded while no leader drains it (Envoy's queues have no limit): a VM enqueues again only after
// the leader emptied the queue, and records past a full outbox are dropped and counted. The filter
// runs in a host whose ticks and clock the test drives, synced from a real control plane.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { WasmThread } from "../../host/thread.ts";
import { until } from "./harness.ts";
import {
  complete,
  destination,
  finishedAtControlPlane,
  type ManualStack,
  startManualStack,
} from "./manual-stack.ts";

/** filter/assembly/report-queue.ts OUTBOX_BYTES */
const OUTBOX_BYTES = 512 * 1024;

let s: ManualStack;
let worker: WasmThread;

const depth = () => s.host.core.queues.depth("kvroute", "kvr.reports");
const queuedBytes = () => s.host.core.queues.bytes("kvroute", "kvr.reports");
const dropped = () => Number(s.host.counter("kvroute.reports.dropped") ?? 0);

beforeAll(async () => {
  s = await startManualStack(2);
  worker = s.host.threads.find((t) => t !== s.leader) as WasmThread;
}, 60_000);

afterAll(async () => s?.close());

describe("the report queue", () => {
  it("takes one batch per VM per tick, not one message per request", () => {
    expect(depth()).toBe(0);
    const before = s.host.core.queues.enqueued;
    const sinks = Array.from({ length: 40 }, (_, i) => complete(s.host, worker, `batch test ${i}`));
    expect(sinks.every((k) => destination(k) !== null)).toBe(true);
    // Nothing is enqueued on the request path.
    expect(s.host.core.queues.enqueued).toBe(before);
    expect(depth()).toBe(0);
    s.round([worker]);
    expect(s.host.core.queues.enqueued).toBe(before + 1);
    expect(depth()).toBe(1);
    s.round([worker]);
    expect(s.host.core.queues.enqueued).toBe(before + 1);
  });

  it("stays bounded while no leader drains it; records past a full outbox are dropped and counted; a drain lets them flow again", async () => {
    // The clock stands still and the leader does not tick: its lease never lapses, so nobody
    // takes over, and nobody drains. The worker's batch from the test above is still queued.
    expect(depth()).toBe(1);
    const others = s.host.vms().filter((t) => t !== s.leader);
    const enqueuedBefore = s.host.core.queues.enqueued;
    const long = "The quick brown fox jumps over the lazy dog. ".repeat(730); // ~32 KiB: 256 chunks
    let n = 0;
    while (dropped() === 0 && n < 2000) {
      expect(destination(complete(s.host, worker, `${n} ${long}`))).not.toBeNull();
      n++;
      if (n % 50 === 0) s.host.tick({ vms: others });
    }
    expect(dropped()).toBeGreaterThan(0);
    for (let i = 0; i < 100; i++) complete(s.host, worker, `${i} more ${long}`);
    s.host.tick({ vms: others });
    // However many requests: still the one batch per VM, at most OUTBOX_BYTES each.
    expect(s.host.core.queues.enqueued).toBe(enqueuedBefore);
    expect(depth()).toBe(1);
    expect(queuedBytes()).toBeLessThanOrEqual(OUTBOX_BYTES);
    console.log(
      `report queue: ${n + 100} requests with a ~32 KiB prompt while undrained → queue ${depth()} message(s), ` +
        `${queuedBytes()} bytes; ${dropped()} records dropped (outbox ${OUTBOX_BYTES} bytes per VM)`,
    );
    // The leader ticks again: it drains, and the worker's kept records follow in the next batch.
    const finished = await finishedAtControlPlane(s.cp);
    await until(async () => {
      s.round();
      return depth() === 0 && (await finishedAtControlPlane(s.cp)) > finished + 40;
    }, "the kept records at the control plane");
  }, 60_000);
});
