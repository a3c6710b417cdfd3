import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ByteWriter } from "../../control-plane/src/common/byte-writer.ts";
import { RecentDecisions } from "../../control-plane/src/reports/recent-decisions.ts";
import {
  decodeReport,
  encodeReport,
  type Report,
  ReportDecodeError,
  SERVED_CACHED,
  SERVED_CUT,
  SERVED_USAGE,
} from "../../control-plane/src/reports/report-codec.ts";
import { createReportHandler } from "../../control-plane/src/reports/report-handler.ts";

const TOKEN = "report-token-0123456789";
const sample: Report = {
  gateway: "envoy-7",
  inflight: new Map([
    [0, 3],
    [5, 1],
  ]),
  finished: [
    {
      slot: 5,
      status: 200,
      outcome: 1,
      priority: 2,
      promptBytes: 9000,
      cachedBytes: 8192,
      servedFlags: SERVED_USAGE | SERVED_CACHED,
      servedCachedTokens: 2048,
      ttftMs: 41,
      durationMs: 900,
      requestId: "req-1",
    },
    {
      slot: 0,
      status: 0,
      outcome: 2,
      priority: 0,
      promptBytes: 10,
      cachedBytes: 0,
      servedFlags: 0,
      ttftMs: 0,
      durationMs: 3,
      requestId: "",
    },
  ],
  speculative: [{ slot: 5, depth: 70, hash: 2n ** 64n - 2n, ttlMs: 2000 }],
  sessions: [
    { slot: 5, outcome: 1, hash: 2n ** 64n - 3n, expiresMs: 1_790_000_000_000n },
    { slot: 0, outcome: 2, hash: 7n, expiresMs: 2n ** 64n - 1n },
  ],
};

describe("report codec", () => {
  it("round-trips a report", () => {
    expect(decodeReport(encodeReport(sample))).toEqual(sample);
  });

  it("keeps served unknown apart from served 0, and a cut scan apart from an answer without usage", () => {
    const one = (f: Partial<Report["finished"][number]>) => {
      const base = {
        slot: 1,
        status: 200,
        outcome: 1,
        promptBytes: 5,
        cachedBytes: 0,
        ttftMs: 1,
        durationMs: 2,
      };
      const r = decodeReport(encodeReport({ ...sample, finished: [{ ...base, requestId: "", ...f }] }));
      return r.finished[0];
    };
    expect(one({ servedCachedTokens: 0 })).toMatchObject({
      servedFlags: SERVED_USAGE | SERVED_CACHED,
      servedCachedTokens: 0,
    });
    expect(one({ servedFlags: SERVED_USAGE })?.servedCachedTokens).toBeUndefined();
    expect(one({ servedFlags: SERVED_CUT })).toMatchObject({ servedFlags: SERVED_CUT });
    expect(one({ servedCachedTokens: 2 ** 32 - 1 })?.servedCachedTokens).toBe(2 ** 32 - 1);
  });

  it("still reads protocol 1 (a gateway running the previous filter): served unknown, priority standard", () => {
    const w = new ByteWriter().u32(0x5252564b).u16(1).u16(0).str16("old-gw");
    w.u32(0).u32(1);
    // slot, status, outcome, reserved, prompt, cached, ttft, duration, request id
    w.u16(3).u16(200).u8(1).u8(0).u32(900).u32(512).u32(7).u32(20).str16("r1");
    w.u32(0);
    const r = decodeReport(w.finish());
    expect(r.finished).toEqual([
      {
        slot: 3,
        status: 200,
        outcome: 1,
        priority: 0,
        promptBytes: 900,
        cachedBytes: 512,
        ttftMs: 7,
        durationMs: 20,
        requestId: "r1",
      },
    ]);
    const v4 = w.finish().slice();
    new DataView(v4.buffer).setUint16(4, 4, true);
    expect(() => decodeReport(v4)).toThrow(/protocol 4/);
  });

  it("reads protocol 2 (no session entries) and refuses session entries in it", () => {
    const w = new ByteWriter().u32(0x5252564b).u16(2).u16(0).str16("gw-2");
    w.u32(0).u32(0).u32(0);
    const v2 = w.finish();
    expect(decodeReport(v2)).toEqual({
      gateway: "gw-2",
      inflight: new Map(),
      finished: [],
      speculative: [],
      sessions: [],
    });
    // The same bytes with a session section are trailing garbage to protocol 2.
    const withSessions = new ByteWriter().bytes(v2).u32(1).u16(3).u8(0).u64(5n).u64(9n).finish();
    expect(() => decodeReport(withSessions)).toThrow(/trailing/);
    const v3 = withSessions.slice();
    new DataView(v3.buffer).setUint16(4, 3, true);
    expect(decodeReport(v3).sessions).toEqual([{ slot: 3, outcome: 0, hash: 5n, expiresMs: 9n }]);
  });

  it("refuses truncated, trailing, oversized-count and foreign bodies", () => {
    const bytes = encodeReport(sample);
    for (let cut = 0; cut < bytes.length; cut += 7)
      expect(() => decodeReport(bytes.subarray(0, cut))).toThrow(ReportDecodeError);
    expect(() => decodeReport(new Uint8Array([...bytes, 1]))).toThrow(/trailing/);
    const huge = bytes.slice();
    new DataView(huge.buffer).setUint32(8 + 2 + 7, 0xffffffff, true); // inflight count
    expect(() => decodeReport(huge)).toThrow(/more than/);
    expect(() => decodeReport(new TextEncoder().encode('{"json": true}'))).toThrow(/magic/);
  });
});

describe("POST /v1/report", () => {
  let server: Server;
  let url: string;
  const applied: Report[] = [];

  beforeEach(async () => {
    applied.length = 0;
    const handler = createReportHandler({ authToken: TOKEN, maxBytes: 4096, apply: (r) => applied.push(r) });
    server = createServer((req, res) => void handler(req, res));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/report`;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const post = (body: Uint8Array, token = TOKEN) =>
    fetch(url, {
      method: "POST",
      body: Buffer.from(body),
      headers: { authorization: `Bearer ${token}`, "content-type": "application/octet-stream" },
    });

  it("applies a valid report", async () => {
    expect((await post(encodeReport(sample))).status).toBe(204);
    expect(applied).toEqual([sample]);
  });

  it("refuses a missing token, a malformed body and an oversized body without applying anything", async () => {
    expect((await post(encodeReport(sample), "nope-nope-nope-nope")).status).toBe(401);
    const bad = await post(encodeReport(sample).subarray(0, 20));
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("bad_report");
    expect((await post(new Uint8Array(5000))).status).toBe(413);
    expect(applied).toEqual([]);
  });
});

describe("recent decisions", () => {
  it("keeps the newest N, newest first", () => {
    const ring = new RecentDecisions(3);
    const base = sample.finished[0] as Report["finished"][number];
    for (let i = 0; i < 5; i++) ring.add({ ...base, requestId: `r${i}`, gateway: "g", atMs: i });
    expect(ring.list().map((d) => d.requestId)).toEqual(["r4", "r3", "r2"]);
    const small = new RecentDecisions(3);
    small.add({ ...base, requestId: "only", gateway: "g", atMs: 0 });
    expect(small.list().map((d) => d.requestId)).toEqual(["only"]);
  });
});
