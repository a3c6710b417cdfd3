// Report-driven observability through the assembled control plane: accepted and refused
// reports, routed requests by outcome, the bytes behind the hit ratio, per-slot load gauges in
// /metrics, and the decisions feed and hit-rate series in /v1/status. Plus the series itself.
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HitRateSeries } from "../../control-plane/src/api/hit-rate-series.ts";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import {
  encodeReport,
  type FinishedRequest,
  SERVED_CACHED,
  SERVED_CUT,
  SERVED_UNREAD,
  SERVED_USAGE,
} from "../../control-plane/src/reports/report-codec.ts";
import { QWEN3 } from "../sim/helpers.ts";
import { until } from "../until.ts";

const TOKEN = "dashboard-test-token-0123";
let engine: Server;
let cp: ControlPlane;

beforeAll(async () => {
  engine = createServer((_req, res) => {
    res
      .writeHead(200)
      .end(
        'vllm:num_requests_running{engine="0"} 2\nvllm:num_requests_waiting{engine="1"} 4\nvllm:kv_cache_usage_perc{engine="1"} 0.25\n',
      );
  });
  await new Promise<void>((r) => engine.listen(0, "127.0.0.1", r));
  const address = `127.0.0.1:${(engine.address() as AddressInfo).port}`;
  const cfg = parseConfig(
    {
      authToken: TOKEN,
      pools: [{ name: "qwen", models: ["q"], tokenizer: QWEN3, endpoints: [{ address, ranks: [0, 1] }] }],
      cache: { buckets: 64, ways: 4 },
      load: { scrapeIntervalMs: 50 },
    },
    "test",
    {},
  );
  cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
});

afterAll(async () => {
  await cp?.stop();
  engine.closeAllConnections();
  await new Promise((r) => engine.close(r));
});

const finished = (slot: number, outcome: number, promptBytes: number, cachedBytes: number, status = 200) =>
  ({
    slot,
    status,
    outcome,
    promptBytes,
    cachedBytes,
    ttftMs: 30,
    durationMs: 90,
    requestId: `r-${slot}-${outcome}`,
  }) as FinishedRequest;

const post = (body: Uint8Array | string, auth = true) =>
  fetch(`${cp.url}/v1/report`, {
    method: "POST",
    body: typeof body === "string" ? body : Buffer.from(body),
    headers: auth ? { authorization: `Bearer ${TOKEN}` } : {},
  });

/** A report past the size limit, on its own connection: the server answers 413 before the
 * body is through, which leaves a pooled keep-alive connection unusable for the next fetch. */
function postOversized(): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${cp.url}/v1/report`, {
      method: "POST",
      agent: false,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    req.on("response", (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
      req.destroy();
    });
    req.on("error", reject);
    req.end(Buffer.alloc(17 << 20));
  });
}

describe("report metrics", () => {
  it("counts reports, refusals, outcomes and bytes, and exposes per-slot load", async () => {
    const report = encodeReport({
      gateway: "gw-1",
      inflight: new Map([[1, 5]]),
      finished: [
        finished(0, 1, 1000, 800),
        finished(1, 0, 1000, 0),
        finished(1, 5, 500, 200, 0),
        finished(0, 9, 10, 0),
      ],
      speculative: [],
    });
    expect((await post(report)).status).toBe(204);
    expect((await post(report, false)).status).toBe(401);
    expect((await post("garbage")).status).toBe(400);
    expect(await postOversized()).toBe(413);

    // The per-slot gauges need a first scrape of the engine.
    let text = "";
    await until("a scrape in /metrics", async () => {
      text = await (await fetch(`${cp.url}/metrics`)).text();
      return text.includes('kvroute_slot_waiting{pool="qwen",slot="qwen/') && / 4$/m.test(text);
    });
    const line = (name: string) => text.split("\n").find((l) => l.startsWith(name));
    expect(line("kvroute_reports_total ")).toBe("kvroute_reports_total 1");
    for (const reason of ["unauthorized", "bad_report", "too_large"])
      expect(text).toContain(`kvroute_report_rejected_total{reason="${reason}"} 1`);
    expect(text).toContain('kvroute_routed_requests_total{pool="qwen",outcome="prefix_hit"} 1');
    expect(text).toContain('kvroute_routed_requests_total{pool="qwen",outcome="load_only"} 1');
    expect(text).toContain('kvroute_routed_requests_total{pool="qwen",outcome="speculative_hit"} 1');
    expect(text).toContain('kvroute_routed_requests_total{pool="qwen",outcome="code_9"} 1');
    expect(text).toContain('kvroute_routed_prompt_bytes_total{pool="qwen"} 2510');
    expect(text).toContain('kvroute_routed_cached_bytes_total{pool="qwen"} 1000');
    const [s0, s1] = cp.slots.present();
    expect(text).toContain(`kvroute_upstream_failures_total{slot="${s1?.key}"} 1`);
    expect(text).toContain(`kvroute_slot_running{pool="qwen",slot="${s0?.key}"} 2`);
    expect(text).toContain(`kvroute_slot_waiting{pool="qwen",slot="${s1?.key}"} 4`);
    expect(text).toContain(`kvroute_slot_kv_usage_ratio{pool="qwen",slot="${s1?.key}"} 0.25`);
    expect(text).toContain(`kvroute_slot_inflight{pool="qwen",slot="${s1?.key}"} 5`);
    expect(text).toContain(`kvroute_slot_healthy{pool="qwen",slot="${s0?.key}"} 1`);
    expect(text).toContain(`kvroute_slot_ttft_seconds{pool="qwen",slot="${s0?.key}"} 0.03`);
  });

  it("adds outcome names, pools, cached ratios and the hit-rate series to /v1/status", async () => {
    // biome-ignore lint/suspicious/noExplicitAny: reading arbitrary JSON fields
    const status = (await (await fetch(`${cp.url}/v1/status`)).json()) as any;
    expect(typeof status.now).toBe("number");
    expect(status.reports).toEqual({
      accepted: 1,
      rejected: { unauthorized: 1, bad_report: 1, too_large: 1 },
    });
    const hit = status.recentDecisions.find((d: { requestId: string }) => d.requestId === "r-0-1");
    expect(hit).toMatchObject({ pool: "qwen", outcomeName: "prefix_hit", cachedRatio: 0.8, gateway: "gw-1" });
    expect(hit.slotKey).toBe(cp.slots.present()[0]?.key);
    const points = status.hitRate.pools.qwen;
    expect(points).toHaveLength(1);
    expect(points[0]).toMatchObject({ requests: 4, hits: 2, promptBytes: 2510, cachedBytes: 1000 });
    expect(status.slots[1].recent).toMatchObject({ requests: 2, upstreamFailures: 1 });
  });
});

describe("predicted vs served cached tokens", () => {
  it("counts both per slot, over the same requests, and shows served 0 where vLLM omits the details", async () => {
    const [s0, s1] = cp.slots.present();
    const f = (slot: number, cachedBytes: number, served: Partial<FinishedRequest>, id: string) => ({
      ...finished(slot, 1, 2000, cachedBytes),
      ...served,
      requestId: id,
    });
    const report = encodeReport({
      gateway: "gw-served",
      inflight: new Map(),
      finished: [
        // The engine said 180: predicted 800 bytes ≈ 200 tokens.
        f(0, 800, { servedCachedTokens: 180 }, "served-180"),
        // Usage without details on a slot whose engine has shown details: vLLM's "0 cached".
        f(0, 400, { servedFlags: SERVED_USAGE }, "served-0"),
        // No usage (a stream without include_usage), and a scan cut at its budget: unknown.
        f(0, 40, { servedFlags: 0 }, "served-none"),
        f(0, 40, { servedFlags: SERVED_USAGE | SERVED_CUT }, "served-cut"),
        // Usage without details where the engine never showed any: unknown, not 0.
        f(1, 400, { servedFlags: SERVED_USAGE }, "served-never"),
        // A stream outside the gateway's sample: unread, neither known nor unknown.
        f(0, 1200, { servedFlags: SERVED_UNREAD }, "served-unread"),
        // Answered without routing (slot 0xFFFF): not a slot's prediction.
        f(0xffff, 0, { servedFlags: SERVED_USAGE | SERVED_CACHED, servedCachedTokens: 5 }, "unrouted"),
      ],
      speculative: [],
    });
    expect((await post(report)).status).toBe(204);
    const text = await (await fetch(`${cp.url}/metrics`)).text();
    const l0 = `pool="qwen",slot="${s0?.key}"`;
    const l1 = `pool="qwen",slot="${s1?.key}"`;
    // The first test's report (protocol 2, nothing served) counted as unknown: 800 + 0 and 0 + 200 bytes.
    expect(text).toContain(`kvroute_predicted_cached_tokens_total{${l0},served="known"} 300`);
    expect(text).toContain(`kvroute_predicted_cached_tokens_total{${l0},served="unknown"} 220`);
    expect(text).toContain(`kvroute_served_cached_tokens_total{${l0}} 180`);
    expect(text).toContain(`kvroute_served_cache_requests_total{${l0},served="known"} 2`);
    expect(text).toContain(`kvroute_served_cache_requests_total{${l0},served="unknown"} 4`);
    expect(text).toContain(`kvroute_served_cache_requests_total{${l0},served="unread"} 1`);
    expect(text).toContain(`kvroute_predicted_cached_tokens_total{${l0},served="unread"} 300`);
    expect(text).toContain(`kvroute_predicted_cached_tokens_total{${l1},served="known"} 0`);
    expect(text).toContain(`kvroute_predicted_cached_tokens_total{${l1},served="unknown"} 150`);
    expect(text).toContain(`kvroute_served_cache_requests_total{${l1},served="unknown"} 3`);
    expect(text).toContain(`kvroute_served_cached_tokens_total{${l1}} 0`);

    // biome-ignore lint/suspicious/noExplicitAny: reading arbitrary JSON fields
    const status = (await (await fetch(`${cp.url}/v1/status`)).json()) as any;
    expect(status.slots[0].recent.served).toEqual({
      known: 2,
      unknown: 4,
      predictedKnownTokens: 300,
      predictedUnknownTokens: 220,
      unread: 1,
      predictedUnreadTokens: 300,
      servedTokens: 180,
      detailsSeen: true,
    });
    expect(status.slots[1].recent.served).toMatchObject({ known: 0, unknown: 3, detailsSeen: false });
    const served = Object.fromEntries(
      status.recentDecisions.map((d: { requestId: string; served: number | null }) => [
        d.requestId,
        d.served,
      ]),
    );
    expect(served).toMatchObject({
      "served-180": 180,
      "served-0": 0,
      "served-none": null,
      "served-cut": null,
      "served-never": null,
      "served-unread": null,
    });
    const d180 = status.recentDecisions.find((d: { requestId: string }) => d.requestId === "served-180");
    expect(d180).toMatchObject({ predictedCachedTokens: 200, servedCachedTokens: 180 });
  });
});

describe("access with authToken configured", () => {
  it("keeps the read-only dashboard and its stream open, like /v1/status (docs/operations.md)", async () => {
    expect((await fetch(`${cp.url}/dashboard`)).status).toBe(200);
    const abort = new AbortController();
    const res = await fetch(`${cp.url}/v1/events/status`, { signal: abort.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    abort.abort();
    // What gateways call stays behind the token.
    expect((await fetch(`${cp.url}/v1/sync?epoch=0&version=0`)).status).toBe(401);
  });
});

describe("hit-rate series", () => {
  it("sums per bucket, starts new buckets in time, and forgets what left the window", () => {
    const series = new HitRateSeries(1000, 3);
    series.add("a", 10_100, 100, 50, true);
    series.add("a", 10_900, 100, 0, false);
    series.add("a", 12_000, 200, 200, true);
    series.add("b", 12_500, 10, 0, false);
    series.add("a", 11_000, 1, 1, true); // stamped before the newest bucket: counted in it
    expect(series.snapshot(12_600).pools).toEqual({
      a: [
        { t: 10_000, requests: 2, hits: 1, promptBytes: 200, cachedBytes: 50 },
        { t: 12_000, requests: 2, hits: 2, promptBytes: 201, cachedBytes: 201 },
      ],
      b: [{ t: 12_000, requests: 1, hits: 0, promptBytes: 10, cachedBytes: 0 }],
    });
    expect(series.snapshot(13_500).pools.a?.map((p) => p.t)).toEqual([12_000]);
    expect(series.snapshot(20_000).pools).toEqual({});
  });
});
