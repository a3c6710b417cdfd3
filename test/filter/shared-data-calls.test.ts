// The request path's shared-data budget (docs/wire-format.md §4.5 "What a request reads and
// writes"): a decision reads the gateway board and writes it once; the buckets its prefix walk
// needs are read only when this VM does not hold them yet (or the board says the sync rewrote
// them); a request's end reads and writes the board once more, so the other VMs stop counting it —
// unless nothing of it is still counted there (answered, and the engine's metrics show it).
// Counted at the host's shared-data store, through the shipped module — not timed.
import { afterEach, describe, expect, it } from "vitest";
import { chat, type Routed, ShippedFilter } from "../filter-core/shipped-filter.ts";
import { boardSum } from "./board.ts";

let f: ShippedFilter;
afterEach(() => f?.close());

interface Calls {
  reads: string[];
  writes: string[];
}

/** The shared-data keys `run` reads and writes. */
function counted<T>(run: () => T): { result: T; calls: Calls } {
  const store = f.host.core.sharedData;
  const get = store.get;
  const set = store.set;
  const calls: Calls = { reads: [], writes: [] };
  store.get = (vmId, key, copy) => {
    calls.reads.push(key);
    return get.call(store, vmId, key, copy);
  };
  store.set = (vmId, key, value, cas) => {
    calls.writes.push(key);
    return set.call(store, vmId, key, value, cas);
  };
  try {
    return { result: run(), calls };
  } finally {
    store.get = get;
    store.set = set;
  }
}

const SYSTEM = "You are a careful assistant. ".repeat(40);

describe("shared-data calls per request", () => {
  it("a decision reads the board and writes it once; a prefix this VM walked before reads no bucket", () => {
    f = new ShippedFilter();
    const body = chat(SYSTEM, "first question");
    f.hold(body, 1);
    f.publish();
    f.tick();
    // The first time, the walk reads the buckets it probes.
    const first = counted(() => f.route(body));
    expect(first.result.outcome).toBe("prefix_hit");
    expect(first.calls.reads.filter((k) => k === "kvr.gwb")).toHaveLength(1);
    expect(first.calls.reads.some((k) => k.startsWith("kvr.b."))).toBe(true);
    expect(first.calls.writes).toEqual(["kvr.gwb"]);
    const end = counted(() => f.finish(first.result));
    expect(end.calls.reads).toEqual(["kvr.gwb"]);
    expect(end.calls.writes).toEqual(["kvr.gwb"]);
    // Another question after the same system prompt: the prompt's buckets are held, only its
    // new tail's may be read.
    const firstBuckets = first.calls.reads.filter((k) => k.startsWith("kvr.b.")).length;
    const other = counted(() => f.route(chat(SYSTEM, "second question")));
    expect(other.result.slot).toBe(first.result.slot);
    expect(other.calls.reads.filter((k) => k.startsWith("kvr.b.")).length).toBeLessThan(firstBuckets);
    expect(other.calls.reads.filter((k) => !k.startsWith("kvr.b."))).toEqual(["kvr.gwb"]);
    expect(other.calls.writes).toEqual(["kvr.gwb"]);
    f.finish(other.result);
    const repeat = counted(() => f.route(body));
    expect(repeat.calls.reads).toEqual(["kvr.gwb"]);
    expect(repeat.calls.writes).toEqual(["kvr.gwb"]);
    f.finish(repeat.result);
  });

  it("a bucket the sync rewrote is read again, once", () => {
    f = new ShippedFilter();
    const body = chat(SYSTEM, "q");
    f.hold(body, 1);
    f.publish();
    f.tick();
    f.finish(f.route(body));
    const warm = counted(() => f.route(body));
    f.finish(warm.result);
    expect(warm.calls.reads).toEqual(["kvr.gwb"]);
    // The prompt moves to slot 2: the leader applies the new buckets and tells the VMs.
    f.hold(body, 2);
    f.publish();
    f.tick();
    const after = counted(() => f.route(body));
    f.finish(after.result);
    expect(after.calls.reads.filter((k) => k.startsWith("kvr.b.")).length).toBeGreaterThan(0);
    const again = counted(() => f.route(body));
    f.finish(again.result);
    expect(again.calls.reads).toEqual(["kvr.gwb"]);
  });

  it("a request's end makes no call once the board counts nothing of it; one that is still counted is published", () => {
    f = new ShippedFilter();
    const body = chat(SYSTEM, "a long answer");
    f.hold(body, 1);
    f.publish();
    f.tick();
    const r = f.route(body);
    expect(r.slot).toBeGreaterThanOrEqual(0);
    f.firstByte(r);
    // Still unseen: the slot's load has not changed since the request was routed. Its end takes
    // it off the board's decoding count: a read and a write.
    const early = f.route(chat(SYSTEM, "a short answer"));
    f.firstByte(early);
    f.tick();
    const counted1 = counted(() => f.finish(early));
    expect(counted1.calls).toEqual({ reads: ["kvr.gwb"], writes: ["kvr.gwb"] });
    // The engine's metrics change twice (the first scrape may predate the request): the long
    // answer is shown there, so nothing of it is on the board any more, and a tick wrote that.
    for (const running of [1, 2]) {
      f.load.scraped(r.slot, { running, waiting: 0, kvUsage: 0.1 }, f.clock.now);
      f.publishLoad();
      f.tick();
    }
    const end = counted(() => f.finish(r));
    expect(end.calls).toEqual({ reads: [], writes: [] });
    // What the other VMs read is what the write would have said: this VM counts nothing.
    expect(boardSum(f.host, "unanswered") + boardSum(f.host, "decodingUnseen")).toBe(0);
  });

  it("speculative routes and sessions cost no shared-data call of their own", () => {
    f = new ShippedFilter({ routing: { sessionHeader: "x-session-id" } });
    f.publish();
    f.tick();
    const body = chat(SYSTEM, "spec");
    const routed: Routed[] = [];
    for (let i = 0; i < 3; i++) {
      const r = counted(() => f.route(body));
      routed.push(r.result);
      f.finish(r.result);
      // Nothing is held: the walk ends at chunk 1's bucket, read the first time only.
      expect(r.calls.reads.filter((k) => !k.startsWith("kvr.b."))).toEqual(["kvr.gwb"]);
      expect(r.calls.writes).toEqual(["kvr.gwb"]);
    }
    expect(routed[2]?.outcome).toBe("speculative_hit");
    // With a session: its fleet entry (kvr.sc.<j>) is the one more read.
    const s = counted(() => f.route(body, { headers: [["x-session-id", "abc"]] }));
    expect(s.calls.reads.filter((k) => !k.startsWith("kvr.b."))).toEqual([
      "kvr.gwb",
      expect.stringMatching(/^kvr\.sc\.\d+$/),
    ]);
    expect(s.calls.writes).toEqual(["kvr.gwb"]);
    f.finish(s.result);
  });
});

describe("what the board carries between a gateway's VMs", () => {
  it("a speculative route taken on one VM is followed on another at once, before any tick or report", () => {
    f = new ShippedFilter({ threads: 2 });
    f.publish();
    f.tick();
    const body = chat(SYSTEM, "burst");
    const first = f.route(body, { thread: 0 });
    f.finish(first);
    // No tick since: thread 1 knows the route only from the board's route ring.
    const second = f.route(chat(SYSTEM, "burst, again"), { thread: 1 });
    f.finish(second);
    expect(second.outcome).toBe("speculative_hit");
    expect(second.slot).toBe(first.slot);
  });

  it("a session routed on one VM keeps its slot on another at once", () => {
    f = new ShippedFilter({ threads: 2, routing: { sessionHeader: "x-session-id" } });
    f.publish();
    f.tick();
    const a = f.route(chat("one conversation", "turn 1"), { thread: 0, headers: [["x-session-id", "s-1"]] });
    f.finish(a);
    const b = f.route(chat("another topic altogether", "turn 2"), {
      thread: 1,
      headers: [["x-session-id", "s-1"]],
    });
    f.finish(b);
    expect(b.slot).toBe(a.slot);
    expect(Number(f.host.counter("kvroute.session.kept") ?? 0)).toBe(1);
  });
});

describe("a lost race on the board", () => {
  it("keeps the loser's requests for its next write: two VMs deciding at once both count after a tick", () => {
    f = new ShippedFilter({ threads: 2 });
    f.publish();
    f.tick();
    const routed: Routed[] = [];
    // Both VMs read the board before either writes (Envoy's workers in parallel): the second
    // write carries the first's cas and loses.
    f.host.core.sharedData.asIfParallel([
      () => routed.push(f.route(chat("left prompt", "q"), { thread: 0 })),
      () => routed.push(f.route(chat("right prompt", "q"), { thread: 1 })),
    ]);
    expect(routed.every((r) => r.forwarded !== null)).toBe(true);
    expect(boardSum(f.host, "unanswered")).toBe(1);
    f.tick();
    expect(boardSum(f.host, "unanswered")).toBe(2);
    for (const r of routed) f.finish(r);
    expect(boardSum(f.host, "unanswered")).toBe(0);
  });
});
