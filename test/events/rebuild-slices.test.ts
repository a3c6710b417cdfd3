// A rebuild re-applies up to 10 000 buffered batches (vLLM's buffer_steps), then the live
// batches held meanwhile (issue 29, item 4). Applied in one go it held the event loop for
// seconds (/healthz waited 2.8 s). It is applied in slices: timers, /healthz and other ranks get
// turns in between, and live batches arriving meanwhile still wait behind it.

import { get } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createHttpServer, sendJson } from "../../control-plane/src/api/http-server.ts";
import type { RecordingSink } from "./harness.ts";
import { until } from "./harness.ts";
import { deferredReplay, frames, makeIngest, replayed } from "./ingest-kit.ts";
import { range } from "./msgspec.ts";

const BUFFERED = 10_000;
const HELD = 1_000;
const cleanups: (() => void | Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The control plane's /healthz, on its own HTTP server, in this process. */
async function healthz(): Promise<string> {
  const server = createHttpServer(
    { "GET /healthz": (_q, res) => sendJson(res, 200, { ok: true }) },
    pino({ level: "silent" }),
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/healthz`;
}

function httpStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    }).on("error", reject);
  });
}

describe("a rebuild from the engine's replay buffer", () => {
  it("of 10 000 batches lets timers and /healthz run between slices, live batches held until after it", async () => {
    const url = await healthz();
    const d = deferredReplay();
    const { ingest, stats, sink } = makeIngest(d.fn);
    const delivered = () => (sink as RecordingSink).log.length;
    ingest.connected(); // a new subscription: everything the engine holds, from 0
    expect(d.calls).toEqual([0]);
    // The engine goes on publishing while the request is out: held.
    for (const s of range(BUFFERED, HELD)) ingest.onFrames(frames(s));
    expect(stats.pending).toBe(HELD);

    // Every turn of the event loop, what had been applied by then.
    const turns: number[] = [];
    let ticking = true;
    const tick = () => {
      turns.push(delivered());
      if (ticking) setImmediate(tick);
    };
    let timerAt = -1;
    let healthzAt = -1;
    let healthzStatus = 0;
    let liveInjected = false;
    const probe = () => {
      const n = delivered();
      // Mid-rebuild: a live batch arrives, and an HTTP client asks /healthz.
      if (!liveInjected && n > 0 && n < BUFFERED) {
        liveInjected = true;
        ingest.onFrames(frames(BUFFERED + HELD));
        void httpStatus(url).then((status) => {
          healthzStatus = status;
          healthzAt = delivered();
        });
      }
      if (n < BUFFERED + HELD + 1) setImmediate(probe);
    };

    d.release({ ok: true, batches: replayed(range(0, BUFFERED)) });
    setImmediate(tick);
    setImmediate(probe);
    setTimeout(() => {
      timerAt = delivered();
    }, 1);
    await ingest.idle();
    ticking = false;
    await until(() => healthzAt >= 0, 5_000, "the /healthz answer");

    const total = BUFFERED + HELD + 1;
    // Turns came while the buffer was being applied, and while the held batches were.
    expect(turns.some((n) => n > 0 && n < BUFFERED)).toBe(true);
    expect(turns.some((n) => n > BUFFERED && n < total)).toBe(true);
    expect(timerAt).toBeGreaterThanOrEqual(0);
    expect(timerAt).toBeLessThan(total);
    expect(healthzStatus).toBe(200);
    expect(healthzAt).toBeLessThan(total);
    // Order kept: the buffer, the batches held during the request, the one that came mid-rebuild.
    expect((sink as RecordingSink).log.map((e) => (e.kind === "event" ? e.meta.seq : -1))).toEqual(
      range(0, total),
    );
    expect(stats.pending).toBe(0);
    expect(stats.replaying).toBe(false);
    expect(stats.resets).toEqual({ gap: 0, restart: 0 });
    expect(stats.dropped).toEqual({});
  });

  it("stops between slices when the subscriber stops", async () => {
    const d = deferredReplay();
    const { ingest, sink } = makeIngest(d.fn);
    ingest.connected();
    d.release({ ok: true, batches: replayed(range(0, BUFFERED)) });
    await until(() => (sink as RecordingSink).log.length > 0, 5_000, "the rebuild to start");
    ingest.stop();
    const at = (sink as RecordingSink).log.length;
    await ingest.idle();
    expect((sink as RecordingSink).log.length).toBe(at);
    expect(at).toBeLessThan(BUFFERED);
  });
});
