// What all threads of one emulated Envoy process share: the plugin's code and configuration, the
// process-wide shared data, shared queues and stats, the cluster table, logs, and the scheduler
// that interleaves the threads.
import { readFileSync } from "node:fs";
import type { Pairs } from "./abi/constants.ts";
import { encodeUtf8 } from "./abi/memory.ts";
import { StatsStore } from "./metrics.ts";
import { Scheduler } from "./scheduler.ts";
import { SharedDataStore } from "./shared-data.ts";
import { SharedQueues } from "./shared-queue.ts";
import { type ClusterAddress, type ClusterSpec, parseHostPort, UpstreamCluster } from "./upstream-cluster.ts";

/**
 * envoy.extensions.wasm.v3.FailurePolicy. Unset (with `fail_open: false`) means FAIL_RELOAD in
 * Envoy >= 1.33 (runtime flag envoy.reloadable_features.wasm_failure_reload_by_default, on by
 * default; source/extensions/common/wasm/plugin.h), so that is this host's default. FAIL_CLOSED
 * answers 503; FAIL_OPEN skips the filter; FAIL_RELOAD answers the failing request 503 and builds a
 * fresh VM for the thread on its next request (PluginConfig::maybeReloadHandleIfNeeded, with a
 * jittered backoff).
 */
export type FailurePolicy = "FAIL_CLOSED" | "FAIL_OPEN" | "FAIL_RELOAD";

export type { ClusterAddress, ClusterSpec };

/** One proxy_http_call as an in-process cluster handler receives it (header names lower-cased). */
export interface InProcessCall {
  headers: Pairs;
  body: Uint8Array;
  trailers: Pairs;
  /** The call's timeout (ms, 0 = none): the handler owns time, so it must answer by then itself. */
  timeoutMs: number;
}

/** What an in-process cluster answers: the response (":status" among the headers), or null for a
 * reset after the response started (Envoy's onHttpCallFailure). */
export type InProcessAnswer = { headers: Pairs; body: Uint8Array; trailers: Pairs } | null;

/**
 * An upstream cluster served inside this process instead of over a loopback socket: a simulator
 * in virtual time answers the module's calls when its clock says so. `respond` may be called at
 * any later point (once; later calls are ignored); the answer still reaches the calling root
 * asynchronously, posted to its thread like a socket's answer.
 */
export type ClusterHandler = (call: InProcessCall, respond: (answer: InProcessAnswer) => void) => void;

export interface NodeInfo {
  id?: string;
  cluster?: string;
  metadata?: Record<string, string | number | boolean>;
}

export interface LogRecord {
  thread: string;
  /** 0 trace … 5 critical (proxy_log levels). */
  level: number;
  message: string;
  contextId: number;
}

export interface HostOptions {
  /** The module: bytes or a file path. */
  wasm: Uint8Array | string;
  /** Worker threads that serve requests (Envoy --concurrency). Default 1. */
  threads?: number;
  /** Also run the main-thread VM + root context Envoy creates for every plugin. Default true. */
  mainThread?: boolean;
  vmId?: string;
  rootId?: string;
  pluginName?: string;
  pluginConfig?: string | Uint8Array;
  vmConfig?: string | Uint8Array;
  /** vm_config.environment_variables.key_values, visible through WASI environ_get. */
  envs?: Record<string, string>;
  /**
   * Cluster name → loopback address ("127.0.0.1:8080" or {host, port}), or several endpoints at
   * priority levels with optional active health checking (upstream-cluster.ts, as Envoy's).
   */
  clusters?: Record<string, string | ClusterAddress | ClusterSpec>;
  /** Cluster name → an in-process upstream (see ClusterHandler); wins over `clusters`. */
  clusterHandlers?: Record<string, ClusterHandler>;
  /** Default FAIL_RELOAD, like Envoy >= 1.33 with no policy set (see FailurePolicy). */
  failurePolicy?: FailurePolicy;
  /**
   * Envoy's PluginConfig.allow_on_headers_stop_iteration (Envoy ≥ 1.35): a 1 from
   * on_request_headers / on_response_headers stays StopIteration (headers held, body callbacks
   * still run) instead of becoming StopAllIterationAndWatermark. Default false, like Envoy.
   */
  allowOnHeadersStopIteration?: boolean;
  /**
   * FAIL_RELOAD: reload_config.backoff.base_interval (default 1000 ms). Envoy's
   * JitteredLowerBoundBackOffStrategy waits a random interval in [base, 1.5 × base) between two
   * loads of one thread's VM (0 here = no backoff, for tests).
   */
  reloadBackoffMs?: number;
  /**
   * "timer" (default): each root context's tick period runs a timer, like Envoy. "manual": no
   * timers; Host.tick() runs the ticks, optionally in the worst-case interleaving of Envoy's
   * parallel threads (every tick's shared-data reads before any tick's writes).
   */
  ticks?: "timer" | "manual";
  /** Wall clock in ms (fractions kept) for proxy_get_current_time_nanoseconds and the reload backoff. */
  clock?: () => number;
  /** Envoy's log level as proxy_get_log_level reports it (default 2 = info). */
  logLevel?: number;
  node?: NodeInfo;
  /** Connection buffer limit for StopIterationAndBuffer (Envoy default 1 MiB). */
  bufferLimitBytes?: number;
  /**
   * Probability that a thread is preempted right after proxy_get_shared_data returns, letting a
   * queued task of another thread run first — how Envoy's parallel workers interleave between a
   * read and a CAS write. 0 = never (default).
   */
  preemption?: number;
  /** Extra sink for every log line (proxy_log and fd_write). */
  logSink?: (r: LogRecord) => void;
  /** Keep at most this many log records in memory (default 10000). */
  keepLogs?: number;
}

export const asBytes = (v: string | Uint8Array | undefined): Uint8Array =>
  v === undefined ? new Uint8Array(0) : typeof v === "string" ? encodeUtf8(v) : v;

export class HostCore {
  readonly code: Uint8Array;
  readonly vmId: string;
  readonly rootId: string;
  readonly pluginName: string;
  /** The current plugin configuration (Host.reconfigure replaces it). */
  pluginConfig: Uint8Array;
  readonly vmConfig: Uint8Array;
  readonly envs: Record<string, string>;
  readonly clusters = new Map<string, UpstreamCluster>();
  readonly clusterHandlers = new Map<string, ClusterHandler>();
  readonly failurePolicy: FailurePolicy;
  readonly allowOnHeadersStopIteration: boolean;
  readonly reloadBackoffMs: number;
  readonly ticks: "timer" | "manual";
  readonly now: () => number;
  readonly logLevel: number;
  readonly node: NodeInfo;
  readonly bufferLimitBytes: number;
  readonly sharedData = new SharedDataStore();
  readonly queues = new SharedQueues();
  readonly stats = new StatsStore();
  readonly scheduler: Scheduler;
  readonly logs: LogRecord[] = [];
  private readonly keepLogs: number;
  private readonly logSink?: (r: LogRecord) => void;

  constructor(o: HostOptions) {
    this.code = typeof o.wasm === "string" ? new Uint8Array(readFileSync(o.wasm)) : o.wasm;
    this.vmId = o.vmId ?? "";
    this.rootId = o.rootId ?? "";
    this.pluginName = o.pluginName ?? "";
    this.pluginConfig = asBytes(o.pluginConfig);
    this.vmConfig = asBytes(o.vmConfig);
    this.envs = o.envs ?? {};
    for (const [name, addr] of Object.entries(o.clusters ?? {})) {
      this.clusters.set(name, new UpstreamCluster(name, addr));
    }
    for (const [name, handler] of Object.entries(o.clusterHandlers ?? {}))
      this.clusterHandlers.set(name, handler);
    this.failurePolicy = o.failurePolicy ?? "FAIL_RELOAD";
    this.allowOnHeadersStopIteration = o.allowOnHeadersStopIteration ?? false;
    this.reloadBackoffMs = o.reloadBackoffMs ?? 1000;
    this.ticks = o.ticks ?? "timer";
    // Envoy's clock has nanosecond resolution; Date.now() alone would make every duration a
    // multiple of a millisecond.
    this.now = o.clock ?? (() => performance.timeOrigin + performance.now());
    this.logLevel = o.logLevel ?? 2;
    this.node = o.node ?? { id: "kvroute-test-host", cluster: "kvroute" };
    this.bufferLimitBytes = o.bufferLimitBytes ?? 1024 * 1024;
    this.scheduler = new Scheduler(o.preemption ?? 0);
    this.keepLogs = o.keepLogs ?? 10_000;
    this.logSink = o.logSink;
  }

  log(r: LogRecord): void {
    this.logs.push(r);
    if (this.logs.length > this.keepLogs) this.logs.splice(0, this.logs.length - this.keepLogs);
    this.logSink?.(r);
  }
}

export { parseHostPort };
