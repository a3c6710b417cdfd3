// kvroute as it ships: build/kvroute.wasm in the Node Proxy-Wasm host (Envoy's semantics), several
// gateways of several worker threads, synced from kvroute's control plane — all on the
// simulator's virtual clock (kvroute/virtual-*.ts). Nothing of the request path is re-implemented
// here: a request's headers and body go through the filter on a gateway's worker thread, and the
// destination and rank header the filter writes pick the simulated engine and rank. What the
// filter knows it learns as in production:
// - KV events through the control plane's subscriber path, `kvEventDelayMs` late;
// - engine load from the control plane's scrapes (every `load.scrapeIntervalMs`, default 250 ms);
// - the control plane's images by the leader's long poll, reports every `reportMs` (500 ms), each
//   call `latencyMs` late each way;
// - speculative routes through each gateway's shared data at once, and through reports to the
//   other gateways;
// - its own in-flight requests from the response callbacks, at the simulated first token and end.
import { readFileSync } from "node:fs";
import type { HttpStream } from "../../../host/stream.ts";
import { VirtualControlPlane, workerAddress } from "../kvroute/virtual-control-plane.ts";
import { CONTROL_PLANE_CLUSTER, VirtualGateway } from "../kvroute/virtual-gateway.ts";
import { VirtualTimers } from "../kvroute/virtual-timers.ts";
import type { PolicyFactory, RoutingPolicy } from "./types.ts";

/** Read once per process, so every run of a bench uses the same build even if build/ changes meanwhile. */
let filterWasm: Uint8Array | undefined;
/** The shipped build; KVROUTE_BENCH_FILTER_WASM names another (explore.ts comparing two builds). */
export const FILTER_WASM =
  process.env.KVROUTE_BENCH_FILTER_WASM ?? new URL("../../../build/kvroute.wasm", import.meta.url).pathname;

/** Envoy's clock at virtual time 0 (ms since the epoch: any fixed value). */
const CLOCK_BASE_MS = 1_800_000_000_000;
/** Virtual time before the first request: leaders elected, caches synced. */
const WARM_UP_MS = 2000;

export interface KvrouteOptions {
  workers: number;
  ranksPerWorker: number;
  speculative: boolean;
  /** Overrides of the control plane's `routing` section (weights, temperature). */
  routing?: Record<string, unknown>;
  /** Overrides of the control plane's `load` section (scrapeIntervalMs). */
  load?: Record<string, unknown>;
  /** Overrides the bench-wide KV event delay (sensitivity runs). */
  kvEventDelayMs?: number;
  /** Gateways (Envoy processes) in front of the fleet; default from kvrouteGeometry. */
  gateways?: number;
  /** Worker threads per gateway; default from kvrouteGeometry. */
  threadsPerGateway?: number;
  /** One-way latency gateway ↔ control plane (ms); default from kvrouteGeometry. */
  latencyMs?: number;
  /** Extra fields of the filter's plugin configuration (tickMs, reportMs). */
  plugin?: Record<string, unknown>;
  /** Merged into the pool's configuration (LoRA `adapters`…). */
  pool?: Record<string, unknown>;
}

/** The default deployment kvroute's rows are measured in; the bench's flags change it. */
export const kvrouteGeometry = { gateways: 2, threadsPerGateway: 4, latencyMs: 1 };

/** Decisions by outcome (the filter's counters, summed over gateways), for the report. */
export interface KvrouteStats {
  outcomes: Map<string, number>;
  /** Requests each gateway routed (its outcome counters), filled when a run ends. */
  routedByGateway?: number[];
  /** Reports and sync polls the control plane served. */
  reports?: number;
  polls?: number;
  /** KV-event batches the control plane's subscribers applied, and what they dropped. */
  kvBatches?: number;
  kvDropped?: number;
}

const OUTCOMES = ["prefix_hit", "speculative_hit", "load_only", "fail_open", "fail_closed", "rejected"];

interface Live {
  gateway: VirtualGateway;
  stream: HttpStream;
}

export function kvroutePolicy(o: KvrouteOptions, name = "kvroute", stats?: KvrouteStats): PolicyFactory {
  const gateways = o.gateways ?? kvrouteGeometry.gateways;
  const threads = o.threadsPerGateway ?? kvrouteGeometry.threadsPerGateway;
  const latencyMs = o.latencyMs ?? kvrouteGeometry.latencyMs;
  return {
    name,
    describe:
      `kvroute: build/kvroute.wasm in the Proxy-Wasm host, ${gateways} gateways × ${threads} worker threads, ` +
      `synced from its control plane (${latencyMs} ms each way); KV events ` +
      `${o.kvEventDelayMs === undefined ? "with the configured delay" : `${o.kvEventDelayMs} ms late`}; load every ` +
      `${o.load?.scrapeIntervalMs ?? 250} ms; speculative entries ${o.speculative ? "on" : "off"}` +
      `${o.routing === undefined ? "" : `; routing ${JSON.stringify(o.routing)}`}`,
    create(ctx): RoutingPolicy {
      filterWasm ??= new Uint8Array(readFileSync(FILTER_WASM));
      const timers = new VirtualTimers(-WARM_UP_MS);
      const clock = () => CLOCK_BASE_MS + timers.now;
      const cp = new VirtualControlPlane(
        {
          workers: o.workers,
          ranksPerWorker: o.ranksPerWorker,
          kvEventDelayMs: o.kvEventDelayMs ?? ctx.kvEventDelayMs,
          latencyMs,
          routing: o.routing,
          load: o.load,
          speculative: o.speculative,
          ...(o.pool === undefined ? {} : { pool: o.pool }),
        },
        timers,
        clock,
        ctx.cluster.engines,
      );
      const pluginConfig = JSON.stringify({
        controlPlane: { cluster: CONTROL_PLANE_CLUSTER, authority: "kvroute-control-plane" },
        ...o.plugin,
      });
      const gws = Array.from(
        { length: gateways },
        (_, g) =>
          new VirtualGateway({
            name: `gateway-${g}`,
            wasm: filterWasm as Uint8Array,
            threads,
            pluginConfig,
            controlPlane: cp.handler,
            timers,
            clock,
            phaseMs: (g * 37) % 100,
          }),
      );
      timers.runUntil(0);
      for (const g of gws) assertSynced(g, cp.log.version);
      const live = new Map<string, Live>();
      let next = 0;
      let fallback = 0;
      const close = () => {
        if (stats !== undefined) recordStats(stats, gws, cp);
        for (const g of gws) g.close();
        // The index's tables and published images live in the core's memory, shared by every
        // run of this process: given back now, not whenever the GC finalizes them.
        cp.index.dispose();
      };
      return {
        kvEvents(rank, events, atMs) {
          timers.runUntil(atMs);
          cp.kvEvents(rank, events, atMs);
        },
        tick(nowMs) {
          timers.runUntil(nowMs);
        },
        nextEventMs: () => timers.nextMs,
        choose(view, request) {
          timers.runUntil(view.nowMs);
          const gateway = gws[next++ % gws.length] as VirtualGateway;
          const r = gateway.send(request.id, request.body);
          live.set(request.id, { gateway, stream: r.stream });
          const rank =
            r.forwarded === null ? -1 : rankOf(r.forwarded.get.bind(r.forwarded), o.ranksPerWorker);
          if (rank >= 0 && rank < ctx.ranks) return rank;
          // Not routed (no destination, or a local answer): the engine behind the route's own
          // cluster takes it. Counted by the filter (fail_open / fail_closed), never expected here.
          return fallback++ % ctx.ranks;
        },
        firstToken(id, _rank, atMs) {
          timers.runUntil(atMs);
          const l = live.get(id);
          if (l !== undefined) l.gateway.firstByte(l.stream);
        },
        done(result) {
          timers.runUntil(result.finishMs);
          const l = live.get(result.id);
          if (l === undefined) return;
          live.delete(result.id);
          l.gateway.finish(l.stream);
        },
        // The row records what the filter did not route (it must be 0 or explained): the
        // filter's own fail-open / fail-closed / rejected counts, and the requests that reached
        // no rank of the filter's choosing and went round robin here instead.
        counters() {
          const out: Record<string, number> = { unrouted: fallback };
          for (const outcome of ["fail_open", "fail_closed", "rejected"])
            out[outcome] = gws.reduce((sum, g) => sum + g.counter(`kvroute.requests.${outcome}`), 0);
          return out;
        },
        close,
      };
    },
  };
}

/** The run's decisions by outcome and the control plane's traffic, into `stats`. */
function recordStats(stats: KvrouteStats, gws: readonly VirtualGateway[], cp: VirtualControlPlane): void {
  for (const outcome of OUTCOMES) {
    const n = gws.reduce((sum, g) => sum + g.counter(`kvroute.requests.${outcome}`), 0);
    if (n > 0) stats.outcomes.set(outcome, (stats.outcomes.get(outcome) ?? 0) + n);
  }
  stats.routedByGateway = gws.map((g) =>
    OUTCOMES.reduce((sum, outcome) => sum + g.counter(`kvroute.requests.${outcome}`), 0),
  );
  stats.reports = cp.stats.reports;
  stats.polls = cp.stats.polls;
  stats.kvBatches = cp.kvEventTotals.batches;
  stats.kvDropped = cp.kvEventTotals.dropped;
}

/** The simulated rank the filter chose: its destination (the worker) and rank header (hybrid LB: the local index). */
export function rankOf(header: (name: string) => string | undefined, ranksPerWorker: number): number {
  const dest = header("x-gateway-destination-endpoint");
  const local = Number(header("x-data-parallel-rank") ?? "NaN");
  if (dest === undefined || !Number.isInteger(local)) return -1;
  const m = /^10\.0\.0\.(\d+):8000$/.exec(dest);
  const worker = m === null ? -1 : Number(m[1]) - 1;
  if (worker < 0 || workerAddress(worker) !== dest || local < 0 || local >= ranksPerWorker) return -1;
  return worker * ranksPerWorker + local;
}

export function assertSynced(g: VirtualGateway, version: number): void {
  const v = g.host.sharedData("kvr.sync");
  const have = v === null ? 0n : Buffer.from(v.value).readBigUInt64LE(8);
  if (have < BigInt(version))
    throw new Error(`${g.o.name} did not sync during warm-up (version ${have} of ${version})`);
}
