// The leader's POST /v1/report every reportMs (docs/wire-format.md §6): the batches the VMs left in
// the report queue, plus the in-flight counts every VM publishes in kvr.if.<t>.
import * as imports from "@gcoredev/proxy-wasm-sdk-as/assembly/imports";
import { globalArrayBufferReference } from "@gcoredev/proxy-wasm-sdk-as/assembly/runtime";
import { PluginConfig } from "../core/plugin-config";
import { ReportWriter } from "../core/report-writer";
import {
  getHeaderString,
  getShared,
  HTTP_CALL_RESPONSE_HEADERS,
  LOG_WARN,
  log,
  OK,
  SharedValue,
} from "./host";
import { stats } from "./metrics";
import { ensureDrainCounter, markDrained } from "./report-queue";
import { callControlPlane } from "./sync";

export const THREADS_KEY = "kvr.threads";
/** In-flight keys kvr.if.<t> are bounded by this many VM slots (more wrap around). */
export const MAX_THREADS: u32 = 1024;
const QUEUE_EMPTY: u32 = 7;
/** A report stops taking queued batches past this many record bytes (the control plane takes 16 MiB). */
const MAX_REPORT_BYTES: i32 = 8 * 1024 * 1024;

/** A VM's in-flight counts count while their stamp is this recent: 5 ticks, at least 500 ms. */
export function inflightFreshMs(tickMs: u32): u64 {
  const five = <u64>tickMs * 5;
  return five > 500 ? five : 500;
}

export class Reporter {
  /** Token of the outstanding report, 0 when none. */
  token: u32 = 0;
  private nextMs: u64 = 0;
  private writer: ReportWriter = new ReportWriter();
  private read: SharedValue = new SharedValue();
  private counterChecked: bool = false;

  /** On a leader's tick: reports unless one is out or it is not time yet. */
  maybeSend(cfg: PluginConfig, gateway: string, queue: u32, now: u64): void {
    if (this.token !== 0 || now < this.nextMs) return;
    if (!this.counterChecked) {
      ensureDrainCounter();
      this.counterChecked = true;
    }
    const w = this.writer;
    w.reset();
    let emptied = false;
    let taken = 0;
    if (queue !== 0) {
      while (w.recordBytes < MAX_REPORT_BYTES) {
        const r = imports.proxy_dequeue_shared_queue(
          queue,
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
    // Only a drain that reached the end lets the VMs send their next batches.
    if (emptied && taken > 0) markDrained();
    this.sumInflight(cfg.tickMs, now);
    this.nextMs = now + <u64>cfg.reportMs;
    w.finish(gateway);
    const body = new ArrayBuffer(w.out.len);
    memory.copy(changetype<usize>(body), w.out.ptr, <usize>w.out.len);
    this.token = callControlPlane(cfg, gateway, "POST", cfg.reportPath, body);
  }

  /** The answer to the outstanding report (the token already matched). */
  onResponse(): void {
    this.token = 0;
    const status = getHeaderString(HTTP_CALL_RESPONSE_HEADERS, ":status");
    if (status !== "204" && status !== "200") {
      stats.inc(stats.syncErrors);
      log(LOG_WARN, `kvroute: report refused (status ${status === null ? "none" : status!})`);
    }
  }

  /**
   * In-flight per slot over every VM's recent kvr.if.<t>. A VM publishes on every tick; one that
   * stopped (its VM failed and was replaced, its thread stalls) drops out after a few ticks, so
   * the requests of a failed VM are not counted next to its replacement's for long.
   */
  private sumInflight(tickMs: u32, now: u64): void {
    const r = this.read;
    getShared(THREADS_KEY, r);
    const threads: u32 =
      r.value !== null && r.value!.byteLength === 4 ? load<u32>(changetype<usize>(r.value!)) : 0;
    const n = threads < MAX_THREADS ? threads : MAX_THREADS;
    const sums = new Map<i32, u32>();
    const freshMs = inflightFreshMs(tickMs);
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
