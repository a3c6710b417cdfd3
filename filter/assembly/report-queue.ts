// How report records travel from the threads to the leader without the shared queue growing.
// Envoy's shared queues have no size limit and every enqueue posts a task to the registrant's
// thread, so a thread never enqueues per request: it keeps its records in an outbox and, on its
// tick, enqueues them as one batch — and only when the leader has drained the queue since this
// thread's previous batch. The leader counts its complete drains in `kvr.drained` (u64); a thread
// whose last batch went out at drain count d waits for a count above d. So between two drains a
// thread adds at most one batch (two when Envoy's parallel threads overlap a drain), and a batch is
// at most OUTBOX_BYTES: the queue holds at most 2 × VMs × OUTBOX_BYTES however long no leader
// drains it. Records that do not fit in a full outbox are dropped and counted
// (kvroute.reports.dropped, added up and counted once per tick: a request that finds the outbox
// full costs no host call); the report is best effort, routing never waits for it.
import * as imports from "@gcoredev/proxy-wasm-sdk-as/assembly/imports";
import { ByteBuf } from "../core/byte-buf";
import { getShared, OK, SharedValue, setShared } from "./host";
import { stats } from "./metrics";

export const DRAINED_KEY = "kvr.drained";
/** One thread's unsent records at most (bytes); also the largest batch it enqueues. */
export const OUTBOX_BYTES: i32 = 512 * 1024;
const CAS_ATTEMPTS: i32 = 8;

export class ReportOutbox {
  private buf: ByteBuf = new ByteBuf(4096);
  /** This thread has a batch in the queue, enqueued when the drain count was `sentAtDrain`. */
  private sent: bool = false;
  private sentAtDrain: u64 = 0;
  private read: SharedValue = new SharedValue();
  /** Records dropped since the last tick, counted on the next. */
  private dropped: i64 = 0;

  get bytes(): i32 {
    return this.buf.len;
  }

  /** Keeps one record (a queue message built by report-writer) for the next batch. */
  add(record: ByteBuf): void {
    if (this.buf.len + record.len > OUTBOX_BYTES) {
      this.dropped++;
      return;
    }
    this.buf.append(record.ptr, record.len);
  }

  /** On a tick: hands the outbox to the leader as one queue message, if the queue was drained. */
  flush(queue: u32): void {
    if (this.dropped > 0) {
      stats.add(stats.reportsDropped, this.dropped);
      this.dropped = 0;
    }
    if (this.buf.len === 0 || queue === 0) return;
    const drained = drainCount(this.read);
    if (this.sent && drained <= this.sentAtDrain) return;
    if (imports.proxy_enqueue_shared_queue(queue, this.buf.ptr, this.buf.len) !== OK) return;
    this.sent = true;
    this.sentAtDrain = drained;
    this.buf.len = 0;
  }
}

function drainCount(r: SharedValue): u64 {
  getShared(DRAINED_KEY, r);
  const v = r.value;
  return v !== null && v.byteLength === 8 ? load<u64>(changetype<usize>(v)) : 0;
}

const counter = memory.data(8);

/**
 * A new leader creates the counter at 0 if it is absent, so the filter's fixed keys all exist once
 * a leader runs and traffic adds none but the speculative ones (kvr.s.*).
 */
export function ensureDrainCounter(): void {
  const r = new SharedValue();
  if (drainCount(r) !== 0 || r.value !== null) return;
  store<u64>(counter, 0);
  setShared(DRAINED_KEY, counter, 8, 0xffffffff);
}

/** The leader emptied the queue: every thread may send its next batch. */
export function markDrained(): void {
  const r = new SharedValue();
  for (let i = 0; i < CAS_ATTEMPTS; i++) {
    const n = drainCount(r);
    store<u64>(counter, n + 1);
    // Over an absent key any cas succeeds; over a present one only the value we read.
    if (setShared(DRAINED_KEY, counter, 8, r.value === null ? 0 : r.cas) === OK) return;
  }
}
