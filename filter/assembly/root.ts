// The root context of one worker thread: configuration, cache refresh on ticks, this thread's
// in-flight counts, and — on the one thread that holds the lease — the sync long-poll and the
// report batches (DESIGN §4).
import * as imports from "@gcoredev/proxy-wasm-sdk-as/assembly/imports";
import { globalArrayBufferReference } from "@gcoredev/proxy-wasm-sdk-as/assembly/runtime";
import { ByteBuf } from "../core/byte-buf";
import { LEASE_BYTES, shouldTakeLease, writeLease } from "../core/lease";
import { parsePluginConfig, pluginConfigError } from "../core/plugin-config";
import { ReportWriter } from "../core/report-writer";
import { SYNC_FLAG_MORE, SYNC_FLAG_RESET, SyncPage } from "../core/sync-page";
import { cache } from "./cache-view";
import {
  getBuffer,
  getHeaderString,
  getProperty,
  getShared,
  HTTP_CALL_RESPONSE_BODY,
  HTTP_CALL_RESPONSE_HEADERS,
  httpCall,
  LOG_ERROR,
  LOG_INFO,
  LOG_WARN,
  log,
  nowMs,
  OK,
  PLUGIN_CONFIGURATION,
  SharedValue,
  setShared,
  setTickMs,
} from "./host";
import { stats } from "./metrics";
import { vm } from "./state";

const LEASE_KEY = "kvr.lease";
const SYNC_KEY = "kvr.sync";
const THREADS_KEY = "kvr.threads";
const REPORT_QUEUE = "kvr.reports";
/** In-flight keys kvr.if.<t> are bounded by this many thread slots (threads beyond wrap around). */
const MAX_THREADS: u32 = 1024;
const MAX_BACKOFF_MS: u32 = 5000;
const QUEUE_EMPTY: u32 = 7;
/** Queue messages folded into one report at most (the rest wait for the next). */
const MAX_REPORT_MESSAGES: i32 = 20000;

export class KvrouteRoot {
  private me: u64 = 0;
  private leader: bool = false;
  private syncToken: u32 = 0;
  private reportToken: u32 = 0;
  private nextSyncMs: u64 = 0;
  private backoffMs: u32 = 0;
  private nextReportMs: u64 = 0;
  private gateway: string = "";
  private leaseMs: u64 = 1000;
  private leaseLive: bool = false;
  private read: SharedValue = new SharedValue();
  private page: SyncPage = new SyncPage();
  private writer: ReportWriter = new ReportWriter();
  private scratch: ByteBuf = new ByteBuf(64);

  constructor(readonly id: u32) {}

  configure(size: u32): bool {
    const raw = size === 0 ? new ArrayBuffer(0) : getBuffer(PLUGIN_CONFIGURATION, 0, size);
    if (raw === null) {
      log(LOG_ERROR, "kvroute: the plugin configuration cannot be read");
      return false;
    }
    const cfg = parsePluginConfig(changetype<usize>(raw), raw.byteLength);
    if (cfg === null) {
      log(LOG_ERROR, `kvroute: invalid plugin configuration: ${pluginConfigError}`);
      return false;
    }
    vm.config = cfg;
    stats.define();
    vm.thread = this.claimThreadIndex();
    const q = register();
    vm.reportQueue = q;
    const node = getProperty("node\0id");
    this.gateway =
      cfg.gatewayId.length > 0
        ? cfg.gatewayId
        : node !== null && node.byteLength > 0
          ? String.UTF8.decode(node)
          : "envoy";
    // Unique per root context of this process: thread slot, context id and the clock.
    this.me = ((<u64>vm.thread) << 48) ^ ((<u64>this.id) << 32) ^ nowMs();
    this.leaseMs = <u64>(cfg.tickMs * 3 > 1000 ? cfg.tickMs * 3 : 1000);
    setTickMs(cfg.tickMs);
    cache.refresh();
    log(LOG_INFO, `kvroute: configured (thread slot ${vm.thread}, control plane cluster ${cfg.cluster})`);
    return true;
  }

  /** A slot in the kvr.if.<t> key space, by CAS on a shared counter. */
  private claimThreadIndex(): i32 {
    const r = this.read;
    const b = this.scratch;
    b.len = 0;
    b.reserve(4);
    for (let attempt = 0; attempt < 64; attempt++) {
      getShared(THREADS_KEY, r);
      const current: u32 =
        r.value !== null && r.value!.byteLength === 4 ? load<u32>(changetype<usize>(r.value!)) : 0;
      store<u32>(b.ptr, current + 1);
      if (setShared(THREADS_KEY, b.ptr, 4, r.value === null ? 0 : r.cas) === OK)
        return <i32>(current % MAX_THREADS);
    }
    return <i32>(this.id % MAX_THREADS);
  }

  tick(): void {
    const now = nowMs();
    cache.refresh();
    this.rescueWaitingStreams(now);
    this.publishInflight(now);
    this.leader = this.holdLease(now);
    // Process-wide gauge, written by every thread's tick: is there a live leader?
    stats.record(stats.syncLeader, this.leader || this.leaseLive ? 1 : 0);
    if (!this.leader) return;
    if (this.syncToken === 0 && now >= this.nextSyncMs) this.startSync();
    if (this.reportToken === 0 && now >= this.nextReportMs) this.sendReport(now);
  }

  /** Streams still waiting for a body after two ticks: see KvrouteStream.routeWithoutBody. */
  private rescueWaitingStreams(now: u64): void {
    const waiting = vm.waiting;
    if (waiting.size === 0) return;
    const ids = waiting.keys();
    const limit = <u64>vm.config.tickMs * 2;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (waiting.get(id) + limit > now) continue;
      if (!vm.streams.has(id)) {
        waiting.delete(id);
        continue;
      }
      if (!vm.warnedNoBody) {
        vm.warnedNoBody = true;
        log(
          LOG_ERROR,
          "kvroute: request bodies never reach the filter while headers wait: set allow_on_headers_stop_iteration: true in the Wasm plugin config (Envoy >= 1.35). Routing by load only until then.",
        );
      }
      stats.inc(stats.noBodyAccess);
      imports.proxy_set_effective_context(id);
      vm.streams.get(id).routeWithoutBody();
      imports.proxy_continue_stream(0);
    }
    imports.proxy_set_effective_context(this.id);
  }

  private holdLease(now: u64): bool {
    const r = this.read;
    getShared(LEASE_KEY, r);
    const v = r.value;
    if (
      !shouldTakeLease(v === null ? 0 : changetype<usize>(v), v === null ? 0 : v.byteLength, this.me, now)
    ) {
      this.leaseLive = true; // another thread holds it and it has not lapsed
      return false;
    }
    this.leaseLive = false;
    const b = this.scratch;
    b.len = 0;
    b.reserve(LEASE_BYTES);
    writeLease(b.ptr, this.me, now + this.leaseMs);
    // CAS: of two threads that saw the same lapsed lease, exactly one wins; the loser knows a
    // live lease exists.
    const won = setShared(LEASE_KEY, b.ptr, LEASE_BYTES, v === null ? 0 : r.cas) === OK;
    this.leaseLive = !won;
    return won;
  }

  /** This thread's in-flight counts, stamped, for the leader's report. */
  private publishInflight(now: u64): void {
    const counts = vm.inflight;
    const b = this.scratch;
    b.len = 0;
    b.reserve(8 + counts.length * 6);
    store<u64>(b.ptr, now);
    b.len = 8;
    for (let s = 0; s < counts.length; s++) {
      const n = counts[s];
      if (n === 0) continue;
      store<u16>(b.ptr + <usize>b.len, <u16>s);
      store<u32>(b.ptr + <usize>b.len + 2, n);
      b.len += 6;
    }
    setShared(`kvr.if.${vm.thread}`, b.ptr, b.len, 0);
  }

  private startSync(): void {
    const cfg = vm.config;
    const r = this.read;
    getShared(SYNC_KEY, r);
    let epoch: u64 = 0;
    let version: u64 = 0;
    if (r.value !== null && r.value!.byteLength >= 16) {
      epoch = load<u64>(changetype<usize>(r.value!));
      version = load<u64>(changetype<usize>(r.value!), 8);
    }
    const path = `${cfg.syncPath}?epoch=${epoch}&version=${version}`;
    this.syncToken = this.call("GET", path, new ArrayBuffer(0));
    if (this.syncToken === 0) this.syncFailed("the control-plane cluster refused the call");
  }

  private call(method: string, path: string, body: ArrayBuffer): u32 {
    const cfg = vm.config;
    const names: string[] = [":method", ":path", ":authority", "x-kvroute-gateway"];
    const values: string[] = [method, path, cfg.authority, this.gateway];
    if (cfg.token.length > 0) {
      names.push("authorization");
      values.push(`Bearer ${cfg.token}`);
    }
    if (body.byteLength > 0) {
      names.push("content-type");
      values.push("application/octet-stream");
    }
    return httpCall(cfg.cluster, names, values, body, cfg.timeoutMs);
  }

  private syncFailed(why: string): void {
    stats.inc(stats.syncErrors);
    this.backoffMs =
      this.backoffMs === 0 ? 100 : this.backoffMs * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : this.backoffMs * 2;
    this.nextSyncMs = nowMs() + <u64>this.backoffMs;
    // Logged once per backoff step, not per retry storm; the cache keeps routing meanwhile.
    if (this.backoffMs <= 200 || this.backoffMs === MAX_BACKOFF_MS)
      log(LOG_WARN, `kvroute: sync failed (${why}); retrying in ${this.backoffMs} ms`);
  }

  httpResponse(token: u32, bodySize: u32): void {
    if (token === this.syncToken && token !== 0) {
      this.syncToken = 0;
      this.onSync(bodySize);
    } else if (token === this.reportToken && token !== 0) {
      this.reportToken = 0;
      const status = getHeaderString(HTTP_CALL_RESPONSE_HEADERS, ":status");
      if (status !== "204" && status !== "200") {
        stats.inc(stats.syncErrors);
        log(LOG_WARN, `kvroute: report refused (status ${status === null ? "none" : status!})`);
      }
    }
  }

  private onSync(bodySize: u32): void {
    const status = getHeaderString(HTTP_CALL_RESPONSE_HEADERS, ":status");
    if (status !== "200") {
      this.syncFailed(status === null ? "no response" : `status ${status!}`);
      return;
    }
    const body: ArrayBuffer | null = bodySize === 0 ? null : getBuffer(HTTP_CALL_RESPONSE_BODY, 0, bodySize);
    const page = this.page;
    if (body === null || !page.open(changetype<usize>(body), body.byteLength)) {
      this.syncFailed("malformed sync page");
      return;
    }
    this.backoffMs = 0;
    while (page.next()) {
      const key = String.UTF8.decodeUnsafe(page.keyPtr, <usize>page.keyLen);
      setShared(key, page.valuePtr, page.valueLen, 0);
    }
    if ((page.flags & SYNC_FLAG_RESET) !== 0) stats.inc(stats.syncResets);
    // Resyncing from the reset page until a page without `more`: the request path routes by
    // load meanwhile, since bucket bitmaps may still name another epoch's slots.
    const r = this.read;
    getShared(SYNC_KEY, r);
    const wasResyncing =
      r.value !== null && r.value!.byteLength >= 20 && load<u32>(changetype<usize>(r.value!), 16) !== 0;
    const more = (page.flags & SYNC_FLAG_MORE) !== 0;
    const resyncing = more && (wasResyncing || (page.flags & SYNC_FLAG_RESET) !== 0);
    const b = this.scratch;
    b.len = 0;
    b.reserve(20);
    store<u64>(b.ptr, page.epoch);
    store<u64>(b.ptr, page.version, 8);
    store<u32>(b.ptr, resyncing ? 1 : 0, 16);
    setShared(SYNC_KEY, b.ptr, 20, 0);
    stats.record(stats.syncVersion, page.version);
    cache.refresh();
    // A long poll answers when there is news (or after its wait): ask again at once.
    this.nextSyncMs = 0;
    this.startSync();
  }

  private sendReport(now: u64): void {
    const w = this.writer;
    w.reset();
    const q = vm.reportQueue;
    if (q !== 0) {
      for (let i = 0; i < MAX_REPORT_MESSAGES; i++) {
        const r = imports.proxy_dequeue_shared_queue(
          q,
          globalArrayBufferReference.bufferPtr(),
          globalArrayBufferReference.sizePtr(),
        );
        if (r === QUEUE_EMPTY || r !== OK) break;
        const m = globalArrayBufferReference.toArrayBuffer();
        w.addMessage(changetype<usize>(m), m.byteLength);
      }
    }
    this.sumInflight(now);
    this.nextReportMs = now + <u64>vm.config.reportMs;
    w.finish(this.gateway);
    const body = new ArrayBuffer(w.out.len);
    memory.copy(changetype<usize>(body), w.out.ptr, <usize>w.out.len);
    this.reportToken = this.call("POST", vm.config.reportPath, body);
  }

  /** In-flight per slot over every thread's recent kvr.if.<t> (stale ones belong to dead threads). */
  private sumInflight(now: u64): void {
    const r = this.read;
    getShared(THREADS_KEY, r);
    const threads: u32 =
      r.value !== null && r.value!.byteLength === 4 ? load<u32>(changetype<usize>(r.value!)) : 0;
    const n = threads < MAX_THREADS ? threads : MAX_THREADS;
    const sums = new Map<i32, u32>();
    const freshMs = this.leaseMs * 3;
    for (let t: u32 = 0; t < n; t++) {
      getShared(`kvr.if.${t}`, r);
      const v = r.value;
      if (v === null || v.byteLength < 8) continue;
      const p = changetype<usize>(v);
      if (load<u64>(p) + freshMs < now) continue;
      for (let at = 8; at + 6 <= v.byteLength; at += 6) {
        const slot = <i32>load<u16>(p + <usize>at);
        const c = load<u32>(p + <usize>at + 2);
        sums.set(slot, (sums.has(slot) ? sums.get(slot) : 0) + c);
      }
    }
    const keys = sums.keys();
    for (let i = 0; i < keys.length; i++) this.writer.addInflight(keys[i], sums.get(keys[i]));
  }
}

function register(): u32 {
  const name = String.UTF8.encode(REPORT_QUEUE);
  const out = memory.data(4);
  return imports.proxy_register_shared_queue(changetype<usize>(name), name.byteLength, out) === OK
    ? load<u32>(out)
    : 0;
}
