// Splitting a replica message over max_payload and joining it again (message-parts.ts): every
// part fits, any order with any duplicates joins to the same bytes exactly once, and the joiner's
// memory stays bounded — messages whose parts stop coming expire, the oldest give way when too
// many or too large are being joined, and parts that disagree drop their message.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type JoinLimits,
  MessageJoiner,
  type PartDropReason,
  splitMessage,
} from "../../control-plane/src/replicas/message-parts.ts";
import {
  decodeMessagePart,
  encodeMessagePart,
  isMessagePart,
  type MessagePart,
  ReplicaDecodeError,
} from "../../control-plane/src/replicas/replica-codec.ts";

const SUBJECT = "kvroute.reports";
const LIMITS: JoinLimits = { maxBytes: 1 << 20, maxMessages: 8, ttlMs: 1000 };

function joiner(limits = LIMITS) {
  const dropped: PartDropReason[] = [];
  return { j: new MessageJoiner(limits, (r) => dropped.push(r)), dropped };
}

function message(n: number, seed = 1): Uint8Array {
  return Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed * 7) & 0xff);
}

function parts(m: Uint8Array, maxPayload: number, messageId = 1, replica = "r1"): MessagePart[] {
  const raw = splitMessage(m, maxPayload, { replica, epoch: 5n, messageId });
  if (raw === null) throw new Error("not splittable");
  return raw.map(decodeMessagePart);
}

describe("splitting", () => {
  it("cuts a message into parts of at most max_payload that name their place", () => {
    const m = message(10_000);
    const raw = splitMessage(m, 1000, { replica: "r1", epoch: 5n, messageId: 9 }) ?? [];
    expect(raw.length).toBe(11);
    for (const p of raw) {
      expect(p.length).toBeLessThanOrEqual(1000);
      expect(isMessagePart(p)).toBe(true);
    }
    const decoded = raw.map(decodeMessagePart);
    expect(decoded.map((p) => p.index)).toEqual([...Array(11).keys()]);
    expect(
      new Set(decoded.map((p) => `${p.replica} ${p.epoch} ${p.messageId} ${p.count} ${p.length}`)),
    ).toEqual(new Set(["r1 5 9 11 10000"]));
    expect(Buffer.concat(decoded.map((p) => p.bytes))).toEqual(Buffer.from(m));
  });

  it("refuses what cannot be split: a max_payload below a part's header, too many parts", () => {
    expect(splitMessage(message(100), 30, { replica: "r1", epoch: 0n, messageId: 0 })).toBeNull();
    expect(splitMessage(message(70_000), 33, { replica: "r1", epoch: 0n, messageId: 0 })).toBeNull();
    expect(splitMessage(message(100), 33, { replica: "r1", epoch: 0n, messageId: 0 })?.length).toBe(100); // 1 byte a part
  });

  it("decodes only well-formed parts", () => {
    const p = encodeMessagePart({
      replica: "r",
      epoch: 1n,
      messageId: 2,
      index: 3,
      count: 3,
      length: 9,
      bytes: message(3),
    });
    expect(() => decodeMessagePart(p)).toThrow(ReplicaDecodeError);
    const ok = encodeMessagePart({
      replica: "r",
      epoch: 1n,
      messageId: 2,
      index: 2,
      count: 3,
      length: 9,
      bytes: message(3),
    });
    for (let cut = 0; cut < 28; cut++)
      expect(() => decodeMessagePart(ok.subarray(0, cut))).toThrow(ReplicaDecodeError);
    expect(isMessagePart(ok.subarray(0, 3))).toBe(false);
  });
});

describe("joining", () => {
  it("any order, with duplicates, joins each message once to its exact bytes", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ size: fc.integer({ min: 1, max: 3000 }), max: fc.integer({ min: 40, max: 700 }) }),
          { minLength: 1, maxLength: 4 },
        ),
        fc.infiniteStream(fc.nat()),
        (specs, random) => {
          const { j, dropped } = joiner({ ...LIMITS, maxMessages: 8 });
          const messages = specs.map((s, i) => message(s.size, i));
          const all = specs.flatMap((s, i) => parts(messages[i] as Uint8Array, s.max, i, `r${i % 2}`));
          const rnd = random[Symbol.iterator]();
          const next = () => rnd.next().value as number;
          // Shuffle, then repeat some parts (before or after their message completes).
          for (let i = all.length - 1; i > 0; i--) {
            const k = next() % (i + 1);
            [all[i], all[k]] = [all[k] as MessagePart, all[i] as MessagePart];
          }
          const stream = all.flatMap((p) => (next() % 4 === 0 ? [p, p] : [p]));
          const joined: Uint8Array[] = [];
          let duplicates = 0;
          for (const p of stream) {
            const r = j.add(SUBJECT, p, 0);
            if (r.joined !== null) joined.push(r.joined);
            else if (r.dropped === "part_duplicate") duplicates++;
            else expect(r.dropped).toBeNull();
          }
          expect(duplicates).toBe(stream.length - all.length);
          expect(dropped).toEqual([]);
          const key = (b: Uint8Array) => Buffer.from(b).toString("hex");
          expect(joined.map(key).sort()).toEqual(messages.map(key).sort());
          expect(j.pending).toEqual({ messages: 0, bytes: 0 });
        },
      ),
      { numRuns: 200 },
    );
  });

  it("a message whose parts stop coming expires, and its memory with it", () => {
    const { j, dropped } = joiner();
    const ps = parts(message(5000), 600);
    for (const p of ps.slice(0, -1)) expect(j.add(SUBJECT, p, 100).joined).toBeNull();
    expect(j.pending).toEqual({ messages: 1, bytes: 5000 });
    j.expire(100 + LIMITS.ttlMs - 1);
    expect(j.pending.messages).toBe(1);
    j.expire(100 + LIMITS.ttlMs);
    expect(j.pending).toEqual({ messages: 0, bytes: 0 });
    expect(dropped).toEqual(["parts_expired"]);
    // The last part, late: it starts a message of its own that can never complete, and expires too.
    expect(j.add(SUBJECT, ps.at(-1) as MessagePart, 3000).joined).toBeNull();
    j.expire(3000 + LIMITS.ttlMs);
    expect(dropped).toEqual(["parts_expired", "parts_expired"]);
    expect(j.pending).toEqual({ messages: 0, bytes: 0 });
  });

  it("a part that keeps coming keeps its message alive", () => {
    const { j } = joiner();
    const ps = parts(message(3000), 400);
    ps.forEach((p, i) => {
      const r = j.add(SUBJECT, p, i * (LIMITS.ttlMs - 1));
      expect(r.joined !== null).toBe(i === ps.length - 1);
    });
  });

  it("memory stays bounded: the oldest messages give way to new ones", () => {
    const { j, dropped } = joiner({ maxBytes: 10_000, maxMessages: 3, ttlMs: 1000 });
    // Four unfinished messages of 4000 bytes: at most two fit in 10 000 bytes.
    const started = [1, 2, 3, 4].map((id) => parts(message(4000, id), 500, id));
    for (const ps of started) j.add(SUBJECT, ps[0] as MessagePart, 0);
    expect(j.pending).toEqual({ messages: 2, bytes: 8000 });
    expect(dropped).toEqual(["parts_evicted", "parts_evicted"]);
    // The newest two still complete.
    for (const ps of started.slice(2)) {
      const results = ps.slice(1).map((p) => j.add(SUBJECT, p, 1).joined);
      expect(results.at(-1)).toEqual(message(4000, started.indexOf(ps) + 1));
    }
    // Many small ones: at most maxMessages at once.
    for (let id = 10; id < 20; id++) j.add(SUBJECT, parts(message(100, id), 60, id)[0] as MessagePart, 2);
    expect(j.pending.messages).toBe(3);
    // One larger than the whole budget is refused outright.
    expect(j.add(SUBJECT, parts(message(20_000), 5000, 99)[0] as MessagePart, 3)).toEqual({
      joined: null,
      dropped: "too_large",
    });
  });

  it("parts that disagree about their message drop it", () => {
    const { j } = joiner();
    const ps = parts(message(3000), 400, 7);
    j.add(SUBJECT, ps[0] as MessagePart, 0);
    const other = parts(message(3100), 400, 7)[1] as MessagePart; // same id, another length
    expect(j.add(SUBJECT, other, 0)).toEqual({ joined: null, dropped: "malformed" });
    expect(j.pending.messages).toBe(0);
    const short = { ...(ps[1] as MessagePart), bytes: (ps[1] as MessagePart).bytes.subarray(1) };
    expect(j.add(SUBJECT, short, 0)).toEqual({ joined: null, dropped: "malformed" });
  });

  it("the same message id from two replicas, epochs or subjects are two messages", () => {
    const { j } = joiner();
    const x = parts(message(900, 1), 400, 3, "r1");
    const y = parts(message(900, 2), 400, 3, "r2");
    const z = parts(message(900, 3), 400, 3, "r1").map((p) => ({ ...p, epoch: 6n }));
    const results = [0, 1, 2].flatMap((i) =>
      [x, y, z].map((ps, k) => j.add(k === 2 ? "kvroute.slots" : SUBJECT, ps[i] as MessagePart, 0).joined),
    );
    expect(results.filter((r) => r !== null)).toEqual([message(900, 1), message(900, 2), message(900, 3)]);
  });
});
