// Session affinity in the shipped filter (build/kvroute.wasm in the Node host) on a cache the test
// writes: requests of one session (the x-session-id header) stay on the slot the last one went to
// while that slot is a healthy candidate of the request's pool costing at most sessionMargin more
// than the best, before any KV event says the slot holds the conversation. A dead or overloaded
// slot lets the session move; a session learned in one pool, or a fleet entry naming a slot of
// another pool or none, never takes a request outside its pool; the table forgets a session after
// its TTL, stays within its bound however many sessions there are, never holds the id itself, and
// a huge or empty session header is ignored and counted.
import { afterEach, describe, expect, it } from "vitest";
import xxhash from "xxhash-wasm";
import { encodeReport } from "../../control-plane/src/reports/report-codec.ts";
import { chat, type Routed, ShippedFilter } from "../filter-core/shipped-filter.ts";

const SESSION = "x-session-id";
/** The filter's session hash seed (filter/core/session-affinity.ts). */
const SESSION_SEED = 0x5345535349n;
const { h64Raw } = await xxhash();
const hashOf = (id: string) => h64Raw(new TextEncoder().encode(id), SESSION_SEED);

let f: ShippedFilter;
afterEach(() => f?.close());

const counter = (name: string) => Number(f.host.counter(`kvroute.session.${name}`) ?? 0);

/** Routes one request of `session` (none: no header) and ends it at once, so no queue builds up. */
function once(body: string, session?: string, extra: Array<[string, string]> = []): Routed {
  const r = f.route(body, { headers: session === undefined ? extra : [[SESSION, session], ...extra] });
  f.finish(r);
  return r;
}

/** A prompt no other request of the test shares a chunk with. */
let seq = 0;
const fresh = (model = "qwen3") =>
  chat(`system prompt number ${++seq} of this test`, `question ${seq}`, model);

/** Every slot of pool `qwen` idle and healthy, but `each` (slot → waiting). */
function setWaiting(each: Record<number, number>) {
  for (const s of f.slots.all())
    f.load.scraped(s.id, { running: 0, waiting: each[s.id] ?? 0, kvUsage: 0 }, 0);
  f.publishLoad();
  f.tick();
}

/** Writes a fleet entry (kvr.sc, the control plane's) for session `id` → `slot` until `expires`. */
function fleetEntry(id: string, slot: number, expires = 2n ** 64n - 1n) {
  const h = hashOf(id);
  const v = Buffer.alloc(4 + 24);
  v.writeUInt8(1, 0);
  v.writeBigUInt64LE(h, 4);
  v.writeBigUInt64LE(expires, 12);
  v.writeUInt16LE(slot, 24);
  f.host.core.sharedData.set("kvroute", `kvr.sc.${Number(h & 1023n)}`, v, 0);
}

const qwenSlots = () =>
  f.slots
    .all()
    .filter((s) => s.pool === "qwen")
    .map((s) => s.id);
const otherSlots = () =>
  f.slots
    .all()
    .filter((s) => s.pool === "other")
    .map((s) => s.id);

describe("session affinity", () => {
  it("keeps each session on its slot before KV events confirm it, while the load is even", () => {
    f = new ShippedFilter();
    const first = new Map<string, number>();
    for (let i = 0; i < 12; i++) {
      // A new load image each time: the gateway's order of equal slots (route-decision.ts) is new.
      f.publishLoad();
      f.tick();
      first.set(`chat-${i}`, once(fresh(), `chat-${i}`).slot);
    }
    expect(counter("new")).toBe(12);
    // Balanced load and a prompt no slot holds: without the session each pick follows the
    // gateway's order of equal slots, new with every load image.
    f.publishLoad();
    f.tick();
    for (const [id, slot] of first) expect(once(fresh(), id).slot).toBe(slot);
    for (const [id, slot] of first) expect(once(fresh(), id).slot).toBe(slot);
    expect(counter("kept")).toBe(24);
    expect(counter("moved")).toBe(0);
    // The ties really are spread: the sessions did not all land on one slot by chance.
    expect(new Set(first.values()).size).toBeGreaterThan(1);
  });

  it("moves a session whose slot died, and keeps it on the new slot", () => {
    f = new ShippedFilter();
    const slot = once(fresh(), "s").slot;
    f.load.failed(slot);
    f.publishLoad();
    f.tick();
    const moved = once(fresh(), "s").slot;
    expect(moved).not.toBe(slot);
    expect(qwenSlots()).toContain(moved);
    expect(counter("moved")).toBe(1);
    // The old slot is back; the session stays where its cache now is.
    setWaiting({});
    for (let i = 0; i < 6; i++) expect(once(fresh(), "s").slot).toBe(moved);
    expect(counter("kept")).toBe(6);
  });

  it("keeps a session while its slot costs at most sessionMargin over the best, moves it past that", () => {
    // One queued request of unknown size costs 512 prefill tokens (QUEUED_TOKENS).
    f = new ShippedFilter({ routing: { sessionMargin: 1024 } });
    const slot = once(fresh(), "s").slot;
    setWaiting({ [slot]: 2 }); // 1024 over the idle slots: within the margin
    for (let i = 0; i < 4; i++) expect(once(fresh(), "s").slot).toBe(slot);
    expect(counter("kept")).toBe(4);
    setWaiting({ [slot]: 3 }); // 1536 over: overloaded
    const moved = once(fresh(), "s").slot;
    expect(moved).not.toBe(slot);
    expect(counter("moved")).toBe(1);
  });

  it("with sessionMargin 0 a session stays only on a slot as cheap as the best", () => {
    f = new ShippedFilter({ routing: { sessionMargin: 0 } });
    const slot = once(fresh(), "s").slot;
    for (let i = 0; i < 4; i++) expect(once(fresh(), "s").slot).toBe(slot);
    setWaiting({ [slot]: 1 });
    expect(once(fresh(), "s").slot).not.toBe(slot);
  });

  it("never takes a request outside its pool: a session learned in another pool, a forged fleet entry", () => {
    f = new ShippedFilter();
    const inQwen = once(fresh(), "shared").slot;
    expect(qwenSlots()).toContain(inQwen);
    // The same session id with a model of pool `other`: its slot is no candidate there.
    for (let i = 0; i < 4; i++) expect(otherSlots()).toContain(once(fresh("other"), "shared").slot);
    expect(counter("moved")).toBeGreaterThanOrEqual(1);
    // A fleet entry (kvr.sc, the control plane's) naming a slot of `other`, one naming no slot at
    // all, one naming a slot past the bitmap: each is only a preference, never a destination.
    fleetEntry("forged-other", otherSlots()[0] as number);
    fleetEntry("forged-none", 60);
    fleetEntry("forged-huge", 65535);
    for (const id of ["forged-other", "forged-none", "forged-huge"]) {
      const r = once(fresh(), id);
      expect(r.forwarded).not.toBeNull();
      expect(qwenSlots()).toContain(r.slot);
    }
    // A client rank pin decides alone: the session neither steers nor learns it.
    f.close();
    f = new ShippedFilter({ routing: { rankHeaderPolicy: { mode: "honor", trustedCidrs: ["0.0.0.0/0"] } } });
    const pinned = f.route(fresh(), {
      headers: [
        [SESSION, "p"],
        ["x-data-parallel-rank", "2"],
      ],
      source: "10.0.0.9",
    });
    f.finish(pinned);
    expect(pinned.outcome).toBe("pinned");
    expect(counter("new") + counter("kept") + counter("moved")).toBe(0);
  });

  it("follows the fleet's entry when it is newer than the gateway's own, and only while it lasts", () => {
    f = new ShippedFilter();
    const [a, b] = qwenSlots() as [number, number];
    // The fleet says the session's latest request (through another gateway) went to `b`.
    fleetEntry("roaming", b, BigInt(f.clock.now + 1000));
    expect(once(fresh(), "roaming").slot).toBe(b);
    // Now this gateway's own record (expiring in sessionTtlMs) is the newer one: the fleet's
    // older entry for `a` changes nothing.
    fleetEntry("roaming", a, BigInt(f.clock.now + 1000));
    for (let i = 0; i < 3; i++) expect(once(fresh(), "roaming").slot).toBe(b);
    // A fleet entry newer than this gateway's record wins.
    fleetEntry("roaming", a, BigInt(f.clock.now + 3_600_000));
    for (let i = 0; i < 3; i++) expect(once(fresh(), "roaming").slot).toBe(a);
    // An expired fleet entry is no entry.
    fleetEntry("elsewhere", b, BigInt(f.clock.now - 1));
    once(fresh(), "elsewhere");
    expect(counter("new")).toBe(1);
    expect([counter("kept"), counter("moved")]).toEqual([7, 0]);
  });

  it("forgets a session after sessionTtlMs", () => {
    f = new ShippedFilter({ routing: { sessionTtlMs: 5000 } });
    once(fresh(), "s");
    f.clock.now += 4000;
    once(fresh(), "s");
    expect(counter("kept")).toBe(1);
    f.clock.now += 5001;
    once(fresh(), "s");
    expect(counter("new")).toBe(2);
  });

  it("ignores and counts a huge or empty session header, and routes the request as any other", () => {
    f = new ShippedFilter();
    const huge = "x".repeat(1 << 20);
    for (let i = 0; i < 3; i++) {
      const r = once(fresh(), huge);
      expect(r.forwarded?.get(SESSION)?.length).toBe(1 << 20);
      expect(qwenSlots()).toContain(r.slot);
    }
    once(fresh(), "");
    expect(counter("invalid")).toBe(4);
    expect(counter("new") + counter("kept")).toBe(0);
    // 256 bytes is the longest id used; odd bytes are just bytes.
    const long = "~;,\t".repeat(64);
    const slot = once(fresh(), long).slot;
    expect(once(fresh(), long).slot).toBe(slot);
    expect(counter("kept")).toBe(1);
  });

  it("off when sessionHeader is empty", () => {
    f = new ShippedFilter({ routing: { sessionHeader: "" } });
    for (let i = 0; i < 4; i++) once(fresh(), "s");
    expect(counter("new") + counter("kept") + counter("moved") + counter("invalid")).toBe(0);
  });

  it("stays within its bound in shared data however many sessions come, and never holds an id", () => {
    f = new ShippedFilter();
    const body = fresh();
    const before = f.host.core.sharedData.keys("kvroute").length;
    for (let i = 0; i < 9000; i++) once(body, `session-id-${i}`);
    // The gateway's sessions live in its VMs (a fixed table) and travel on the board's fixed ring:
    // no key per session, and no id anywhere in shared data.
    const keys = f.host.core.sharedData.keys("kvroute");
    expect(keys.filter((k) => k.startsWith("kvr.ss."))).toEqual([]);
    expect(keys.length).toBeLessThanOrEqual(before + 1);
    for (const k of keys) {
      const v = f.host.core.sharedData.get("kvroute", k)?.value as Uint8Array;
      expect(Buffer.from(v).includes("session-id-")).toBe(false);
    }
    // The table still holds the latest sessions: the last one keeps its slot.
    const last = once(body, "session-id-8999").slot;
    expect(counter("kept")).toBeGreaterThanOrEqual(1);
    expect(qwenSlots()).toContain(last);
  });

  it("reports session routes by hash, never the id", () => {
    f = new ShippedFilter();
    const t0 = f.clock.now;
    const slot = once(fresh(), "reported-session").slot;
    f.tick();
    const t1 = f.clock.now;
    once(fresh(), "reported-session");
    for (let i = 0; i < 8; i++) f.tick();
    const sessions = f.reports.flatMap((r) => r.sessions ?? []);
    // Each with the expiry the gateway gave it: its request + sessionTtlMs (600 s by default).
    expect(sessions).toEqual([
      { slot, outcome: 0, hash: hashOf("reported-session"), expiresMs: BigInt(t0 + 600_000) },
      { slot, outcome: 1, hash: hashOf("reported-session"), expiresMs: BigInt(t1 + 600_000) },
    ]);
    for (const r of f.reports) expect(Buffer.from(encodeReport(r)).includes("reported-session")).toBe(false);
  });
});
