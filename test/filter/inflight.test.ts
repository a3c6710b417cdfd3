// The in-flight accounting end to end (filter/core/queued-work.ts): a gateway (build/kvroute.wasm
// in the host, ticks by hand) synced from a real control plane that scrapes a fake engine and
// takes the gateway's reports. A finished request stops counting at once on the VM that sent it,
// and at once on the gateway's other VMs (the board, kvr.gwb), long before the fleet count drops;
// a request the engine's metrics show stops counting as unseen, in the fleet count too.
import { afterEach, describe, expect, it } from "vitest";
import { headers } from "../../host/host.ts";
import type { WasmThread } from "../../host/thread.ts";
import { boardSum, readBoard } from "./board.ts";
import { until } from "./harness.ts";
import { destination, type ManualStack, startCompletion, startManualStack } from "./manual-stack.ts";

let stack: ManualStack | null = null;
afterEach(async () => {
  await stack?.close();
  stack = null;
});

// A short prompt: 4 chunks of 128 bytes, a cached prefix worth ~128 tokens of prefill — less than
// one request of unknown size in a queue (512 tokens), so a phantom queued request outweighs it.
const PROMPT = "The quick brown fox jumps over the lazy dog, again and again. ".repeat(9);

/** Slot id of a destination + rank header (the fake engine's pool: internal LB, global ranks). */
function slotOf(s: ManualStack, sink: ReturnType<typeof startCompletion>["sink"]): number {
  const rank = Number(sink.of("reqHeaders")[0]?.headers.find(([k]) => k === "x-data-parallel-rank")?.[1]);
  const slot = s.cp.slots.all().find((x) => x.address === destination(sink) && x.globalRank === rank);
  if (slot === undefined) throw new Error("not routed to a known slot");
  return slot.id;
}

/** kvr.load's fleet count for `slot`, as the gateway holds it in shared data. */
function fleetCount(s: ManualStack, slot: number): number {
  const v = s.host.sharedData("kvr.load");
  if (v === null) return -1;
  const b = Buffer.from(v.value);
  const stride = b.readUInt16LE(8);
  return b.readUInt32LE(12 + slot * stride + 8);
}

/** The running count kvr.load holds for `slot`. */
function loadRunning(s: ManualStack, slot: number): number {
  const v = s.host.sharedData("kvr.load");
  if (v === null) return -1;
  const b = Buffer.from(v.value);
  const stride = b.readUInt16LE(8);
  return b.readUInt16LE(12 + slot * stride + 2);
}

/** The unanswered requests the VMs publish as unseen at `slot` (their sections of the board, kvr.gwb). */
function unseenAt(s: ManualStack, slot: number): number {
  return boardSum(s.host, "unseen", slot);
}

/** Rounds of ticks until `cond`, letting the control plane's sockets and timers run between them. */
async function roundsUntil(s: ManualStack, cond: () => boolean, what: string): Promise<void> {
  await until(() => {
    s.round();
    return cond();
  }, what);
}

describe("in-flight accounting", () => {
  it("a finished request stops counting at once on the VM that sent it, though the fleet count still has it", async () => {
    stack = await startManualStack(2);
    const s = stack;
    const [a, b] = s.host.threads as [WasmThread, WasmThread];
    const first = startCompletion(s.host, a, PROMPT);
    const x = slotOf(s, first.sink);
    // The engine does not show it (the fake engine reports nothing running): it is unseen, and
    // the report puts it into the fleet count every gateway reads.
    await roundsUntil(s, () => fleetCount(s, x) === 1, "the fleet count holds the request");
    first.stream.encodeHeaders(headers([[":status", "200"]]), true);
    // No tick, no report since: kvr.load still says one unseen request at x. The VM that sent it
    // knows it ended, and that the count is its own: the short cached prefix wins.
    expect(fleetCount(s, x)).toBe(1);
    const again = startCompletion(s.host, a, PROMPT);
    expect(slotOf(s, again.sink)).toBe(x);
    again.stream.encodeHeaders(headers([[":status", "200"]]), true);
    // Elsewhere (another VM) the count is someone else's request until the next report says it
    // ended: within one report the slot is free for everyone.
    await roundsUntil(s, () => fleetCount(s, x) === 0, "the next report clears the fleet count");
    s.round();
    const elsewhere = startCompletion(s.host, b, PROMPT);
    expect(slotOf(s, elsewhere.sink)).toBe(x);
  });

  it("another thread's request counts on this gateway's other threads at once, before any report", async () => {
    stack = await startManualStack(2);
    const s = stack;
    const [a, b] = s.host.threads as [WasmThread, WasmThread];
    // Three requests of different prompts from thread a take three of the four ranks. (Prompts of
    // ~560 tokens: a queued one outweighs the gateway's order of near-equal slots, 128 tokens.)
    const long = PROMPT.repeat(4);
    const taken = new Set<number>();
    for (const tag of ["one", "two", "three"])
      taken.add(slotOf(s, startCompletion(s.host, a, `${tag} ${long}`).sink));
    expect(taken.size).toBe(3);
    // No tick since, and the control plane has not been told (no report is answered without a
    // turn of the event loop): thread b knows them from a's section of the board alone and takes the free rank.
    for (const x of taken) expect(fleetCount(s, x)).toBe(0);
    const next = slotOf(s, startCompletion(s.host, b, `four ${long}`).sink);
    expect(taken.has(next)).toBe(false);
  });

  it("another thread's finished request stops counting at once on this gateway's other threads, though the fleet count still has it", async () => {
    stack = await startManualStack(2);
    const s = stack;
    const [a, b] = s.host.threads as [WasmThread, WasmThread];
    const first = startCompletion(s.host, a, PROMPT);
    const x = slotOf(s, first.sink);
    await roundsUntil(s, () => fleetCount(s, x) === 1, "the fleet count holds the request");
    first.stream.encodeHeaders(headers([[":status", "200"]]), true);
    // Thread a publishes at once that it has nothing at x; thread b reads it before deciding. The
    // count in kvr.load is this gateway's own report (kvr.ifr says so): no one else's request.
    expect(fleetCount(s, x)).toBe(1);
    const elsewhere = startCompletion(s.host, b, PROMPT);
    expect(slotOf(s, elsewhere.sink)).toBe(x);
  });

  it("a VM's board entry names when the slot started on its requests, and the next request there keeps it", async () => {
    stack = await startManualStack(2);
    const s = stack;
    const [a] = s.host.threads as [WasmThread, WasmThread];
    const wrap = (ms: number) => Math.floor(ms) % 2 ** 32;
    const before = wrap(s.host.core.now());
    // The same prompt again goes where the first is queued when its prefix, cached there by this
    // gateway's speculative route, outweighs the first request's queued prefill: by a quarter of
    // the prompt (inflightWeight 0.75). That margin must exceed the gateway's order of near-equal
    // slots (up to GATEWAY_SPREAD, 128 tokens, seeded by the load image's round): with PROMPT's
    // ~140 tokens it did not, and the second request went elsewhere whenever the start-up's syncs
    // left an order that favoured another slot (3 runs in 10 beside other load). ~1,100 here.
    const long = PROMPT.repeat(8);
    const first = startCompletion(s.host, a, long);
    const after = wrap(s.host.core.now());
    const x = slotOf(s, first.sink);
    const entry = () =>
      readBoard(s.host)
        ?.sections.flatMap((e) => e.entries)
        .find((e) => e.slot === x);
    const since = entry()?.since ?? -1;
    expect(since).toBeGreaterThanOrEqual(before);
    expect(since).toBeLessThanOrEqual(after);
    // A second request at x while the first is unanswered: the slot is still on the first, so the
    // queue's start stays (and an unchanged entry is why a tick rewrites nothing). The gateway's
    // clock moves on, not the wall clock: waiting on a timer let the answer to one of the gateway's
    // HTTP calls (its sync poll) land in between, which moved the second request to another slot
    // (a CI run beside other load; a 400 ms wait fails 1 run in 3).
    s.clock.now += 5;
    const again = startCompletion(s.host, a, long);
    expect(slotOf(s, again.sink)).toBe(x);
    expect(entry()?.unanswered).toBe(2);
    expect(entry()?.since).toBe(since);
  });

  it("a request the engine's metrics show is no longer unseen: the fleet count drops while it runs", async () => {
    stack = await startManualStack(1);
    const s = stack;
    const t = s.host.threads[0] as WasmThread;
    const r = startCompletion(s.host, t, PROMPT);
    const x = slotOf(s, r.sink);
    await roundsUntil(s, () => fleetCount(s, x) === 1, "the fleet count holds the unseen request");
    // The engine's next scrape shows it running. One load change is not enough (that scrape may
    // predate the request); the VM still publishes it as unseen.
    const rank = s.cp.slots.get(x)?.globalRank as number;
    s.engine.running[rank] = 1;
    await roundsUntil(s, () => loadRunning(s, x) === 1, "the gateway has the changed load");
    s.round();
    expect(unseenAt(s, x)).toBe(1);
    // A second change: now the scrapes show it; the next report takes it out of the fleet count —
    // while the request is still open.
    s.engine.running[rank] = 2;
    await roundsUntil(s, () => fleetCount(s, x) === 0, "the report no longer counts it");
    expect(unseenAt(s, x)).toBe(0);
    expect(r.stream.completed).toBe(false);
  });
});
