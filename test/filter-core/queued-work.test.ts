// The queued term of the cost model (filter/core/queued-work.ts), as tables: what a slot is
// charged for queued work, and how this VM's own requests enter and leave its count.
import { describe, expect, it } from "vitest";
import { encodeLoadImage } from "../../control-plane/src/publish/images.ts";
import { route, writeIo } from "./core-probes.ts";

interface QueueProbes {
  queuedRequestsOf(
    waiting: number,
    fleet: number,
    reported: number,
    siblings: number,
    seen: number,
    own: number,
  ): number;
  queuedTokensOf(
    waiting: number,
    fleet: number,
    reported: number,
    siblings: number,
    seen: number,
    ownTokens: number,
  ): number;
  localQueueReset(): void;
  localQueueAdd(slot: number, sig: bigint, tokens: number): number;
  localQueueObserve(slot: number, sig: bigint): void;
  localQueueRemove(slot: number, window: number, tokens: number): void;
  localQueueCount(slot: number): number;
  localQueueSeen(slot: number): number;
  localQueueUnseen(slot: number): number;
  localQueueTokens(slot: number): number;
  localQueueGatewayView(siblingSlot: number, siblings: number, reportedSlot: number, reported: number): void;
  localQueueSiblings(slot: number): number;
  reportedMaxReset(): void;
  reportedMaxBegin(nowMs: bigint, horizonMs: bigint): void;
  reportedMaxRecord(slot: number, n: number): void;
  reportedMaxAt(slot: number): number;
  loadSignatureIo(slot: number): bigint;
}
const q = route as unknown as typeof route & QueueProbes;
const Q = 512;

describe("queued work charged to a slot", () => {
  // waiting: the engine's queue at its last scrape; fleet: kvr.load's count of requests gateways
  // sent that the metrics did not show (this gateway's last reported share included); reported:
  // the most this gateway's leader reported lately; siblings: this gateway's other threads'
  // unseen requests now; seen / own: this VM's unanswered requests the last scrape shows / all of
  // them; tokens: their uncached prompt tokens.
  const table: Array<[string, number, number, number, number, number, number, number, number, number]> = [
    // what                                                  waiting fleet reported siblings seen own tokens → requests, tokens
    ["idle slot, nothing anywhere", 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ["our request ended; the fleet count still has it", 0, 1, 1, 0, 0, 0, 0, 0, 0],
    ["a sibling's request ended: gone from its count, still in the fleet's", 0, 1, 1, 0, 0, 0, 0, 0, 0],
    ["a sibling's unseen request, not yet reported", 0, 0, 0, 1, 0, 0, 0, 1, Q],
    ["a sibling's unseen request, reported: once", 0, 1, 1, 1, 0, 0, 0, 1, Q],
    ["our request ended; the engine's last scrape has it waiting", 1, 0, 0, 0, 0, 0, 0, 1, Q],
    ["another gateway's unseen request", 0, 1, 0, 0, 0, 0, 0, 1, Q],
    ["our unseen request: its own uncached prompt", 0, 1, 1, 0, 0, 1, 100, 1, 100],
    ["our request the scrape shows waiting: not twice", 1, 0, 1, 0, 1, 1, 100, 1, 100],
    ["ours seen while it prefills (running): the queue has none of others", 0, 0, 0, 0, 1, 1, 100, 1, 100],
    ["our fully cached request costs no prefill", 0, 1, 1, 0, 0, 1, 0, 1, 0],
    ["the engine's queue at QUEUED_TOKENS each", 2, 0, 0, 0, 0, 0, 0, 2, 2 * Q],
    ["ours and two of other gateways", 0, 3, 1, 0, 0, 1, 100, 3, 2 * Q + 100],
    ["fleet count behind our report (stale): none of others", 0, 1, 2, 0, 0, 1, 100, 1, 100],
    ["everything at once", 3, 5, 2, 2, 1, 3, 300, 10, 7 * Q + 300],
  ];
  it.each(table)("%s", (_what, waiting, fleet, reported, siblings, seen, own, tokens, requests, work) => {
    expect(q.queuedRequestsOf(waiting, fleet, reported, siblings, seen, own)).toBe(requests);
    expect(q.queuedTokensOf(waiting, fleet, reported, siblings, seen, tokens)).toBe(work);
  });
});

type Step =
  | ["add", number, bigint, number]
  | ["observe", number, bigint]
  | ["remove", number, number, number];

describe("this VM's queue", () => {
  // Each row: steps on slots 0..2 (`remove` names the add, by its index among the steps, that
  // answered or ended), then slot 0's unanswered requests, how many of them the engine shows,
  // how many it does not (published), and their tokens.
  const A = 0x1_0000_0001n;
  const B = 0x1_0000_0002n;
  const table: Array<[string, Step[], number, number, number, number]> = [
    [
      "sent: unanswered and unseen",
      [
        ["add", 0, A, 100],
        ["observe", 0, A],
      ],
      1,
      0,
      1,
      100,
    ],
    [
      "a newer scrape (the load changed) shows it: seen, still unanswered",
      [
        ["add", 0, A, 100],
        ["observe", 0, B],
      ],
      1,
      1,
      0,
      100,
    ],
    [
      "its first byte or its end takes it out at once",
      [
        ["add", 0, A, 100],
        ["remove", 0, 0, 100],
      ],
      0,
      0,
      0,
      0,
    ],
    [
      "answered after the engine showed it",
      [
        ["add", 0, A, 100],
        ["observe", 0, B],
        ["remove", 0, 0, 100],
      ],
      0,
      0,
      0,
      0,
    ],
    [
      "two in one window; one answers",
      [
        ["add", 0, A, 100],
        ["add", 0, A, 40],
        ["remove", 0, 1, 40],
      ],
      1,
      0,
      1,
      100,
    ],
    [
      "an old request answering leaves the new window's unseen count alone",
      [
        ["add", 0, A, 100],
        ["observe", 0, B],
        ["add", 0, B, 30],
        ["remove", 0, 0, 100],
      ],
      1,
      0,
      1,
      30,
    ],
    [
      "sent after the load changed: the first is seen, the second not",
      [
        ["add", 0, A, 100],
        ["add", 0, B, 30],
      ],
      2,
      1,
      1,
      130,
    ],
    [
      "removing twice never goes negative",
      [
        ["add", 0, A, 100],
        ["remove", 0, 0, 100],
        ["remove", 0, 0, 100],
      ],
      0,
      0,
      0,
      0,
    ],
    [
      "other slots are their own",
      [
        ["add", 1, A, 100],
        ["observe", 0, B],
        ["add", 2, A, 5],
      ],
      0,
      0,
      0,
      0,
    ],
  ];
  it.each(table)("%s", (_what, steps, count, seen, unseen, tokens) => {
    q.localQueueReset();
    const windows: number[] = [];
    for (const s of steps) {
      if (s[0] === "add") windows.push(q.localQueueAdd(s[1], s[2], s[3]));
      else if (s[0] === "observe") {
        windows.push(-1);
        q.localQueueObserve(s[1], s[2]);
      } else if (s[0] === "remove") {
        windows.push(-1);
        q.localQueueRemove(s[1], windows[s[2]] as number, s[3]);
      }
    }
    expect([q.localQueueCount(0), q.localQueueSeen(0), q.localQueueUnseen(0), q.localQueueTokens(0)]).toEqual(
      [count, seen, unseen, tokens],
    );
  });

  it("keeps the gateway view apart from its own requests, and a tick replaces it", () => {
    q.localQueueReset();
    q.localQueueAdd(0, A, 100);
    q.localQueueGatewayView(0, 3, 1, 2);
    expect([q.localQueueCount(0), q.localQueueUnseen(0), q.localQueueSiblings(0)]).toEqual([1, 1, 3]);
    q.localQueueGatewayView(1, 1, 0, 0);
    expect([q.localQueueSiblings(0), q.localQueueSiblings(1), q.localQueueCount(0)]).toEqual([0, 1, 1]);
  });
});

describe("what the leader reported (kvr.ifr)", () => {
  it("remembers the most it reported for a report horizon, then forgets", () => {
    q.reportedMaxReset();
    q.reportedMaxBegin(1000n, 600n);
    q.reportedMaxRecord(0, 2);
    expect(q.reportedMaxAt(0)).toBe(2);
    // Both answer: the next report has none, but kvr.load may hold the 2 until it replaces them.
    q.reportedMaxBegin(1100n, 600n);
    q.reportedMaxRecord(0, 0);
    expect(q.reportedMaxAt(0)).toBe(2);
    q.reportedMaxBegin(1599n, 600n);
    expect(q.reportedMaxAt(0)).toBe(2);
    // Next horizon: still remembered (the previous one), then gone.
    q.reportedMaxBegin(1600n, 600n);
    expect(q.reportedMaxAt(0)).toBe(2);
    q.reportedMaxBegin(2200n, 600n);
    expect(q.reportedMaxAt(0)).toBe(0);
  });

  it("keeps the larger of two counts in one horizon, per slot", () => {
    q.reportedMaxReset();
    q.reportedMaxBegin(0n, 600n);
    q.reportedMaxRecord(3, 1);
    q.reportedMaxRecord(3, 4);
    q.reportedMaxRecord(3, 2);
    q.reportedMaxRecord(70, 1);
    expect([q.reportedMaxAt(3), q.reportedMaxAt(70), q.reportedMaxAt(5)]).toEqual([4, 1, 0]);
  });
});

describe("load signature", () => {
  interface Seen {
    running: number;
    waiting: number;
    kvUsage: number;
    healthy: boolean;
    inflight: number;
    ttftMs: number;
  }
  const base: Seen = { running: 1, waiting: 0, kvUsage: 0.1, healthy: true, inflight: 0, ttftMs: 0 };
  /** The signatures of two slots in a kvr.load image holding these loads. */
  const signatures = (first: Seen, second: Seen = base): [bigint, bigint] => {
    const loads = [first, second];
    const img = encodeLoadImage(
      [0, 1].map((id) => ({ id, present: true }) as never),
      (id) => ({ ...(loads[id] as Seen), consecutiveFailures: 0, lastOkMs: 0 }),
    );
    writeIo(img);
    expect(route.loadDecodeIo(img.length)).toBe(2);
    return [q.loadSignatureIo(0), q.loadSignatureIo(1)];
  };

  it.each<[string, Partial<Seen>, boolean]>([
    ["running", { running: 2 }, true],
    ["waiting", { waiting: 1 }, true],
    ["KV usage (per mille)", { kvUsage: 0.102 }, true],
    ["KV usage below a per mille", { kvUsage: 0.1004 }, false],
    ["health", { healthy: false }, true],
    ["in-flight (a report, not the engine)", { inflight: 7 }, false],
    ["TTFT (a report, not the engine)", { ttftMs: 90 }, false],
  ])("%s: changes it? %s", (_what, change, changes) => {
    const [a0, a1] = signatures(base);
    const [b0, b1] = signatures({ ...base, ...change });
    expect(b0 !== a0).toBe(changes);
    expect(a0).toBe(a1);
    expect(b1).toBe(a1);
  });
});
