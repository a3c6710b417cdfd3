// A root context: its plugin configuration, and on ticks the cache refresh, this VM's in-flight
// counts and report batch, and — on the one root of the process that holds the lease — the sync
// long-poll and the reports (DESIGN §4). A VM has one root context per plugin configuration (a
// config update adds one); only the newest (the primary) does the VM's chores and may lead.
import * as imports from "@gcoredev/proxy-wasm-sdk-as/assembly/imports";
import { globalArrayBufferReference } from "@gcoredev/proxy-wasm-sdk-as/assembly/runtime";
import { ByteBuf } from "../core/byte-buf";
import { PluginConfig, parsePluginConfig, pluginConfigError } from "../core/plugin-config";
import { ReportWriter } from "../core/report-writer";
import { SYNC_FLAG_MORE, SYNC_FLAG_RESET, SYNC_RECORD_BYTES, SyncPage, SyncRecord } from "../core/sync-page";
import { cache } from "./cache-view";
import {
  getBuffer,
  getHeaderString,
  getProperty,
  getShared,
  HTTP_CALL_RESPONSE_BODY,
  HTTP_CALL_RESPONSE_HEADERS,
  httpCall,
  LOG_DEBUG,
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
import { Leadership } from "./leader";
import { stats } from "./metrics";
import { markDrained } from "./report-queue";
import { vm } from "./state";

const SYNC_KEY = "kvr.sync";
const THREADS_KEY = "kvr.threads";
const REPORT_QUEUE = "kvr.reports";
/** In-flight keys kvr.if.<t> are bounded by this many thread slots (threads beyond wrap around). */
const MAX_THREADS: u32 = 1024;
const MAX_BACKOFF_MS: u32 = 5000;
const QUEUE_EMPTY: u32 = 7;
/** A report stops taking queued batches past this many record bytes (the control plane takes 16 MiB). */
const MAX_REPORT_BYTES: i32 = 8 * 1024 * 1024;

export class KvrouteRoot {
  config: PluginConfig = new PluginConfig();
  /** on_configure accepted this root's configuration. */
  configured: bool = false;
  private leadership: Leadership = new Leadership(0, 1000);
  private syncToken: u32 = 0;
  /** The kvr.sync state the outstanding poll asked from: its answer applies over nothing else. */
  private asked: SyncRecord = new SyncRecord();
  private reportToken: u32 = 0;
  private nextSyncMs: u64 = 0;
  private backoffMs: u32 = 0;
  private nextReportMs: u64 = 0;
  private gateway: string = "";
  private read: SharedValue = new SharedValue();
  private stored: SyncRecord = new SyncRecord();
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
    this.config = cfg;
    vm.config = cfg;
    stats.define();
    // One slot per VM: a second root context of this VM publishes the same counts under it.
    if (vm.thread < 0) vm.thread = this.claimThreadIndex();
    // Registering again keeps the token; delivery moves to this root (nothing here needs it).
    vm.reportQueue = register();
    const node = getProperty("node\0id");
    this.gateway =
      cfg.gatewayId.length > 0
        ? cfg.gatewayId
        : node !== null && node.byteLength > 0
          ? String.UTF8.decode(node)
          : "envoy";
    // Unique per root context of this process: thread slot, context id and the clock.
    const me = ((<u64>vm.thread) << 48) ^ ((<u64>this.id) << 32) ^ nowMs();
    const leaseMs = <u64>(cfg.tickMs * 3 > 1000 ? cfg.tickMs * 3 : 1000);
    this.leadership = new Leadership(me === 0 ? 1 : me, leaseMs);
    setTickMs(cfg.tickMs);
    cache.refresh();
    log(
      LOG_INFO,
      `kvroute: configured root ${this.id} (thread slot ${vm.thread}, control plane cluster ${cfg.cluster})`,
    );
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

  get leads(): bool {
    return this.leadership.held;
  }

  /** `primary`: this is the VM's newest root context (the others only finish their streams). */
  tick(primary: bool): void {
    const now = nowMs();
    if (!primary) {
      this.leadership.release();
      return;
    }
    vm.config = this.config;
    cache.refresh();
    this.rescueWaitingStreams(now);
    this.publishInflight(now);
    vm.outbox.flush(vm.reportQueue);
    const leader = this.leadership.tick(now);
    // Process-wide gauge, written by every thread's tick: is there a live leader?
    stats.record(stats.syncLeader, leader || this.leadership.otherLive ? 1 : 0);
    if (!leader) return;
    if (this.syncToken === 0 && now >= this.nextSyncMs) this.startSync();
    if (this.reportToken === 0 && now >= this.nextReportMs) this.sendReport(now);
  }

  /** proxy_on_done: this configuration is gone; let another root lead at once. */
  done(): void {
    this.leadership.release();
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
      vm.config = vm.configOf(id, this.config);
      vm.streams.get(id).routeWithoutBody();
      imports.proxy_continue_stream(0);
    }
    vm.config = this.config;
    imports.proxy_set_effective_context(this.id);
  }

  /** This VM's in-flight counts, stamped, for the leader's report. */
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
    const cfg = this.config;
    const r = this.read;
    getShared(SYNC_KEY, r);
    const a = this.asked;
    a.read(r.value === null ? 0 : changetype<usize>(r.value!), r.value === null ? 0 : r.value!.byteLength);
    const path = `${cfg.syncPath}?epoch=${a.epoch}&version=${a.version}`;
    this.syncToken = this.call("GET", path, new ArrayBuffer(0));
    if (this.syncToken === 0) this.syncFailed("the control-plane cluster refused the call");
  }

  private call(method: string, path: string, body: ArrayBuffer): u32 {
    const cfg = this.config;
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
    // The lease may have moved while the call was out: only the holder applies and polls again.
    if (!this.leadership.holds(nowMs())) {
      log(LOG_DEBUG, `kvroute: root ${this.id} is no longer the leader; dropping its sync answer`);
      return;
    }
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
    this.apply(page);
    // A long poll answers when there is news (or after its wait): ask again at once.
    this.nextSyncMs = 0;
    this.startSync();
  }

  /**
   * Applies a page only over the kvr.sync state its poll asked from, and records the new state by
   * CAS on that same value: a page from an older state (a former leader's late answer) never
   * moves the cache backwards, and two roots can never both record their page.
   */
  private apply(page: SyncPage): void {
    const r = this.read;
    getShared(SYNC_KEY, r);
    const s = this.stored;
    s.read(r.value === null ? 0 : changetype<usize>(r.value!), r.value === null ? 0 : r.value!.byteLength);
    const a = this.asked;
    if (s.epoch !== a.epoch || s.version !== a.version) {
      log(
        LOG_DEBUG,
        `kvroute: dropping a sync page for ${a.epoch}/${a.version}: the cache is at ${s.epoch}/${s.version}`,
      );
      return;
    }
    const changes = page.count > 0 || page.epoch !== s.epoch || page.version !== s.version;
    if (!changes) return;
    const cas = r.value === null ? 0 : r.cas;
    while (page.next()) {
      const key = String.UTF8.decodeUnsafe(page.keyPtr, <usize>page.keyLen);
      setShared(key, page.valuePtr, page.valueLen, 0);
    }
    if ((page.flags & SYNC_FLAG_RESET) !== 0) stats.inc(stats.syncResets);
    // Resyncing from the reset page until a page without `more`: bucket bitmaps may still name
    // another epoch's slots meanwhile.
    const more = (page.flags & SYNC_FLAG_MORE) !== 0;
    const next = new SyncRecord();
    next.epoch = page.epoch;
    next.version = page.version;
    next.resyncing = more && (s.resyncing || (page.flags & SYNC_FLAG_RESET) !== 0);
    const b = this.scratch;
    b.len = 0;
    b.reserve(SYNC_RECORD_BYTES);
    next.write(b.ptr);
    if (setShared(SYNC_KEY, b.ptr, SYNC_RECORD_BYTES, cas === 0 ? ABSENT_SYNC_CAS : cas) !== OK) {
      // Another root applied a page while we wrote ours: the keys may mix both pages. Version 0
      // of the epoch makes the next poll walk the whole key space, which converges.
      next.version = 0;
      next.resyncing = true;
      next.write(b.ptr);
      setShared(SYNC_KEY, b.ptr, SYNC_RECORD_BYTES, 0);
      log(LOG_WARN, "kvroute: two sync answers were applied at once; resyncing the whole cache");
      return;
    }
    stats.record(stats.syncVersion, page.version);
    cache.refresh();
  }

  private sendReport(now: u64): void {
    const w = this.writer;
    w.reset();
    const q = vm.reportQueue;
    let emptied = false;
    let taken = 0;
    if (q !== 0) {
      while (w.recordBytes < MAX_REPORT_BYTES) {
        const r = imports.proxy_dequeue_shared_queue(
          q,
          globalArrayBufferReference.bufferPtr(),
          globalArrayBufferReference.sizePtr(),
        );
        if (r !== OK) {
          emptied = r === QUEUE_EMPTY;
          break;
        }
        const m = globalArrayBufferReference.toArrayBuffer();
        w.addBatch(changetype<usize>(m), m.byteLength);
        taken++;
      }
    }
    // Only a drain that reached the end lets the threads send their next batches.
    if (emptied && taken > 0) markDrained();
    this.sumInflight(now);
    this.nextReportMs = now + <u64>this.config.reportMs;
    w.finish(this.gateway);
    const body = new ArrayBuffer(w.out.len);
    memory.copy(changetype<usize>(body), w.out.ptr, <usize>w.out.len);
    this.reportToken = this.call("POST", this.config.reportPath, body);
  }

  /**
   * In-flight per slot over every VM's recent kvr.if.<t>. A VM publishes on every tick; one that
   * stopped (its VM failed and was replaced, its thread stalls) drops out after a few ticks, so
   * the requests of a failed VM are not counted next to its replacement's for long.
   */
  private sumInflight(now: u64): void {
    const r = this.read;
    getShared(THREADS_KEY, r);
    const threads: u32 =
      r.value !== null && r.value!.byteLength === 4 ? load<u32>(changetype<usize>(r.value!)) : 0;
    const n = threads < MAX_THREADS ? threads : MAX_THREADS;
    const sums = new Map<i32, u32>();
    const freshMs = inflightFreshMs(this.config.tickMs);
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

/** kvr.sync is written by CAS only; over an absent key any cas works, this one says so. */
const ABSENT_SYNC_CAS: u32 = 0xffffffff;

/** A VM's in-flight counts count while their stamp is this recent: 5 ticks, at least 500 ms. */
export function inflightFreshMs(tickMs: u32): u64 {
  const five = <u64>tickMs * 5;
  return five > 500 ? five : 500;
}

function register(): u32 {
  const name = String.UTF8.encode(REPORT_QUEUE);
  const out = memory.data(4);
  return imports.proxy_register_shared_queue(changetype<usize>(name), name.byteLength, out) === OK
    ? load<u32>(out)
    : 0;
}
