// Stress: 4 worker threads, 10k requests through gateway mode to a loopback upstream. Every
// request must arrive exactly once and come back to its own client, and the in-flight counter the
// filter keeps in shared data (CAS retries across threads, preemption between read and write)
// must return to exactly 0 with started == finished == 10k.
import http from "node:http";
import { afterAll, describe, expect, it } from "vitest";
import { type Gateway, startGateway } from "../../host/gateway.ts";
import { moduleFile, startUpstream, type Upstream } from "./testing.ts";

const TOTAL = 10_000;
const CONCURRENCY = 64;

let gw: Gateway | null = null;
let up: Upstream | null = null;
afterAll(async () => {
  await gw?.close();
  await up?.close();
});

function request(agent: http.Agent, url: string, id: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "POST", agent, headers: { "x-request-id": id } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(`body-${id}`);
  });
}

describe("stress", () => {
  it("10k requests over 4 threads: none lost or duplicated, exact in-flight accounting", async () => {
    const seen = new Map<string, number>();
    up = await startUpstream((req, body, res) => {
      const id = String(req.headers["x-request-id"]);
      seen.set(id, (seen.get(id) ?? 0) + 1);
      // Answer a little later so requests overlap across threads.
      setImmediate(() => res.end(`${id}|${body}|${req.headers["x-inflight-at-start"]}`));
    });
    gw = await startGateway({
      wasm: moduleFile("inflight"),
      threads: 4,
      pluginConfig: `dest=${up.address}`,
      preemption: 0.25,
      keepLogs: 100,
    });
    const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
    const started = performance.now();
    let next = 0;
    let bad = 0;
    let maxInflightSeen = 0;
    const worker = async () => {
      while (next < TOTAL) {
        const id = `req-${next++}`;
        const r = await request(agent, `${gw?.url}/v1/completions`, id);
        const [echoId, echoBody, inflight] = r.body.split("|");
        if (r.status !== 200 || echoId !== id || echoBody !== `body-${id}`) bad++;
        maxInflightSeen = Math.max(maxInflightSeen, Number(inflight));
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const seconds = (performance.now() - started) / 1000;
    agent.destroy();

    const h = gw.host;
    expect(bad).toBe(0);
    expect(seen.size).toBe(TOTAL);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    expect(gw.accessLog).toHaveLength(TOTAL);
    expect(Buffer.from(h.sharedData("inflight")?.value ?? []).toString()).toBe("0");
    expect(h.counter("inflight_started")).toBe(BigInt(TOTAL));
    expect(h.counter("inflight_finished")).toBe(BigInt(TOTAL));
    const peak = Number(Buffer.from(h.sharedData("inflight_peak")?.value ?? []).toString());
    expect(peak).toBeGreaterThan(4);
    expect(peak).toBeLessThanOrEqual(CONCURRENCY);
    expect(maxInflightSeen).toBeLessThanOrEqual(peak);
    // Interleaving really happened: threads were preempted and CAS writes were retried.
    expect(h.core.scheduler.preemptions).toBeGreaterThan(0);
    expect(h.counter("inflight_cas_retries")).toBeGreaterThan(0n);
    const perThread = new Map<string, number>();
    for (const e of gw.accessLog) perThread.set(e.thread, (perThread.get(e.thread) ?? 0) + 1);
    expect([...perThread.values()]).toEqual([2500, 2500, 2500, 2500]);
    console.log(
      `stress: ${TOTAL} requests in ${seconds.toFixed(2)} s (${Math.round(TOTAL / seconds)} req/s), peak in-flight ${peak}, ` +
        `CAS retries ${h.counter("inflight_cas_retries")}, preemptions ${h.core.scheduler.preemptions}`,
    );
  }, 60_000);

  it("the same load with unconditional writes (cas 0) loses updates — the interleaving is real", async () => {
    const u = await startUpstream((_req, _body, res) => setImmediate(() => res.end("ok")));
    const g = await startGateway({
      wasm: moduleFile("inflight"),
      threads: 4,
      pluginConfig: `dest=${u.address};unsafe=1`,
      preemption: 0.25,
      keepLogs: 100,
    });
    const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
    let next = 0;
    const n = 2000;
    const worker = async () => {
      while (next < n) await request(agent, `${g.url}/`, `u-${next++}`);
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    agent.destroy();
    expect(g.accessLog).toHaveLength(n);
    expect(Buffer.from(g.host.sharedData("inflight")?.value ?? []).toString()).not.toBe("0");
    await g.close();
    await u.close();
  });
});
