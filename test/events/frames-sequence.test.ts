import { describe, expect, it } from "vitest";
import {
  hostOf,
  offsetEndpoint,
  publisherBinds,
  replayEndpoint,
  subscriberEndpoint,
  subscriptionFor,
} from "../../control-plane/src/events/endpoints.ts";
import {
  encodeSeq,
  parseLiveMessage,
  parseReplayFrames,
  readSeq,
} from "../../control-plane/src/events/frames.ts";
import { SequenceTracker } from "../../control-plane/src/events/sequence.ts";

const b = (s: string) => Buffer.from(s);
const END = Buffer.alloc(8, 0xff);
const E = Buffer.alloc(0);

describe("live frames", () => {
  it("parses [topic, seq8 BE, payload]", () => {
    const r = parseLiveMessage([b("kv"), encodeSeq(258), b("x")]);
    expect(r).toMatchObject({ ok: true, value: { seq: 258 } });
    expect(encodeSeq(258)).toEqual(Buffer.from([0, 0, 0, 0, 0, 0, 1, 2]));
  });

  it("reads every sequence up to 2^53 - 1 exactly and refuses the next", () => {
    for (const seq of [
      0,
      1,
      255,
      256,
      2 ** 32 - 1,
      2 ** 32,
      2 ** 32 + 1,
      2 ** 40 + 12345,
      Number.MAX_SAFE_INTEGER,
    ]) {
      expect(readSeq(encodeSeq(seq))).toEqual({ ok: true, value: seq });
    }
    const past = Buffer.alloc(8);
    past.writeBigUInt64BE(2n ** 53n);
    expect(readSeq(past)).toEqual({ ok: false, error: "seq_range" });
  });

  it.each([
    [[b("kv"), encodeSeq(1)], "frame_count"],
    [[b("kv"), encodeSeq(1), b("p"), b("extra")], "frame_count"],
    [[], "frame_count"],
    [[b("kv"), Buffer.alloc(7), b("p")], "seq_size"],
    [[b("kv"), Buffer.alloc(9), b("p")], "seq_size"],
    [[b("kv"), END, b("p")], "seq_range"],
  ])("rejects %#", (frames, error) => {
    expect(parseLiveMessage(frames as Buffer[])).toEqual({ ok: false, error });
  });
});

describe("replay frames", () => {
  it("reads the topic form and the older form, and both end markers", () => {
    expect(parseReplayFrames([E, b("kv"), encodeSeq(5), b("p")])).toMatchObject({
      ok: true,
      value: { kind: "batch", seq: 5, topic: b("kv") },
    });
    expect(parseReplayFrames([E, encodeSeq(6), b("p")])).toMatchObject({
      ok: true,
      value: { kind: "batch", seq: 6, topic: null },
    });
    expect(parseReplayFrames([E, E, END, E])).toEqual({ ok: true, value: { kind: "end" } });
    expect(parseReplayFrames([E, END, E])).toEqual({ ok: true, value: { kind: "end" } });
  });

  it("rejects a missing delimiter, wrong counts and bad sequences", () => {
    expect(parseReplayFrames([b("x"), encodeSeq(1), b("p")]).ok).toBe(false);
    expect(parseReplayFrames([E, encodeSeq(1)]).ok).toBe(false);
    expect(parseReplayFrames([E, b("kv"), Buffer.alloc(3), b("p")]).ok).toBe(false);
  });
});

describe("sequence tracker", () => {
  it("applies in order, flags gaps, duplicates and restarts", () => {
    const t = new SequenceTracker();
    expect(t.classify(0)).toEqual({ kind: "apply" });
    t.advance(0);
    expect(t.classify(1)).toEqual({ kind: "apply" });
    t.advance(1);
    expect(t.classify(1)).toEqual({ kind: "duplicate" });
    expect(t.classify(5)).toEqual({ kind: "gap", from: 2, initial: false });
    expect(t.classify(0)).toEqual({ kind: "restart" });
    t.advance(9);
    expect(t.classify(3)).toEqual({ kind: "restart" });
    // While draining a replay that started at 7, lower numbers in its range are duplicates.
    expect(t.classify(8, 7)).toEqual({ kind: "duplicate" });
    expect(t.classify(3, 7)).toEqual({ kind: "restart" });
  });

  it("treats a first message past 0 as an initial gap, and so a stream after a restart", () => {
    const t = new SequenceTracker();
    expect(t.classify(40)).toEqual({ kind: "gap", from: 0, initial: true });
    t.advance(40);
    t.restart();
    expect(t.classify(3)).toEqual({ kind: "gap", from: 0, initial: true });
    expect(t.classify(0)).toEqual({ kind: "apply" });
  });
});

describe("endpoints (vLLM rules)", () => {
  it("offsets tcp ports and inproc names by rank", () => {
    expect(offsetEndpoint("tcp://*:5557", 0)).toBe("tcp://*:5557");
    expect(offsetEndpoint("tcp://*:5557", 3)).toBe("tcp://*:5560");
    expect(offsetEndpoint("inproc://cache", 2)).toBe("inproc://cache_dp2");
    expect(() => offsetEndpoint("ipc:///tmp/kv", 1)).toThrow();
  });

  it("binds when the engine connects, connects when it binds", () => {
    expect(publisherBinds("tcp://*:5557")).toBe(true);
    expect(publisherBinds("tcp://[::]:5557")).toBe(true);
    expect(publisherBinds("ipc:///tmp/kv")).toBe(true);
    expect(publisherBinds("tcp://router:5557")).toBe(false);
    expect(subscriberEndpoint("tcp://*:5557", "10.0.0.7", 2)).toEqual({
      endpoint: "tcp://10.0.0.7:5559",
      mode: "connect",
    });
    expect(subscriberEndpoint("tcp://kvroute:6000", "10.0.0.7", 1)).toEqual({
      endpoint: "tcp://*:6001",
      mode: "bind",
    });
    expect(subscriberEndpoint("tcp://*:5557", "fd00::1", 0).endpoint).toBe("tcp://[fd00::1]:5557");
    expect(replayEndpoint("tcp://*:5657", "10.0.0.7", 1)).toBe("tcp://10.0.0.7:5658");
    // A publisher bound to a concrete address is reached there, not at the worker's host.
    expect(subscriberEndpoint("tcp://[::1]:5557", "10.0.0.7", 1).endpoint).toBe("tcp://[::1]:5558");
    expect(replayEndpoint("tcp://10.9.9.9:5657", "10.0.0.7", 0)).toBe("tcp://10.9.9.9:5657");
  });

  it("derives a slot's subscription from the engine's config and HTTP address", () => {
    expect(
      subscriptionFor("p/10.0.0.11:8000#2", 2, "10.0.0.11:8000", {
        endpoint: "tcp://*:5557",
        replayEndpoint: "tcp://*:5657",
        topic: "kv",
      }),
    ).toEqual({
      slotKey: "p/10.0.0.11:8000#2",
      rank: 2,
      endpoint: "tcp://10.0.0.11:5559",
      mode: "connect",
      replayEndpoint: "tcp://10.0.0.11:5659",
      topic: "kv",
    });
    expect(
      subscriptionFor("k", 1, "[fd00::2]:8000", { endpoint: "tcp://kvroute:7000", topic: "" }),
    ).toMatchObject({
      endpoint: "tcp://*:7001",
      mode: "bind",
      replayEndpoint: null,
    });
    expect(hostOf("[fd00::2]:8000")).toBe("fd00::2");
    expect(hostOf("worker-1:8000")).toBe("worker-1");
  });
});
