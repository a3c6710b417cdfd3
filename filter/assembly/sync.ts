// The leader's long poll of GET /v1/sync (DESIGN §4, docs/wire-format.md §5) and the calls to the
// control plane. An answer is acted on only while this root still holds the lease, and a page is
// applied only over the kvr.sync state its poll asked from (then recorded by CAS on that state):
// a former leader's late answer never moves the cache backwards.

import { applyBucketPatch } from "../core/bucket-patch";
import { ByteBuf } from "../core/byte-buf";
import { CHANGE_RING } from "../core/gateway-board";
import { PluginConfig } from "../core/plugin-config";
import { SYNC_FLAG_MORE, SYNC_FLAG_RESET, SYNC_RECORD_BYTES, SyncPage, SyncRecord } from "../core/sync-page";
import { cache } from "./cache-view";
import {
  getBuffer,
  getHeaderString,
  getShared,
  HTTP_CALL_RESPONSE_BODY,
  HTTP_CALL_RESPONSE_HEADERS,
  httpCall,
  LOG_DEBUG,
  LOG_WARN,
  log,
  nowMs,
  OK,
  SharedValue,
  setShared,
} from "./host";
import { Leadership } from "./leader";
import { stats } from "./metrics";
import { vm } from "./state";

const SYNC_KEY = "kvr.sync";
const MAX_BACKOFF_MS: u32 = 5000;
/** kvr.sync is written by CAS only; over an absent key any cas works, this one says so. */
const ABSENT_SYNC_CAS: u32 = 0xffffffff;

/** A call to the control plane's cluster with the gateway's headers; the token, 0 when refused. */
export function callControlPlane(
  cfg: PluginConfig,
  gateway: string,
  method: string,
  path: string,
  body: ArrayBuffer,
): u32 {
  const names: string[] = [":method", ":path", ":authority", "x-kvroute-gateway"];
  const values: string[] = [method, path, cfg.authority, gateway];
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

export class SyncPoller {
  /** Token of the outstanding poll, 0 when none. */
  token: u32 = 0;
  /** The kvr.sync state the outstanding poll asked from: its answer applies over nothing else. */
  private asked: SyncRecord = new SyncRecord();
  private stored: SyncRecord = new SyncRecord();
  private nextMs: u64 = 0;
  private backoffMs: u32 = 0;
  private read: SharedValue = new SharedValue();
  private page: SyncPage = new SyncPage();
  private scratch: ByteBuf = new ByteBuf(SYNC_RECORD_BYTES);
  /** A bucket's image while a patch is applied to it. */
  private held: SharedValue = new SharedValue();
  private patched: ByteBuf = new ByteBuf(1024);

  /** On a leader's tick: polls unless a poll is out or a backoff runs. */
  maybeStart(cfg: PluginConfig, gateway: string, now: u64): void {
    if (this.token === 0 && now >= this.nextMs) this.start(cfg, gateway);
  }

  private start(cfg: PluginConfig, gateway: string): void {
    const r = this.read;
    getShared(SYNC_KEY, r);
    const a = this.asked;
    a.read(r.value === null ? 0 : changetype<usize>(r.value!), r.value === null ? 0 : r.value!.byteLength);
    // protocol=3: changed buckets may come as patches of the images this gateway holds — asked
    // only when every key here is as of the version (not mid-way through a paged catch-up). A
    // control plane from before segment rows knows only protocol=2, so it answers with values.
    const patches = a.partial ? "" : "&protocol=3";
    const path = `${cfg.syncPath}?epoch=${a.epoch}&version=${a.version}${patches}`;
    this.token = callControlPlane(cfg, gateway, "GET", path, new ArrayBuffer(0));
    if (this.token === 0) this.failed("the control-plane cluster refused the call");
  }

  private failed(why: string): void {
    stats.inc(stats.syncErrors);
    this.backoffMs =
      this.backoffMs === 0 ? 100 : this.backoffMs * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : this.backoffMs * 2;
    this.nextMs = nowMs() + <u64>this.backoffMs;
    // Logged once per backoff step, not per retry storm; the cache keeps routing meanwhile.
    if (this.backoffMs <= 200 || this.backoffMs === MAX_BACKOFF_MS)
      log(LOG_WARN, `kvroute: sync failed (${why}); retrying in ${this.backoffMs} ms`);
  }

  /** The answer to the outstanding poll (the token already matched). */
  onResponse(cfg: PluginConfig, gateway: string, bodySize: u32, lease: Leadership, rootId: u32): void {
    this.token = 0;
    // The lease may have moved while the call was out: only the holder applies and polls again.
    if (!lease.holds(nowMs())) {
      log(LOG_DEBUG, `kvroute: root ${rootId} is no longer the leader; dropping its sync answer`);
      return;
    }
    const status = getHeaderString(HTTP_CALL_RESPONSE_HEADERS, ":status");
    if (status !== "200") {
      this.failed(status === null ? "no response" : `status ${status}`);
      return;
    }
    const body: ArrayBuffer | null = bodySize === 0 ? null : getBuffer(HTTP_CALL_RESPONSE_BODY, 0, bodySize);
    const page = this.page;
    if (body === null || !page.open(changetype<usize>(body), body.byteLength)) {
      this.failed("malformed sync page");
      return;
    }
    this.backoffMs = 0;
    this.apply(page);
    // A long poll answers when there is news (or after its wait): ask again at once.
    this.nextMs = 0;
    this.start(cfg, gateway);
  }

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
    if (page.count === 0 && page.epoch === s.epoch && page.version === s.version) return;
    const cas = r.value === null ? ABSENT_SYNC_CAS : r.cas;
    const edit = vm.board.edit;
    let changed = 0;
    let unpatched = false;
    while (page.next()) {
      const key = String.UTF8.decodeUnsafe(page.keyPtr, <usize>page.keyLen);
      const id = key.startsWith("kvr.b.") ? indexOf(key, 6) : -1;
      if (!page.patch) setShared(key, page.valuePtr, page.valueLen, 0);
      else if (id < 0 || !this.patch(key, page.valuePtr, page.valueLen)) unpatched = true;
      // The VMs keep the buckets they read: tell them which to read again.
      if (id < 0) continue;
      if (++changed > <i32>CHANGE_RING) edit.changeFlood = true;
      else edit.changes.appendI32(id);
    }
    if (changed > 0) publishChanges();
    if ((page.flags & SYNC_FLAG_RESET) !== 0) stats.inc(stats.syncResets);
    // Resyncing from the reset page until a page without `more` (bucket bitmaps may still name
    // another epoch's slots meanwhile); recorded for operators, the request path does not read it.
    const more = (page.flags & SYNC_FLAG_MORE) !== 0;
    const next = new SyncRecord();
    next.epoch = page.epoch;
    next.version = page.version;
    next.resyncing = more && (s.resyncing || (page.flags & SYNC_FLAG_RESET) !== 0);
    next.partial = more;
    if (unpatched) {
      // A patch that did not fit the image held here (which should not happen): version 0 of
      // the epoch makes the next poll send every value again, which converges.
      stats.inc(stats.syncErrors);
      log(
        LOG_WARN,
        "kvroute: a bucket patch did not apply to the image held here; resyncing the whole cache",
      );
      next.version = 0;
      next.resyncing = true;
    }
    const b = this.scratch;
    b.len = 0;
    b.reserve(SYNC_RECORD_BYTES);
    next.write(b.ptr);
    if (setShared(SYNC_KEY, b.ptr, SYNC_RECORD_BYTES, cas) !== OK) {
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

  /** Applies a bucket patch to the image in shared data; false when it does not fit that image. */
  private patch(key: string, ptr: usize, len: i32): bool {
    const h = this.held;
    getShared(key, h);
    const image = h.value;
    const n =
      image === null
        ? applyBucketPatch(0, 0, ptr, len, this.patched)
        : applyBucketPatch(changetype<usize>(image), image.byteLength, ptr, len, this.patched);
    if (n < 0) return false;
    setShared(key, this.patched.ptr, n, 0);
    return true;
  }
}

/** The decimal index after `from`, or -1 (the control plane writes plain decimals). */
function indexOf(key: string, from: i32): i32 {
  if (key.length <= from || key.length > from + 9) return -1;
  let n = 0;
  for (let i = from; i < key.length; i++) {
    const c = key.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n;
}

/**
 * The change records onto the board at once: until they land, VMs may walk buckets they hold
 * from before this page. A lost race is tried again (each try reads the board afresh); past that
 * the records wait for this VM's next write.
 */
function publishChanges(): void {
  for (let attempt = 0; attempt < 8; attempt++) if (vm.publishNow(nowMs())) return;
}
