// The filter in a host whose ticks and clock the test drives, synced from a real control plane on
// loopback in front of one fake engine with 4 DP ranks. Requests are driven through the filter
// directly (no listener): each is answered 200 by the test, or left in flight.
import { randomUUID } from "node:crypto";
import { pino } from "pino";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { createHost, type Host, type HttpStream, headers } from "../../host/index.ts";
import { startInParallel, WasmThread } from "../../host/thread.ts";
import { RecordingSink } from "../host/testing.ts";
import { type FakeEngine, pluginConfigFor, QWEN, startEngine, TOKEN, until } from "./harness.ts";

const WASM = new URL("../../build/kvroute.wasm", import.meta.url).pathname;

export interface ManualStack {
  cp: ControlPlane;
  engine: FakeEngine;
  host: Host;
  clock: { now: number };
  /** Every VM of the gateway now: host.vms(), or with `parallelStart` the workers started together. */
  readonly vms: WasmThread[];
  /** The VM whose root context holds the lease after start-up. */
  leader: WasmThread;
  /** One tick of `vms` (default all), then 20 ms (one tick period) of clock. */
  round(vms?: WasmThread[]): void;
  close(): Promise<void>;
}

export interface ManualStackOptions {
  /**
   * Start `threads` worker VMs together, as Envoy's workers configure theirs (startInParallel:
   * every VM's start-up reads shared data as it was before any of them wrote), with no main-thread
   * VM. Default: the main-thread VM, then the workers, one after another (createHost).
   */
  parallelStart?: boolean;
}

export async function startManualStack(threads = 2, o: ManualStackOptions = {}): Promise<ManualStack> {
  const engine = await startEngine([0, 1, 2, 3]);
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
  const cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
  await until(() => cp.ready(), "control plane ready");
  const clock = { now: 9_000_000 };
  const host = createHost({
    wasm: WASM,
    threads: o.parallelStart ? 0 : threads,
    mainThread: !o.parallelStart,
    vmId: "kvroute",
    rootId: "kvroute",
    pluginConfig: pluginConfigFor(cp.url),
    clusters: { kvroute_control_plane: new URL(cp.url).host },
    allowOnHeadersStopIteration: true,
    ticks: "manual",
    clock: () => clock.now,
  });
  // With parallelStart, the workers are this test's own VMs: the host's lists do not hold them.
  const parallel = o.parallelStart
    ? Array.from({ length: threads }, (_, k) => new WasmThread(host.core, k, `worker_${k}`))
    : null;
  if (parallel !== null) {
    try {
      startInParallel(parallel);
    } catch (e) {
      host.close();
      for (const t of parallel) t.close();
      throw e;
    }
  }
  const round = (vms?: WasmThread[]) => {
    host.tick({ vms: vms ?? parallel ?? undefined });
    clock.now += 20;
  };
  cp.publish();
  const want = BigInt(cp.log.version);
  await until(() => {
    round();
    const v = host.sharedData("kvr.sync");
    return v !== null && Buffer.from(v.value).readBigUInt64LE(8) >= want;
  }, "the gateway synced");
  const [leader] = (parallel ?? host.vms()).filter((t) =>
    [...t.httpCalls.values()].some((c) => c.path.startsWith("/v1/sync")),
  );
  if (leader === undefined) throw new Error("no leader");
  return {
    cp,
    engine,
    host,
    clock,
    get vms() {
      return parallel ?? host.vms();
    },
    leader,
    round,
    async close() {
      host.close();
      for (const t of parallel ?? []) t.close();
      await cp.stop();
      engine.server.closeAllConnections();
      await new Promise((r) => engine.server.close(r));
    },
  };
}

/** Starts a /v1/completions request through the filter on `t`; the body is in, no answer yet. */
export function startCompletion(
  host: Host,
  t: WasmThread,
  prompt: string,
): { stream: HttpStream; sink: RecordingSink } {
  const sink = new RecordingSink();
  const stream = host.newStream(t, sink);
  stream.decodeHeaders(
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
  stream.decodeData(
    new Uint8Array(Buffer.from(JSON.stringify({ model: "qwen3", prompt, max_tokens: 1 }))),
    true,
  );
  return { stream, sink };
}

/** One /v1/completions request through the filter on `t`, answered 200 by "the engine". */
export function complete(host: Host, t: WasmThread, prompt: string): RecordingSink {
  const { stream, sink } = startCompletion(host, t, prompt);
  stream.encodeHeaders(headers([[":status", "200"]]), true);
  return sink;
}

/** The destination the filter chose, or null. */
export function destination(sink: RecordingSink): string | null {
  return sink.of("reqHeaders")[0]?.headers.find(([k]) => k === "x-gateway-destination-endpoint")?.[1] ?? null;
}

/** Finished requests the control plane got in reports (its Prometheus counter). */
export async function finishedAtControlPlane(cp: ControlPlane): Promise<number> {
  const text = await (await fetch(`${cp.url}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^kvroute_routed_requests_total\{[^}]*\} (\d+)$/gm)) n += Number(m[1]);
  return n;
}
