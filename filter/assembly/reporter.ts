// The leader's POST /v1/report every reportMs (docs/wire-format.md §6): the batches the VMs left in
// the report queue, plus the in-flight counts every VM publishes on the board (kvr.gwb).
import { PluginConfig } from "../core/plugin-config";
import { ReportedMax } from "../core/queued-work";
import { ReportWriter } from "../core/report-writer";
import { dequeue, getHeaderString, HostBytes, HTTP_CALL_RESPONSE_HEADERS, LOG_WARN, log, OK } from "./host";
import { stats } from "./metrics";
import { ensureDrainCounter, markDrained } from "./report-queue";
import { vm } from "./state";
import { callControlPlane } from "./sync";

const QUEUE_EMPTY: u32 = 7;
/** A report stops taking queued batches past this many record bytes (the control plane takes 16 MiB). */
const MAX_REPORT_BYTES: i32 = 8 * 1024 * 1024;

export class Reporter {
  /** Token of the outstanding report, 0 when none. */
  token: u32 = 0;
  private nextMs: u64 = 0;
  private writer: ReportWriter = new ReportWriter();
  private reported: ReportedMax = new ReportedMax();
  private counterChecked: bool = false;
  private message: HostBytes = new HostBytes();

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
        const m = this.message;
        const r = dequeue(queue, m);
        if (r !== OK) {
          emptied = r === QUEUE_EMPTY;
          break;
        }
        w.addBatch(m.ptr, m.len);
        m.release();
        taken++;
      }
    }
    // Only a drain that reached the end lets the VMs send their next batches.
    if (emptied && taken > 0) markDrained();
    this.addInflight(cfg, now);
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
      log(LOG_WARN, `kvroute: report refused (status ${status === null ? "none" : status})`);
    }
  }

  /**
   * In-flight per slot over this VM's requests and the other VMs' fresh board sections (the
   * gateway view the tick's board read just refreshed), into the report; what it reports goes
   * onto the board with this tick's write, so every VM of this gateway can tell its own gateway's
   * share of kvr.load's count.
   */
  private addInflight(cfg: PluginConfig, now: u64): void {
    // A reported count stays in kvr.load until the next report replaces it and the sync brings
    // the new sum: a report interval and the ticks around it (a horizon lasts that long, and the
    // previous one's maximum still counts through the current one).
    this.reported.begin(now, <u64>cfg.reportMs + 3 * <u64>cfg.tickMs);
    const q = vm.queue;
    for (let s = 0; s < q.slots; s++) {
      const unseen = q.gatewayUnseenAt(s);
      if (unseen === 0) continue;
      this.writer.addInflight(s, unseen);
      this.reported.record(s, unseen);
    }
    vm.board.edit.reported = this.reported;
  }
}
