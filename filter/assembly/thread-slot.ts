// This VM's thread slot: its index t in the kvr.un.<t> key space (docs/wire-format.md §4.5), where
// it publishes its in-flight requests for the gateway's other VMs. Two live VMs must never hold
// the same slot — they would overwrite each other's counts — and the key space must stay bounded
// (shared data has no delete) however often VMs are replaced.
//
// Envoy's worker threads and its main thread configure their VMs in parallel, and setting an
// *absent* shared-data key succeeds whatever the cas (REFERENCE §8). A claim by CAS with cas 0
// over an absent counter therefore let two VMs that both read "absent" both succeed and share
// slot 0. So, as for the leader lease (filter/core/lease.ts), no write here creates a key with
// cas 0: over a key read as absent it writes with ABSENT_KEY_CAS (0xFFFFFFFF: a just-created key
// has it only if its write drew that one of the 2^32 - 1 values Envoy's cas counter cycles
// through), which fails once any other VM created the key in between; over a present key it
// writes by CAS on the cas read. Each set is atomic in Envoy (one process-wide mutex), so every
// write is one step of a race that exactly one VM wins. A claim needs no second look: after its
// CAS, every other VM reads a live lease and leaves the slot alone, and a former holder whose
// lease lapsed has stopped writing kvr.un.<t> (holds()). A loser re-reads and tries again. In Envoy the configuration canary (proxy-wasm's WasmHandleBase::canary, on the
// main thread before the workers start) happens to create these keys first; nothing here relies
// on that.
//   kvr.vms     u64: tickets handed out. A VM takes the next one (CAS); it names the VM in the
//               slot leases, unique among the process's VMs, ever.
//   kvr.threads u32: slots handed out so far, at most MAX_THREADS (readers scan kvr.un.<t> for t
//               below it). It grows only when no handed-out slot is free.
//   kvr.th.<t>  slot t's lease, in kvr.lease's layout: owner ticket u64, expiry u64 (ms). Taken by
//               CAS when absent or lapsed, renewed by CAS on the primary root's ticks once less than
//               half of it is left. A slot whose owner died (a trap, FAIL_RELOAD, a replaced VM,
//               a configuration canary) is free again when its lease lapses, so the slots in use
//               stay near the number of live VMs, instead of wrapping onto a live VM's slot after
//               MAX_THREADS reloads.
// A VM writes kvr.un.<t> only while its own lease is unexpired (holds()): a VM whose thread
// stalled past its lease stops publishing there and, on its next tick, finds the slot taken and
// claims another. A VM that finds all MAX_THREADS slots held has none (the other VMs do not see
// its requests) and tries again on later ticks.
import { ByteBuf } from "../core/byte-buf";
import { ABSENT_KEY_CAS, LEASE_BYTES, leaseLapsed, leaseOwner, writeLease } from "../core/lease";
import { getShared, LOG_INFO, LOG_WARN, log, OK, SharedValue, setShared } from "./host";
import { MAX_THREADS, THREADS_KEY, unseenStamp } from "./inflight-keys";

export const VMS_KEY = "kvr.vms";

/** `kvr.th.<t>`: slot t's lease. */
export function threadSlotKey(t: u32): string {
  return `kvr.th.${t}`;
}

/**
 * How long a slot stays its owner's without a renewal: max(20 ticks, 5 s). Far longer than a
 * tick (a busy thread's late tick keeps its slot) and than the max(5 ticks, 500 ms) after which
 * the other VMs stop counting a silent VM's kvr.un.<t>, so a reused slot's old counts are stale
 * already; short enough that VMs replaced in a loop (FAIL_RELOAD, at most one per 1–1.5 s per
 * thread) free their slots long before MAX_THREADS are held.
 */
export function threadLeaseMs(tickMs: u32): u64 {
  const ticks = <u64>tickMs * 20;
  return ticks > 5000 ? ticks : 5000;
}

const ATTEMPTS = 16;

export class ThreadSlot {
  /** This VM's ticket (kvr.vms): 0 until taken. */
  ticket: u64 = 0;
  /** The slot t this VM holds, -1 while none. */
  index: i32 = -1;
  /** Expiry of this VM's lease on `index`, as it last wrote it (ms). */
  until: u64 = 0;
  /** A claim that found no slot is not tried again before this (ms). */
  private retryAt: u64 = 0;
  private key: string = "";
  private read: SharedValue = new SharedValue();
  private out: ByteBuf = new ByteBuf(LEASE_BYTES);

  constructor() {
    this.out.reserve(LEASE_BYTES);
  }

  /** Whether this VM may write kvr.un.<index> at `now`: it holds a slot and its lease is unexpired. */
  holds(now: u64): bool {
    return this.index >= 0 && now < this.until;
  }

  /** On this VM's first on_configure: a slot of its own (the index, -1 when none could be had). */
  claim(now: u64, leaseMs: u64): i32 {
    if (this.index >= 0) return this.index;
    if (now < this.retryAt) return -1;
    if (this.ticket === 0) this.ticket = this.takeTicket();
    if (this.ticket !== 0) {
      const r = this.read;
      for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
        getShared(THREADS_KEY, r);
        const v = r.value;
        const handedOut: u32 = v !== null && v.byteLength === 4 ? load<u32>(changetype<usize>(v)) : 0;
        const cas = v === null ? ABSENT_KEY_CAS : r.cas;
        const n = handedOut < MAX_THREADS ? handedOut : MAX_THREADS;
        // A handed-out slot whose owner is gone first; then one more slot.
        for (let t: u32 = 0; t < n; t++) if (this.take(t, now, leaseMs)) return this.index;
        if (n >= MAX_THREADS) break;
        store<u32>(this.out.ptr, n + 1);
        if (setShared(THREADS_KEY, this.out.ptr, 4, cas) !== OK) continue;
        // Slot n is new, but a VM that read the new count may have taken it first: then rescan.
        if (this.take(n, now, leaseMs)) return this.index;
      }
    }
    const wait = leaseMs / 10;
    this.retryAt = now + (wait > 500 ? wait : 500);
    log(
      LOG_WARN,
      `kvroute: no thread slot could be claimed (all ${MAX_THREADS} held, or every try lost its race); this VM's requests are not shown to the other VMs until one is`,
    );
    return -1;
  }

  /**
   * On every tick of the VM's primary root: renews the lease once less than half of it is left,
   * claims a slot while none is held, and claims another when the slot was taken over (this VM's
   * ticks stalled past its lease). The index held afterwards.
   */
  keep(now: u64, leaseMs: u64): i32 {
    if (this.index < 0) {
      const got = this.claim(now, leaseMs);
      if (got >= 0) log(LOG_INFO, `kvroute: claimed thread slot ${got}`);
      return got;
    }
    // More than half the lease left: nobody may take the slot yet, no need to look.
    if (this.until > now + leaseMs / 2) return this.index;
    const r = this.read;
    getShared(this.key, r);
    const v = r.value;
    if (v !== null && leaseOwner(changetype<usize>(v), v.byteLength) === this.ticket) {
      writeLease(this.out.ptr, this.ticket, now + leaseMs);
      if (setShared(this.key, this.out.ptr, LEASE_BYTES, r.cas) === OK) {
        this.until = now + leaseMs;
        return this.index;
      }
    }
    const lost = this.index;
    this.index = -1;
    this.until = 0;
    const got = this.claim(now, leaseMs);
    log(
      LOG_WARN,
      `kvroute: thread slot ${lost} was taken over (this VM's ticks stalled past its lease); now thread slot ${got}`,
    );
    return got;
  }

  /** Takes slot t when its lease is absent or lapsed (or already ours), by one CAS write. */
  private take(t: u32, now: u64, leaseMs: u64): bool {
    const r = this.read;
    const key = threadSlotKey(t);
    getShared(key, r);
    const v = r.value;
    const p: usize = v === null ? 0 : changetype<usize>(v);
    const len = v === null ? 0 : v.byteLength;
    if (leaseOwner(p, len) !== this.ticket && !leaseLapsed(p, len, now)) return false;
    const cas = v === null ? ABSENT_KEY_CAS : r.cas;
    // A VM of an earlier build holds its slot with no lease key: its fresh kvr.un.<t> says so.
    if (v === null) {
      const stamp = unseenStamp(t, r);
      if (stamp !== 0 && stamp + leaseMs > now) return false;
    }
    writeLease(this.out.ptr, this.ticket, now + leaseMs);
    if (setShared(key, this.out.ptr, LEASE_BYTES, cas) !== OK) return false;
    this.index = <i32>t;
    this.until = now + leaseMs;
    this.key = key;
    return true;
  }

  /** The next ticket from kvr.vms, by CAS; 0 when 64 tries all lost their race. */
  private takeTicket(): u64 {
    const r = this.read;
    for (let attempt = 0; attempt < 64; attempt++) {
      getShared(VMS_KEY, r);
      const v = r.value;
      const issued: u64 = v !== null && v.byteLength === 8 ? load<u64>(changetype<usize>(v)) : 0;
      store<u64>(this.out.ptr, issued + 1);
      if (setShared(VMS_KEY, this.out.ptr, 8, v === null ? ABSENT_KEY_CAS : r.cas) === OK) return issued + 1;
    }
    return 0;
  }
}
