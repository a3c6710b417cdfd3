// The shipped filter reads the engine's served cached tokens from the answer as it streams to the
// client (build/kvroute.wasm in the Node host, in front of engines that answer what each test
// says), and reports them next to its prediction: which answers it reads (2xx, JSON or SSE, not
// compressed), the body unchanged for the client, chunks cut anywhere, its byte budget, records of
// the previous module's layout still in the report queue, and the sample of streams it reads.
import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  SERVED_CACHED,
  SERVED_CUT,
  SERVED_UNREAD,
  SERVED_USAGE,
} from "../../control-plane/src/reports/report-codec.ts";
import { chatBody, type Stack, startStack, synced, until } from "./harness.ts";

interface Decision {
  requestId: string;
  slot: number;
  cachedBytes: number;
  servedFlags?: number;
  servedCachedTokens?: number;
}

const usageJson = (cached: number) =>
  JSON.stringify({
    id: "chatcmpl-1",
    object: "chat.completion",
    choices: [{ index: 0, message: { role: "assistant", content: '"cached_tokens":1 {"usage":{}}' } }],
    usage: {
      prompt_tokens: 500,
      total_tokens: 504,
      completion_tokens: 4,
      prompt_tokens_details: { cached_tokens: cached },
    },
  });

const sse = (final: object | null) =>
  [
    'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n',
    'data: {"choices":[{"index":0,"delta":{"content":"lo \\"usage\\":{\\"prompt_tokens_details\\":{\\"cached_tokens\\":7}}"}}]}\n\n',
    ...(final === null ? [] : [`data: ${JSON.stringify({ choices: [], usage: final })}\n\n`]),
    "data: [DONE]\n\n",
  ].join("");

/** Writes the body in pieces of `piece` bytes, each its own write (and usually its own chunk). */
function answer(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: string,
  piece = 0,
) {
  res.writeHead(status, headers);
  if (piece <= 0) {
    res.end(body);
    return;
  }
  const bytes = Buffer.from(body);
  const writeFrom = (at: number) => {
    if (at >= bytes.length) {
      res.end();
      return;
    }
    res.write(bytes.subarray(at, at + piece));
    setImmediate(() => writeFrom(at + piece));
  };
  writeFrom(0);
}

async function decisionsOf(s: Stack): Promise<Map<string, Decision>> {
  const status = (await (await fetch(`${s.cp.url}/v1/status`)).json()) as { recentDecisions: Decision[] };
  return new Map(status.recentDecisions.map((d) => [d.requestId, d]));
}

async function reported(s: Stack, id: string): Promise<Decision> {
  let d: Decision | undefined;
  await until(async () => {
    d = (await decisionsOf(s)).get(id);
    return d !== undefined;
  }, `report of ${id}`);
  return d as Decision;
}

/** One request through the gateway with the engine answering `reply`; the client's body. */
async function through(
  s: Stack,
  id: string,
  reply: (res: ServerResponse) => void,
): Promise<{ status: number; body: string }> {
  for (const e of s.engines) e.reply = (res) => reply(res);
  const r = await fetch(`${s.gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": id },
    body: chatBody("You are terse.", `question ${id}`),
  });
  // A compressed or cut answer may not decode on the client: what the report says is the point.
  return { status: r.status, body: await r.text().catch(() => "(undecodable)") };
}

const JSON_TYPE = { "content-type": "application/json" };
const SSE_TYPE = { "content-type": "text/event-stream; charset=utf-8" };

describe("served cached tokens read by the shipped filter", () => {
  let s: Stack;
  beforeAll(async () => {
    // Every stream read (the default reads one in four: see the last describe).
    s = await startStack({ engines: [[0, 1]], pluginConfig: { usageScanStreamSample: 1 } });
    await synced(s);
  }, 30_000);
  afterAll(async () => s?.close());

  it("reads them from a JSON answer and leaves the body as the engine wrote it", async () => {
    const body = usageJson(96);
    const r = await through(s, "json-96", (res) => answer(res, 200, JSON_TYPE, body));
    expect(r).toEqual({ status: 200, body });
    const d = await reported(s, "json-96");
    expect(d).toMatchObject({ servedFlags: SERVED_USAGE | SERVED_CACHED, servedCachedTokens: 96 });
    expect(d.slot).toBeLessThan(0xffff);
  });

  it("reads them from the final SSE usage event, cut into 5-byte writes", async () => {
    const body = sse({
      prompt_tokens: 500,
      completion_tokens: 4,
      prompt_tokens_details: { cached_tokens: 480 },
    });
    const r = await through(s, "sse-480", (res) => answer(res, 200, SSE_TYPE, body, 5));
    expect(r.body).toBe(body);
    expect(await reported(s, "sse-480")).toMatchObject({
      servedFlags: SERVED_USAGE | SERVED_CACHED,
      servedCachedTokens: 480,
    });
  });

  it("reads the usage event after events whose content spells usage, its key cut between two writes", async () => {
    const fake = '"usage":{"prompt_tokens_details":{"cached_tokens":7}}';
    const final = `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 500, prompt_tokens_details: { cached_tokens: 320 } } })}\n\n`;
    const cut = final.indexOf('"usage"') + 3;
    const pieces = [
      ...[fake, "usage", `say ${fake}`].map(
        (content) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`,
      ),
      final.slice(0, cut),
      final.slice(cut),
      "data: [DONE]\n\n",
    ];
    const r = await through(s, "sse-spelled", (res) => {
      res.writeHead(200, SSE_TYPE);
      const next = (k: number) => {
        if (k === pieces.length) res.end();
        else {
          res.write(pieces[k]);
          setImmediate(() => next(k + 1));
        }
      };
      next(0);
    });
    expect(r.body).toBe(pieces.join(""));
    expect(await reported(s, "sse-spelled")).toMatchObject({
      servedFlags: SERVED_USAGE | SERVED_CACHED,
      servedCachedTokens: 320,
    });
  });

  it("says usage without details, and nothing for a stream without usage", async () => {
    await through(s, "sse-nodetails", (res) =>
      answer(res, 200, SSE_TYPE, sse({ prompt_tokens: 500, completion_tokens: 4 }), 3),
    );
    await through(s, "sse-nousage", (res) => answer(res, 200, SSE_TYPE, sse(null)));
    const a = await reported(s, "sse-nodetails");
    expect(a.servedFlags).toBe(SERVED_USAGE);
    expect(a.servedCachedTokens).toBeUndefined();
    const b = await reported(s, "sse-nousage");
    expect(b.servedFlags).toBe(0);
    expect(b.servedCachedTokens).toBeUndefined();
  });

  it("does not read errors, compressed answers or other content types", async () => {
    const body = usageJson(64);
    await through(s, "status-500", (res) => answer(res, 500, JSON_TYPE, body));
    await through(s, "gzip", (res) => answer(res, 200, { ...JSON_TYPE, "content-encoding": "gzip" }, body));
    await through(s, "text", (res) => answer(res, 200, { "content-type": "text/plain" }, body));
    await through(s, "no-type", (res) => answer(res, 200, {}, body));
    // The same answer labelled plainly is read: the gate, not the body, made the difference.
    await through(s, "identity", (res) =>
      answer(res, 200, { "content-type": "Application/JSON", "content-encoding": "identity" }, body),
    );
    for (const id of ["status-500", "gzip", "text", "no-type"]) {
      const d = await reported(s, id);
      expect(d.servedFlags, id).toBe(0);
      expect(d.servedCachedTokens, id).toBeUndefined();
    }
    expect((await reported(s, "identity")).servedCachedTokens).toBe(64);
  });

  it("reports a truncated answer as unknown", async () => {
    const body = usageJson(32);
    await through(s, "truncated", (res) => {
      res.writeHead(200, { ...JSON_TYPE, "content-length": String(body.length) });
      res.write(body.slice(0, body.length - 2));
      setImmediate(() => res.destroy());
    });
    const d = await reported(s, "truncated");
    expect(d.servedCachedTokens).toBeUndefined();
  });

  it("reports records of the previous module's layout (queue type 1) as served unknown", async () => {
    const q = s.gateway.host.core.queues;
    const token = q.resolve("kvroute", "kvr.reports");
    expect(token).toBeGreaterThan(0);
    const id = Buffer.from("old-module");
    const rec = Buffer.alloc(25 + id.length);
    rec.writeUInt8(1, 0);
    rec.writeUInt16LE(1, 1); // slot
    rec.writeUInt16LE(200, 3); // status
    rec.writeUInt8(1, 5); // outcome: prefix hit
    rec.writeUInt32LE(1000, 7); // prompt bytes
    rec.writeUInt32LE(768, 11); // cached bytes
    rec.writeUInt32LE(12, 15); // ttft
    rec.writeUInt32LE(34, 19); // duration
    rec.writeUInt16LE(id.length, 23);
    id.copy(rec, 25);
    q.enqueue(token, new Uint8Array(rec));
    const d = await reported(s, "old-module");
    expect(d).toMatchObject({ slot: 1, cachedBytes: 768, servedFlags: 0 });
    expect(d.servedCachedTokens).toBeUndefined();
  });
});

describe("the response scan's byte budget", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ engines: [[0]], pluginConfig: { usageScanBytes: 200, usageScanStreamSample: 1 } });
    await synced(s);
  }, 30_000);
  afterAll(async () => s?.close());

  it("stops at usageScanBytes, says so, and still passes the whole answer on", async () => {
    const long = sse({
      prompt_tokens: 500,
      completion_tokens: 4,
      prompt_tokens_details: { cached_tokens: 16 },
    });
    expect(long.length).toBeGreaterThan(200);
    const r = await through(s, "cut", (res) => answer(res, 200, SSE_TYPE, long, 50));
    expect(r.body).toBe(long);
    const d = await reported(s, "cut");
    expect(d.servedFlags).toBe(SERVED_CUT);
    expect(d.servedCachedTokens).toBeUndefined();
    // Within the budget the same engine's short answer is read.
    const short = 'data: {"usage":{"prompt_tokens_details":{"cached_tokens":16}}}\n\n';
    await through(s, "short", (res) => answer(res, 200, SSE_TYPE, short));
    expect((await reported(s, "short")).servedCachedTokens).toBe(16);
  });
});

describe("the sample of streams read (default usageScanStreamSample: 4)", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ engines: [[0, 1]] });
    await synced(s);
  }, 30_000);
  afterAll(async () => s?.close());

  it("reads the first stream of each worker thread in four and every JSON answer; the rest are unread", async () => {
    const body = sse({
      prompt_tokens: 500,
      completion_tokens: 4,
      prompt_tokens_details: { cached_tokens: 64 },
    });
    const streams = Array.from({ length: 8 }, (_, k) => `sampled-sse-${k}`);
    for (const id of streams) await through(s, id, (res) => answer(res, 200, SSE_TYPE, body, 40));
    const jsons = Array.from({ length: 4 }, (_, k) => `sampled-json-${k}`);
    for (const id of jsons) await through(s, id, (res) => answer(res, 200, JSON_TYPE, usageJson(32)));
    const sse8 = await Promise.all(streams.map((id) => reported(s, id)));
    const read = sse8.filter((d) => d.servedCachedTokens === 64);
    const unread = sse8.filter((d) => d.servedFlags === SERVED_UNREAD && d.servedCachedTokens === undefined);
    // Two worker threads, each reading its 1st and 5th stream: 8 streams split n + (8 − n) read 2 or 3.
    expect(read.length + unread.length).toBe(8);
    expect(read.length).toBeGreaterThanOrEqual(2);
    expect(read.length).toBeLessThanOrEqual(3);
    for (const id of jsons) expect((await reported(s, id)).servedCachedTokens).toBe(32);
  });
});
