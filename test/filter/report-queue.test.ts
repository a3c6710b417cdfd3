// Report records travel to the leader in one batch per VM per tick, and the shared queue stays
// bounded while no leader drains it (Envoy's queues have no limit): a VM enqueues again only after
// the leader emptied the queue, and records past a full outbox are dropped and counted. The filter
// runs in a host whose ticks and clock the test drives, synced from a real control plane.
import { randomUUID } from "node:crypto";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { createHost, type Host, headers } from "../../host/host.ts";
import type { WasmThread } from "../../host/thread.ts";
import { RecordingSink } from "../host/testing.ts";
import { pollers } from "./fake-control-plane.ts";
import { type FakeEngine, pluginConfigFor, QWEN, startEngine, TOKEN, until } from "./harness.ts";

const WASM = new URL("../../build/kvroute.wasm", import.meta.url).pathname;
/** filter/assembly/report-queue.ts OUTBOX_BYTES */
const OUTBOX_BYTES = 512 * 1024;

let cp: ControlPlane;
let engine: FakeEngine;
let host: Host;
const clock = { now: 9_000_000 };
let leader: WasmThread;
let worker: WasmThread;

const depth = () => host.core.queues.depth("kvroute", "kvr.reports");
const queuedBytes = () => host.core.queues.bytes("kvroute", "kvr.reports");
const dropped = () => Number(host.counter("kvroute.reports.dropped") ?? 0);

function round(vms?: WasmThread[]): void {
  host.tick({ vms });
  clock.now += 20;
}

/** One /v1/completions request through the filter on `t`, answered 200 by "the engine". */
function complete(t: WasmThread, prompt: string): RecordingSink {
  const sink = new RecordingSink();
  const s = host.newStream(t, sink);
  s.decodeHeaders(
    headers([
      [":method", "POST"],
      [":path", "/v1/completions"],
      [":authority", "gw.test"],
      [":scheme", "http"],
      ["content-type", "application/json"],
      ["x-request-id", randomUUID()],
    ]),
    false,
  );
  s.decodeData(new Uint8Array(Buffer.from(JSON.stringify({ model: "qwen3", prompt, max_tokens: 1 }))), true);
  s.encodeHeaders(headers([[":status", "200"]]), true);
  return sink;
}

const routed = (sink: RecordingSink) =>
  sink.of("reqHeaders")[0]?.headers.some(([k]) => k === "x-gateway-destination-endpoint") === true;

async function finishedAtControlPlane(): Promise<number> {
  const text = await (await fetch(`${cp.url}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^kvroute_routed_requests_total\{[^}]*\} (\d+)$/gm)) n += Number(m[1]);
  return n;
}

beforeAll(async () => {
  engine = await startEngine([0, 1, 2, 3]);
  const cfg = parseConfig(
    {
      authToken: TOKEN,
      pools: [
        {
          name: "qwen",
          models: ["qwen3"],
          tokenizer: QWEN,
          endpoints: [{ address: engine.address, ranks: [0, 1, 2, 3] }],
        },
      ],
      cache: { buckets: 256, ways: 16, speculativeTtlMs: 60_000 },
      load: { scrapeIntervalMs: 50 },
      sync: { longPollMs: 300 },
    },
    "test",
    {},
  );
  cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
  await until(() => cp.ready(), "control plane ready");
  host = createHost({
    wasm: WASM,
    threads: 2,
    vmId: "kvroute",
    rootId: "kvroute",
    pluginConfig: pluginConfigFor(cp.url),
    clusters: { kvroute_control_plane: new URL(cp.url).host },
    allowOnHeadersStopIteration: true,
    ticks: "manual",
    clock: () => clock.now,
  });
  cp.publish();
  const want = BigInt(cp.log.version);
  await until(() => {
    round();
    const v = host.sharedData("kvr.sync");
    return v !== null && Buffer.from(v.value).readBigUInt64LE(8) >= want;
  }, "the gateway synced");
  const [l] = pollers(host);
  if (l === undefined) throw new Error("no leader");
  leader = l;
  worker = host.threads.find((t) => t !== leader) as WasmThread;
  expect(depth()).toBe(0);
}, 60_000);

afterAll(async () => {
  host?.close();
  await cp?.stop();
  engine?.server.closeAllConnections();
  await new Promise((r) => engine?.server.close(r));
});

describe("the report queue", () => {
  it("takes one batch per VM per tick, not one message per request", () => {
    const before = host.core.queues.enqueued;
    const sinks = Array.from({ length: 40 }, (_, i) => complete(worker, `batch test ${i}`));
    expect(sinks.every(routed)).toBe(true);
    // Nothing is enqueued on the request path.
    expect(host.core.queues.enqueued).toBe(before);
    expect(depth()).toBe(0);
    round([worker]);
    expect(host.core.queues.enqueued).toBe(before + 1);
    expect(depth()).toBe(1);
    round([worker]);
    expect(host.core.queues.enqueued).toBe(before + 1);
  });

  it("stays bounded while no leader drains it; records past a full outbox are dropped and counted; a drain lets them flow again", async () => {
    // The clock stands still and the leader does not tick: its lease never lapses, so nobody
    // takes over, and nobody drains. The worker's batch from the test above is still queued.
    expect(depth()).toBe(1);
    const enqueuedBefore = host.core.queues.enqueued;
    const long = "The quick brown fox jumps over the lazy dog. ".repeat(730); // ~32 KiB: 256 chunks
    let n = 0;
    while (dropped() === 0 && n < 2000) {
      expect(routed(complete(worker, `${n} ${long}`))).toBe(true);
      n++;
      if (n % 50 === 0) host.tick({ vms: host.vms().filter((t) => t !== leader) });
    }
    expect(dropped()).toBeGreaterThan(0);
    for (let i = 0; i < 100; i++) complete(worker, `${i} more ${long}`);
    host.tick({ vms: host.vms().filter((t) => t !== leader) });
    // However many requests: still the one batch per VM, at most OUTBOX_BYTES each.
    expect(host.core.queues.enqueued).toBe(enqueuedBefore);
    expect(depth()).toBe(1);
    expect(queuedBytes()).toBeLessThanOrEqual(OUTBOX_BYTES);
    console.log(
      `report queue: ${n + 100} requests with a ~32 KiB prompt while undrained → queue ${depth()} message(s), ` +
        `${queuedBytes()} bytes; ${dropped()} records dropped (outbox ${OUTBOX_BYTES} bytes per VM)`,
    );
    // The leader ticks again: it drains, and the worker's kept records follow in the next batch.
    const finished = await finishedAtControlPlane();
    await until(async () => {
      round();
      return depth() === 0 && (await finishedAtControlPlane()) > finished + 40;
    }, "the kept records at the control plane");
  }, 60_000);
});
