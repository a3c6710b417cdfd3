// The emulated Envoy process: N worker-thread VMs (plus Envoy's main-thread VM) of one plugin,
// sharing shared data, queues and stats. Start-up mirrors Envoy: every VM is checked, linked and
// started (_start restricted, on_context_create(root, 0), on_vm_start, on_configure); any failure
// there rejects the configuration, so createHost throws. reconfigure() is a plugin-config change
// with the same vm_id and code: a second root context in every running VM.
import type { Pairs } from "./abi/constants.ts";
import { asBytes, HostCore, type HostOptions } from "./core.ts";
import { HeaderMap } from "./header-map.ts";
import { hostImports } from "./imports/index.ts";
import { checkModule } from "./loader.ts";
import type { HistogramValue } from "./metrics.ts";
import { type FilterChainSink, HttpStream, type StreamInfo } from "./stream.ts";
import { registerHostImports, WasmThread } from "./thread.ts";

registerHostImports(hostImports);

export type { HostOptions, LogRecord } from "./core.ts";

export interface StreamEndpoints {
  sourceAddress?: string;
  sourcePort?: number;
  destinationAddress?: string;
  destinationPort?: number;
  connectionId?: number;
  /** Dynamic metadata the stream starts with (filter_metadata: namespace → Struct as JSON). */
  dynamicMetadata?: Record<string, Record<string, unknown>>;
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
        this.lastLoad.push(this.core.now());
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
   * FAIL_RELOAD (Envoy PluginConfig::maybeReloadHandleIfNeeded, source/extensions/common/wasm/
   * wasm.cc): a VM that failed at run time is replaced when the next stream is created on its
   * thread (createContext) — the request that trapped, and every other stream of the failed VM,
   * got 503 (CHECK_FAIL → failStream). Reloads of one thread are at least a jittered interval
   * apart, counted from the VM's last load (JitteredLowerBoundBackOffStrategy: [base, 1.5 × base)).
   * The new VM is a fresh clone (getOrCreateThreadLocalPlugin): fresh memory, _start, and a root
   * context for the current plugin configuration only. If it fails to start, the failed VM keeps
   * answering 503. The main thread never creates streams, so its VM is never reloaded.
   */
  private maybeReload(k: number): WasmThread {
    const t = this.threads[k] as WasmThread;
    if (!t.failed || this.core.failurePolicy !== "FAIL_RELOAD") return t;
    const now = this.core.now();
    const base = this.core.reloadBackoffMs;
    const interval = base >= 2 ? base + Math.floor(Math.random() * (base >> 1)) : base;
    if (now - (this.lastLoad[k] ?? 0) < interval) return t;
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

  /** Every VM of the process: the main thread's first, then the workers. */
  vms(): WasmThread[] {
    return this.main ? [this.main, ...this.threads] : [...this.threads];
  }

  /**
   * A plugin-config change with the same vm_id and code (Envoy: a new PluginConfig whose plugin key
   * — root_id + configuration — differs, on a VM found by vm_key): every running VM gets a second
   * root context (on_context_create(new, 0), on_vm_start, on_configure with the new configuration)
   * and new streams attach to it. The old root contexts keep ticking and finishing their streams;
   * `retireOld` (default true) drops the old configuration at once, so each old root gets on_done
   * (and on_delete) as soon as its last stream ends — Envoy does that when the old filter chain has
   * drained. Failed VMs are skipped (FAIL_RELOAD rebuilds them with the new configuration).
   * Envoy first validates a new configuration in a throwaway "canary" VM; this host does not (see
   * docs/host.md), so a VM whose on_configure refuses the new configuration throws here.
   */
  reconfigure(pluginConfig: string | Uint8Array, retireOld = true): number[] {
    const bytes = asBytes(pluginConfig);
    const added: number[] = [];
    for (const t of this.vms()) {
      if (t.failed) continue;
      const old = [...t.roots.keys()];
      added.push(t.addRoot(bytes).id);
      if (retireOld) for (const id of old) t.retireRoot(id);
    }
    this.core.pluginConfig = bytes;
    return added;
  }

  /** Drops every configuration but the newest (the old roots a reconfigure(…, false) kept). */
  retireOldRoots(): void {
    for (const t of this.vms()) {
      const ids = [...t.roots.keys()];
      for (const id of ids.slice(0, -1)) t.retireRoot(id);
    }
  }

  /**
   * With `ticks: "manual"`: one tick of every root context that has a tick period, on every live
   * VM in `vms` (default all, main thread first). `interleaved` runs them as Envoy's parallel
   * threads can: every tick reads shared data as it was before any of these ticks wrote, up to its
   * own first write (then it sees the live store) — all reads before any write, the worst case for
   * read-then-write protocols such as a lease.
   */
  tick(o: { interleaved?: boolean; vms?: WasmThread[] } = {}): void {
    const store = this.core.sharedData;
    const snapshot = o.interleaved ? store.snapshot() : null;
    try {
      for (const t of o.vms ?? this.vms()) {
        for (const id of t.tickingRoots()) {
          store.readFrom(snapshot);
          t.tickRoot(id);
        }
      }
    } finally {
      store.readFrom(null);
    }
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
      ...(ep.dynamicMetadata === undefined ? {} : { dynamicMetadata: ep.dynamicMetadata }),
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
    for (const c of this.core.clusters.values()) c.close();
  }
}

export function createHost(options: HostOptions): Host {
  return new Host(options);
}

export function headers(pairs: Pairs): HeaderMap {
  return new HeaderMap(pairs);
}
