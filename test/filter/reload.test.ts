// FAIL_RELOAD (Envoy's default when no failure_policy is set): a worker VM that trapped is replaced
// by a fresh one on its thread's next request, which runs _start and on_configure again. The filter
// must come back whole: a thread slot of its own, the report queue registered again, its records
// reaching the control plane, and the failed VM's in-flight requests (gone with it) counted no more.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { WasmThread } from "../../host/thread.ts";
import { until } from "./harness.ts";
import {
  complete,
  destination,
  finishedAtControlPlane,
  type ManualStack,
  startCompletion,
  startManualStack,
} from "./manual-stack.ts";

let s: ManualStack;
beforeAll(async () => {
  s = await startManualStack(1);
}, 60_000);
afterAll(async () => s?.close());

const threadSlots = () =>
  Buffer.from(s.host.sharedData("kvr.threads")?.value ?? new Uint8Array(4)).readUInt32LE(0);
const reporting = () =>
  [...s.leader.httpCalls.values()].some((c) => c.path.startsWith("/v1/report")) ||
  s.host.vms().some((t) => t.failed && t === s.leader);

/** One round, then wait until the leader's report of that round (if any) was answered. */
async function settledRound(vms?: WasmThread[]): Promise<void> {
  s.round(vms);
  await until(() => !reporting(), "the leader's report answered");
}

/** The control plane's in-flight count for the slot at `address` rank `rank`. */
function inflightAt(address: string, rank: string): number {
  const slot = s.cp.slots.present().find((x) => x.address === address && String(x.globalRank) === rank);
  return slot === undefined ? -1 : s.cp.load.get(slot.id).inflight;
}

describe("a worker VM replaced after a trap (FAIL_RELOAD)", () => {
  it("comes back with its own thread slot and queue registration, and the dead VM's in-flight requests stop counting within a few ticks", async () => {
    const h = s.host;
    expect(h.core.failurePolicy).toBe("FAIL_RELOAD");
    const worker = h.threads[0] as WasmThread;
    expect(s.leader).not.toBe(worker);
    // A request in flight on the worker: counted in its kvr.un.<t> and, via the leader, upstream.
    const held = startCompletion(h, worker, "held while the VM dies");
    const dest = destination(held.sink);
    const rank = held.sink.of("reqHeaders")[0]?.headers.find(([k]) => k === "x-data-parallel-rank")?.[1];
    if (dest === null || rank === undefined) throw new Error("not routed");
    await until(async () => {
      await settledRound();
      return inflightAt(dest, rank) === 1;
    }, "the in-flight request counted at the control plane");
    const slotsBefore = threadSlots();

    worker.fail("test: the worker's VM trapped");
    // 1.5 × the 1 s reload backoff later, the thread's next stream gets a fresh VM.
    for (let i = 0; i < 75; i++) await settledRound();
    const fresh = h.pickThread();
    expect(fresh).not.toBe(worker);
    expect(h.reloads).toBe(1);
    expect(threadSlots()).toBe(slotsBefore + 1);
    // The fresh VM routes and its records reach the control plane through the leader.
    const finished = await finishedAtControlPlane(s.cp);
    for (let i = 0; i < 5; i++)
      expect(destination(complete(h, fresh, `after the reload ${i}`))).not.toBeNull();
    await until(async () => {
      await settledRound();
      return (await finishedAtControlPlane(s.cp)) >= finished + 5;
    }, "the fresh VM's records at the control plane");
    // The dead VM stopped publishing when it failed: 75 rounds = 1.5 s of ticks later its
    // request is no longer in the leader's reports (it died with the VM: Envoy answered it 503).
    expect(inflightAt(dest, rank)).toBe(0);
  }, 60_000);
});
