// The queued term of the cost model (filter/core/queued-work.ts), as tables: what a slot is
// charged for queued work, and how this VM's own requests enter and leave its count.
import { describe, expect, it } from "vitest";
import type { SlotLora } from "../../control-plane/src/model/slot-load.ts";
import { encodeLoadImage } from "../../control-plane/src/publish/images.ts";
import { route, writeIo } from "./core-probes.ts";

interface QueueProbes {
  queuedRequestsOf(waiting: number, elsewhere: number, seen: number, count: number): number;
  queuedTokensOf(waiting: number, elsewhere: number, seen: number, tokens: number): number;
  elsewhereOfIo(fleet: number, gatewayReported: number): number;
  localQueueReset(): void;
  localQueueAdd(slot: number, sig: bigint, tokens: number): number;
  localQueueObserve(slot: number, sig: bigint): void;
  localQueueAnswer(slot: number, window: number, tokens: number, decodes: boolean): void;
  localQueueEnd(slot: number, window: number, tokens: number, answered: boolean): void;
  localQueueCount(slot: number): number;
  localQueueSeen(slot: number): number;
  localQueueUnseen(slot: number): number;
  localQueueDecoding(slot: number): number;
  localQueueTokens(slot: number): number;
  localQueueGatewayView(
    slot: number,
    pending: number,
    tokens: number,
    unseen: number,
    decoding: number,
    reported: number,
  ): void;
  localQueueGatewayCount(slot: number): number;
  localQueueGatewayTokens(slot: number): number;
  localQueueGatewaySeen(slot: number): number;
  localQueueUnseenRunning(slot: number): number;
  localQueueGatewayReported(slot: number): number;
  localQueueSiblingSince(slot: number, pending: number, tokens: number, since: number): void;
  localQueueClock(nowMs: number): void;
  localQueueAddAt(slot: number, tokens: number, nowMs: number, aheadTokens: number): number;
  localQueueAnswerAt(slot: number, window: number, tokens: number, nowMs: number): void;
  localQueuePrefillRate(): number;
  localQueuePromptTokens(slot: number): number;
  reportedMaxReset(): void;
  reportedMaxBegin(nowMs: bigint, horizonMs: bigint): void;
  reportedMaxRecord(slot: number, n: number): void;
  reportedMaxAt(slot: number): number;
  loadSignatureIo(slot: number): bigint;
  localQueueObserveAdmission(): void;
  localQueueAdmissionBlocked(slot: number): boolean;
}
const q = route as unknown as typeof route & QueueProbes;
const Q = 512;

describe("queued work charged to a slot", () => {
  // waiting: the engine's queue at its last scrape; elsewhere: other gateways' unseen requests;
  // seen / count: the gateway's unanswered requests the last scrapes may show / all of them;
  // tokens: their uncached prompt tokens.
  const table: Array<[string, number, number, number, number, number, number, number]> = [
    // what                                                   waiting elsewhere seen count tokens → requests, tokens
    ["idle slot, nothing anywhere", 0, 0, 0, 0, 0, 0, 0],
    ["a request of ours ended; the engine's last scrape has it waiting", 1, 0, 0, 0, 0, 1, Q],
    ["another gateway's unseen request", 0, 1, 0, 0, 0, 1, Q],
    ["our unseen request: its own uncached prompt", 0, 0, 0, 1, 100, 1, 100],
    ["our request the scrape shows waiting: not twice", 1, 0, 1, 1, 100, 1, 100],
    ["ours seen while it prefills (running): the queue has none of others", 0, 0, 1, 1, 100, 1, 100],
    ["our fully cached request costs no prefill", 0, 0, 0, 1, 0, 1, 0],
    ["the engine's queue at QUEUED_TOKENS each", 2, 0, 0, 0, 0, 2, 2 * Q],
    ["ours and two of other gateways", 0, 2, 0, 1, 100, 3, 2 * Q + 100],
    ["everything at once", 3, 2, 1, 3, 300, 7, 4 * Q + 300],
  ];
  it.each(table)("%s", (_what, waiting, elsewhere, seen, count, tokens, requests, work) => {
    expect(q.queuedRequestsOf(waiting, elsewhere, seen, count)).toBe(requests);
    expect(q.queuedTokensOf(waiting, elsewhere, seen, tokens)).toBe(work);
  });

  it.each([
    ["no report anywhere", 0, 0, 0],
    ["our own report, the request since ended", 1, 1, 0],
    ["another gateway's request", 1, 0, 1],
    ["the fleet count behind our report (stale): none of others", 1, 2, 0],
    ["ours and two of another's", 3, 1, 2],
  ])("other gateways' unseen requests: %s", (_what, fleet, reported, elsewhere) => {
    expect(q.elsewhereOfIo(fleet, reported)).toBe(elsewhere);
  });
});

type Step =
  | ["add", number, bigint, number]
  | ["observe", number, bigint]
  | ["answer", number, number, number, boolean]
  | ["end", number, number, number, boolean];

describe("this VM's queue", () => {
  // Each row: steps on slots 0..2 (`answer` / `end` name the add, by its index among the steps),
  // then slot 0's unanswered requests, how many of them the scrapes may show, how many they may
  // not, the decoding ones they may not, and the unanswered ones' tokens. A request is unseen
  // until the slot's load changed twice after it was routed.
  const A = 0x1_0000_0001n;
  const B = 0x1_0000_0002n;
  const C = 0x1_0000_0003n;
  const table: Array<[string, Step[], number, number, number, number, number]> = [
    [
      "routed: unanswered and unseen",
      [
        ["add", 0, A, 100],
        ["observe", 0, A],
      ],
      1,
      0,
      1,
      0,
      100,
    ],
    [
      "one load change: the scrape may predate it, still unseen",
      [
        ["add", 0, A, 100],
        ["observe", 0, B],
      ],
      1,
      0,
      1,
      0,
      100,
    ],
    [
      "two load changes: seen, still unanswered",
      [
        ["add", 0, A, 100],
        ["observe", 0, B],
        ["observe", 0, C],
      ],
      1,
      1,
      0,
      0,
      100,
    ],
    [
      "the same load read again is no change",
      [
        ["add", 0, A, 100],
        ["observe", 0, B],
        ["observe", 0, B],
      ],
      1,
      0,
      1,
      0,
      100,
    ],
    [
      "its first byte: out of the queue, decoding unseen",
      [
        ["add", 0, A, 100],
        ["answer", 0, 0, 100, true],
      ],
      0,
      0,
      0,
      1,
      0,
    ],
    [
      "answered at a prefill-only slot: nothing decodes there",
      [
        ["add", 0, A, 100],
        ["answer", 0, 0, 100, false],
      ],
      0,
      0,
      0,
      0,
      0,
    ],
    [
      "decoding, then two load changes: the scrape counts it running",
      [
        ["add", 0, A, 100],
        ["answer", 0, 0, 100, true],
        ["observe", 0, B],
        ["observe", 0, C],
      ],
      0,
      0,
      0,
      0,
      0,
    ],
    [
      "decoding, then its end",
      [
        ["add", 0, A, 100],
        ["answer", 0, 0, 100, true],
        ["end", 0, 0, 100, true],
      ],
      0,
      0,
      0,
      0,
      0,
    ],
    [
      "ended unanswered (reset, local reply upstream)",
      [
        ["add", 0, A, 100],
        ["end", 0, 0, 100, false],
      ],
      0,
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
        ["answer", 0, 1, 40, true],
      ],
      1,
      0,
      1,
      1,
      100,
    ],
    [
      "an old request answering after its window closed leaves the new ones alone",
      [
        ["add", 0, A, 100],
        ["observe", 0, B],
        ["observe", 0, C],
        ["add", 0, C, 30],
        ["answer", 0, 0, 100, true],
      ],
      1,
      0,
      1,
      0,
      30,
    ],
    [
      "routed before and after a change: both unseen, one window apart",
      [
        ["add", 0, A, 100],
        ["add", 0, B, 30],
      ],
      2,
      0,
      2,
      0,
      130,
    ],
    [
      "routed before and after a change, then another change: the older one is seen",
      [
        ["add", 0, A, 100],
        ["add", 0, B, 30],
        ["observe", 0, C],
      ],
      2,
      1,
      1,
      0,
      130,
    ],
    [
      "ending twice never goes negative",
      [
        ["add", 0, A, 100],
        ["end", 0, 0, 100, false],
        ["end", 0, 0, 100, false],
      ],
      0,
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
      0,
    ],
  ];
  it.each(table)("%s", (_what, steps, count, seen, unseen, decoding, tokens) => {
    q.localQueueReset();
    const windows: number[] = [];
    for (const s of steps) {
      if (s[0] === "add") windows.push(q.localQueueAdd(s[1], s[2], s[3]));
      else {
        windows.push(-1);
        if (s[0] === "observe") q.localQueueObserve(s[1], s[2]);
        else if (s[0] === "answer") q.localQueueAnswer(s[1], windows[s[2]] as number, s[3], s[4]);
        else q.localQueueEnd(s[1], windows[s[2]] as number, s[3], s[4]);
      }
    }
    expect([
      q.localQueueCount(0),
      q.localQueueSeen(0),
      q.localQueueUnseen(0),
      q.localQueueDecoding(0),
      q.localQueueTokens(0),
    ]).toEqual([count, seen, unseen, decoding, tokens]);
  });

  it("adds the other VMs' requests to its own: the gateway decides as one", () => {
    q.localQueueReset();
    const A2 = 0x1_0000_0001n;
    q.localQueueAdd(0, A2, 100);
    // Another VM: 3 unanswered (2 unseen) worth 900 tokens, 4 decoding unseen; the leader reported 5.
    q.localQueueGatewayView(0, 3, 900, 2, 4, 5);
    expect([
      q.localQueueGatewayCount(0),
      q.localQueueGatewayTokens(0),
      q.localQueueGatewaySeen(0),
      q.localQueueUnseenRunning(0),
      q.localQueueGatewayReported(0),
    ]).toEqual([4, 1000, 1, 4, 5]);
    // The next read replaces the view; this VM's own requests stay.
    q.localQueueGatewayView(1, 1, 10, 1, 0, 0);
    expect([
      q.localQueueGatewayCount(0),
      q.localQueueGatewayTokens(0),
      q.localQueueGatewayReported(0),
    ]).toEqual([1, 100, 0]);
  });
});

describe("queued prefill, aged by the speed the slots answer at", () => {
  it("prices prompts whole until a first answer teaches the speed", () => {
    q.localQueueReset();
    q.localQueueAddAt(0, 1000, 0, 0);
    q.localQueueClock(500);
    expect(q.localQueuePrefillRate()).toBe(0);
    expect(q.localQueueGatewayTokens(0)).toBe(1000);
  });

  it("learns tokens per ms from answers, and ages what is left from the last answer on", () => {
    q.localQueueReset();
    const w = q.localQueueAddAt(0, 1000, 0, 0);
    q.localQueueAddAt(0, 600, 10, 0);
    // The first prompt answered 50 ms after the slot started on it: 20 tokens a ms.
    q.localQueueAnswerAt(0, w, 1000, 50);
    expect(q.localQueuePrefillRate()).toBe(20);
    q.localQueueClock(50);
    expect(q.localQueueGatewayTokens(0)).toBe(600);
    q.localQueueClock(60);
    expect(q.localQueueGatewayTokens(0)).toBe(400);
    // Never below nothing, and the share mirror still sees the prompt whole.
    q.localQueueClock(200);
    expect(q.localQueueGatewayTokens(0)).toBe(0);
    expect(q.localQueuePromptTokens(0)).toBe(600);
  });

  it("starts the clock after the work queued ahead by others", () => {
    q.localQueueReset();
    q.localQueueAnswerAt(0, q.localQueueAddAt(0, 100, 0, 0), 100, 10); // 10 tokens a ms
    // 512 tokens of others' requests ahead: the slot starts on this one 51.2 ms after it came.
    q.localQueueAddAt(0, 300, 100, 512);
    q.localQueueClock(140);
    expect(q.localQueueGatewayTokens(0)).toBe(300);
    q.localQueueClock(171.2);
    expect(q.localQueueGatewayTokens(0)).toBeCloseTo(100, 9);
  });

  it("ages the gateway's queue at a slot as one, from the latest start among its VMs", () => {
    q.localQueueReset();
    q.localQueueAnswerAt(0, q.localQueueAddAt(0, 100, 0, 0), 100, 10); // 10 tokens a ms
    q.localQueueAddAt(0, 200, 20, 0);
    // Another VM's 300 tokens there, started on at 40: 500 tokens less 10 a ms since 40.
    q.localQueueSiblingSince(0, 1, 300, 40);
    q.localQueueClock(60);
    expect(q.localQueueGatewayTokens(0)).toBe(300);
    q.localQueueSiblingSince(0, 1, 300, 10);
    expect(q.localQueueGatewayTokens(0)).toBe(100);
  });

  it("follows the speed as it changes (older answers weigh less)", () => {
    q.localQueueReset();
    for (let i = 0; i < 40; i++)
      q.localQueueAnswerAt(0, q.localQueueAddAt(0, 100, i * 100, 0), 100, i * 100 + 10);
    expect(q.localQueuePrefillRate()).toBe(10);
    for (let i = 40; i < 80; i++)
      q.localQueueAnswerAt(0, q.localQueueAddAt(0, 100, i * 100, 0), 100, i * 100 + 2);
    // 50 a ms now: weighed evenly the 80 answers would say 16.7, the last 40 alone 50.
    expect(q.localQueuePrefillRate()).toBeGreaterThan(30);
    expect(q.localQueuePrefillRate()).toBeLessThan(50);
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
      (id) => ({ ...(loads[id] as Seen), consecutiveFailures: 0, lastOkMs: 0, lora: null }),
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

describe("a queue blocked on admission", () => {
  /**
   * The queue reads a kvr.load image where slot 0 shows (running, waiting) and, when given, its
   * engine's adapters (LoRA), and slot 1 idles.
   */
  const observe = (running: number, waiting: number, lora: SlotLora | null = null): boolean => {
    const loads = [
      { running, waiting, kvUsage: 0.5, healthy: true, inflight: 0, ttftMs: 0, lora },
      { running: 0, waiting: 0, kvUsage: 0, healthy: true, inflight: 0, ttftMs: 0, lora: null },
    ];
    const img = encodeLoadImage(
      [0, 1].map((id) => ({ id, present: true }) as never),
      (id) => ({ ...(loads[id] as (typeof loads)[0]), consecutiveFailures: 0, lastOkMs: 0 }),
      (_pool, adapter) => Number(adapter.slice(1)),
    );
    writeIo(img);
    expect(route.loadDecodeIo(img.length)).toBe(2);
    q.localQueueObserveAdmission();
    expect(Boolean(q.localQueueAdmissionBlocked(1))).toBe(false);
    return Boolean(q.localQueueAdmissionBlocked(0));
  };
  // running, waiting → blocked after reading it
  const steps: Array<[string, number, number, boolean]> = [
    ["nothing waits", 100, 0, false],
    ["requests wait for the first time", 120, 2, false],
    ["they still wait, but running grew: the engine admits them as prefill allows", 140, 3, false],
    ["they still wait and running did not grow: admitted only as others finish", 140, 5, true],
    ["the same counts again (an image with other changes): still blocked", 140, 5, true],
    ["the queue emptied", 139, 0, false],
    ["requests wait again, after an empty queue", 139, 4, false],
    ["running fell while they waited (a full KV cache)", 138, 6, true],
    ["running grew again", 150, 6, false],
  ];
  it("is known from two changes of the counts in a row", () => {
    q.localQueueReset();
    for (const [what, running, waiting, blocked] of steps)
      expect(observe(running, waiting), what).toBe(blocked);
  });
  it("is not read into a queue of adapters waiting for a place (LoRA)", () => {
    q.localQueueReset();
    const places = (waiting: string[]): SlotLora => ({ maxLoras: 2, running: ["a1", "a2"], waiting });
    expect(observe(140, 3, places([]))).toBe(false);
    // An adapter of the running ones waits too: still a queue for sequences.
    expect(observe(140, 5, places(["a1"]))).toBe(true);
    // A third adapter waits for one of the two places: the engine admits others past it.
    expect(observe(140, 6, places(["a3"]))).toBe(false);
    expect(observe(139, 7, places(["a1", "a3"]))).toBe(false);
    expect(observe(139, 8, places(["a1"]))).toBe(true);
  });
  it("is unknown for a slot beyond any image read", () => {
    q.localQueueReset();
    expect(Boolean(q.localQueueAdmissionBlocked(5))).toBe(false);
  });
});
