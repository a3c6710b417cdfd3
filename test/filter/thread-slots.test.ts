// Thread slots (filter/assembly/thread-slot.ts, docs/wire-format.md §4.5): every VM of a gateway
// publishes its in-flight requests under its own slot t (kvr.un.<t>), so two live VMs must never
// hold the same slot, and the slots must stay bounded however often VMs are replaced.
//
// Envoy's worker threads configure their VMs in parallel, and setting an absent shared-data key
// succeeds whatever the cas: the host's startInParallel runs the workers' start-up in the worst
// schedule (every VM reads before any VM writes). Envoy itself first configures proxy-wasm's
// configuration canary on the main thread (WasmHandleBase::canary), which happens to create the
// keys before its workers start; a claim that is race-free only after that is race-free by luck.
// Every config update and every FAIL_RELOAD starts one more VM: with a counter taken % 1024, the
// 1024th after the live ones lands on a live VM's slot.

import { afterEach, describe, expect, it } from "vitest";
import type { Host } from "../../host/host.ts";
import { WasmThread } from "../../host/thread.ts";
import { boardSum, boardThreads, readBoard } from "./board.ts";
import { destination, type ManualStack, startCompletion, startManualStack } from "./manual-stack.ts";

let s: ManualStack | null = null;
const extra: WasmThread[] = [];
afterEach(async () => {
  for (const t of extra.splice(0)) t.close();
  await s?.close();
  s = null;
});

const PROMPT = "The quick brown fox jumps over the lazy dog, again and again. ".repeat(9);

/** The slot VM `name` logged at its last on_configure ("configured root <id> (thread slot <t>, …"). */
function configuredSlot(h: Host, name: string): number {
  const logs = h.core.logs;
  for (let i = logs.length - 1; i >= 0; i--) {
    const r = logs[i];
    if (r === undefined || r.thread !== name) continue;
    const m = /kvroute: configured root \d+ \(thread slot (-?\d+)/.exec(r.message);
    if (m !== null) return Number(m[1]);
  }
  throw new Error(`${name} logged no thread slot`);
}

/** Slots handed out so far (kvr.threads). */
const handedOut = (h: Host) =>
  Buffer.from(h.sharedData("kvr.threads")?.value ?? new Uint8Array(4)).readUInt32LE(0);

/** The gateway's unanswered requests as its VMs publish them: the sum over the board's sections. */
function publishedUnanswered(h: Host): number {
  return boardSum(h, "unanswered");
}

/** VM thread slot t's section of the board, as JSON (stamps as strings); "" when it has none. */
function sectionOf(h: Host, t: number): string {
  const s = readBoard(h)?.sections.find((x) => x.thread === t);
  return s === undefined ? "" : JSON.stringify(s, (_k, v) => (typeof v === "bigint" ? String(v) : v));
}

/** A slot lease as kvr.th.<t> holds it: owner ticket u64, expiry u64 (ms). */
function lease(owner: bigint, expiresMs: number): Uint8Array {
  const b = Buffer.alloc(16);
  b.writeBigUInt64LE(owner, 0);
  b.writeBigUInt64LE(BigInt(expiresMs), 8);
  return new Uint8Array(b);
}

/** A new VM of the gateway's process (a canary, a reload, a new worker), started on its own. */
function startVm(h: Host, name: string): WasmThread {
  const t = new WasmThread(h.core, -2, name);
  extra.push(t);
  t.start();
  return t;
}

describe("thread slots", () => {
  it("VMs that configure at once (Envoy's workers) each claim a slot of their own, and each one's in-flight requests count", async () => {
    s = await startManualStack(3, { parallelStart: true });
    const h = s.host;
    const slots = s.vms.map((t) => configuredSlot(h, t.name));
    // Every VM read the slot counter absent before any wrote it; they must still not share a slot.
    expect([...slots].sort()).toEqual([0, 1, 2]);
    // One request in flight on each VM: the gateway's VMs publish all three (VMs sharing a slot
    // overwrite each other's section of the board, and the gateway would show one).
    const held = s.vms.map((t, i) => startCompletion(h, t, `${i} ${PROMPT}`));
    for (const r of held) expect(destination(r.sink)).not.toBeNull();
    s.round();
    expect(publishedUnanswered(h)).toBe(3);
  });

  it("VMs started over and over (a configuration canary per config update, a fresh VM per trap) never take a live VM's slot, and few slots are handed out", async () => {
    s = await startManualStack(2);
    const h = s.host;
    const live = s.vms.map((t) => configuredSlot(h, t.name));
    expect([...live].sort()).toEqual([0, 1, 2]);
    // 1100 short-lived VMs, one every 250 ms (a slot lease lasts 5 s): more than the 1024 slots.
    for (let i = 0; i < 1100; i++) {
      const canary = startVm(h, `canary_${i}`);
      const slot = configuredSlot(h, canary.name);
      canary.close();
      extra.pop();
      if (live.includes(slot)) throw new Error(`VM ${i} took slot ${slot}, held by a live VM`);
      s.round();
      s.clock.now += 230;
    }
    // The dead VMs' slots came back: the live ones plus the 5 s of leases still running.
    expect(handedOut(h)).toBeLessThanOrEqual(3 + 21);
    // And the live VMs still publish under their own slots.
    const held = s.vms.slice(1).map((t, i) => startCompletion(h, t, `${i} ${PROMPT}`));
    for (const r of held) expect(destination(r.sink)).not.toBeNull();
    s.round();
    expect(publishedUnanswered(h)).toBe(held.length);
  });

  it("a VM that finds every slot held goes without one (routes, never traps, publishes nothing) and claims the first slot whose lease lapses", async () => {
    s = await startManualStack(1);
    const h = s.host;
    const now = s.clock.now;
    // Slots 0 and 1 are the live VMs'; the other 1022 held by VMs that renew (seeded).
    expect(handedOut(h)).toBe(2);
    h.core.sharedData.set(h.core.vmId, "kvr.threads", new Uint8Array(Buffer.from([0, 4, 0, 0])), 0);
    for (let t = 2; t < 1024; t++)
      h.core.sharedData.set(h.core.vmId, `kvr.th.${t}`, lease(1_000_000n + BigInt(t), now + 60_000), 0);
    const late = startVm(h, "worker_late");
    expect(configuredSlot(h, late.name)).toBe(-1);
    expect(h.logs((m) => m.includes("no thread slot could be claimed"))).toHaveLength(1);
    const r = startCompletion(h, late, PROMPT);
    expect(destination(r.sink)).not.toBeNull();
    s.round([late]);
    expect(late.failed).toBe(false);
    expect(boardThreads(h).filter((t) => t !== 0 && t !== 1)).toEqual([]);
    // Slot 700's owner stops renewing: once its lease lapsed, the VM's next tick claims it.
    h.core.sharedData.set(h.core.vmId, "kvr.th.700", lease(1_000_700n, s.clock.now + 1_000), 0);
    for (let i = 0; i < 100 && !h.logs().includes("kvroute: claimed thread slot 700"); i++) s.round([late]);
    expect(h.logs((m) => m.startsWith("kvroute: claimed thread slot"))).toEqual([
      "kvroute: claimed thread slot 700",
    ]);
    s.round([late]);
    expect(publishedUnanswered(h)).toBe(1);
    expect(boardThreads(h)).toContain(700);
  });

  it("a VM whose ticks stalled past its lease loses its slot to a new VM without overwriting its counts, then claims another", async () => {
    s = await startManualStack(2);
    const h = s.host;
    const [main, w0, w1] = s.vms as [WasmThread, WasmThread, WasmThread];
    const stalled = configuredSlot(h, w1.name);
    // w1's thread stalls 6 s (its lease is 5 s) while the others tick.
    for (let i = 0; i < 300; i++) s.round([main, w0]);
    const fresh = startVm(h, "worker_fresh");
    expect(configuredSlot(h, fresh.name)).toBe(stalled);
    const a = startCompletion(h, fresh, `a ${PROMPT}`);
    expect(destination(a.sink)).not.toBeNull();
    const before = sectionOf(h, stalled);
    // w1 comes back with a request before its next tick: its lease lapsed, it does not publish.
    const b = startCompletion(h, w1, `b ${PROMPT}`);
    expect(destination(b.sink)).not.toBeNull();
    expect(sectionOf(h, stalled)).toEqual(before);
    // Its next tick finds the slot taken and claims another; both requests count.
    s.round([main, w0, w1, fresh]);
    expect(h.logs((m) => m.includes(`thread slot ${stalled} was taken over`))).toHaveLength(1);
    expect(publishedUnanswered(h)).toBe(2);
  });
});
