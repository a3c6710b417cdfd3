// The emulated Envoy process: N worker-thread VMs (plus Envoy's main-thread VM) of one plugin,
// sharing shared data, queues and stats. Start-up mirrors Envoy: every VM is checked, linked and
// started (_start restricted, on_context_create(root, 0), on_vm_start, on_configure); any failure
// there rejects the configuration, so createHost throws.
import type { Pairs } from "./abi/constants.ts";
import { HostCore, type HostOptions } from "./core.ts";
import { HeaderMap } from "./header-map.ts";
import { checkModule } from "./loader.ts";
import type { HistogramValue } from "./metrics.ts";
import { type FilterChainSink, HttpStream, type StreamInfo } from "./stream.ts";
import { WasmThread } from "./thread.ts";

export type { HostOptions, LogRecord } from "./core.ts";

export interface StreamEndpoints {
  sourceAddress?: string;
  sourcePort?: number;
  destinationAddress?: string;
  destinationPort?: number;
  connectionId?: number;
}

let connectionIds = 1;

export class Host {
  readonly core: HostCore;
  /** Worker threads that serve requests. */
  readonly threads: WasmThread[] = [];
  /** Envoy's main-thread VM (ticks, http calls; never serves requests), if enabled. */
  readonly main: WasmThread | null = null;
  private nextThread = 0;
  private readonly lastLoad: number[] = [];
  /** How many times FAIL_RELOAD rebuilt a worker VM. */
  reloads = 0;

  constructor(options: HostOptions) {
    this.core = new HostCore(options);
    checkModule(this.core.code);
    const n = options.threads ?? 1;
    const all: WasmThread[] = [];
    try {
      if (options.mainThread ?? true) {
        const m = new WasmThread(this.core, -1, "main");
        all.push(m);
        this.core.scheduler.threads = all;
        m.start();
        this.main = m;
      }
      for (let k = 0; k < n; k++) {
        const t = new WasmThread(this.core, k, `worker_${k}`);
        all.push(t);
        this.core.scheduler.threads = all;
        t.start();
        this.threads.push(t);
        this.lastLoad.push(Date.now());
      }
    } catch (e) {
      for (const t of all) t.close();
      throw e;
    }
  }

  /** Round-robin like connections spread over Envoy's workers. */
  pickThread(): WasmThread {
    const k = this.nextThread % this.threads.length;
    this.nextThread++;
    return this.maybeReload(k);
  }

  /**
   * FAIL_RELOAD (PluginConfig::maybeReloadHandleIfNeeded): a VM that failed at run time is
   * replaced by a freshly started one when the next stream is created on its thread, at most once
   * per backoff interval. If the new VM fails to start, the failed one keeps answering 503.
   */
  private maybeReload(k: number): WasmThread {
    const t = this.threads[k] as WasmThread;
    if (!t.failed || this.core.failurePolicy !== "FAIL_RELOAD") return t;
    const now = Date.now();
    if (now - (this.lastLoad[k] ?? 0) < this.core.reloadBackoffMs) return t;
    this.lastLoad[k] = now;
    const fresh = new WasmThread(this.core, k, t.name);
    try {
      fresh.start();
    } catch {
      fresh.close();
      return t;
    }
    t.close();
    this.threads[k] = fresh;
    this.core.scheduler.threads = this.core.scheduler.threads.map((x) => (x === t ? fresh : x));
    this.reloads++;
    return fresh;
  }

  /** A new stream context on `thread`; drive it with decodeHeaders/encodeHeaders/… on that thread. */
  newStream(thread: WasmThread, sink: FilterChainSink, ep: StreamEndpoints = {}): HttpStream {
    const info: StreamInfo = {
      protocol: "HTTP/1.1",
      startTimeMs: Date.now(),
      sourceAddress: ep.sourceAddress ?? "127.0.0.1",
      sourcePort: ep.sourcePort ?? 40000,
      destinationAddress: ep.destinationAddress ?? "127.0.0.1",
      destinationPort: ep.destinationPort ?? 10000,
      connectionId: ep.connectionId ?? connectionIds++,
      requestBodyBytes: 0,
      responseBodyBytes: 0,
      routeCacheClears: 0,
    };
    return new HttpStream(thread, info, sink);
  }

  // ---- test views, like Envoy's admin endpoints ------------------------------------------

  sharedData(key: string): { value: Uint8Array; cas: number } | null {
    return this.core.sharedData.get(this.core.vmId, key);
  }
  sharedDataKeys(): string[] {
    return this.core.sharedData.keys(this.core.vmId);
  }
  counter(name: string): bigint | undefined {
    return this.core.stats.counter(name);
  }
  gauge(name: string): bigint | undefined {
    return this.core.stats.gauge(name);
  }
  histogram(name: string): HistogramValue | undefined {
    return this.core.stats.histogram(name);
  }
  stats(): string {
    return this.core.stats.dump();
  }
  logs(filter?: (m: string) => boolean): string[] {
    return this.core.logs.map((r) => r.message).filter((m) => (filter ? filter(m) : true));
  }

  close(): void {
    this.main?.close();
    for (const t of this.threads) t.close();
  }
}

export function createHost(options: HostOptions): Host {
  return new Host(options);
}

export function headers(pairs: Pairs): HeaderMap {
  return new HeaderMap(pairs);
}
