// One root context's part in the leader election over `kvr.lease` (the protocol is described in
// filter/core/lease.ts). tick() moves the claim along once per tick; holds() is the check a
// leader makes before it acts on a control-plane answer, since the lease may have moved while the
// call was out.
import { ByteBuf } from "../core/byte-buf";
import {
  ABSENT_KEY_CAS,
  LEASE_BYTES,
  LEASE_CLAIMED,
  LEASE_HELD,
  LEASE_NONE,
  leaseLapsed,
  leaseOwner,
  writeLease,
} from "../core/lease";
import { getShared, OK, SharedValue, setShared } from "./host";

export const LEASE_KEY = "kvr.lease";

export class Leadership {
  state: i32 = LEASE_NONE;
  /** After tick(): another root holds (or is claiming) a lease that has not lapsed. */
  otherLive: bool = false;
  private claimCas: u32 = 0;
  private read: SharedValue = new SharedValue();
  private out: ByteBuf = new ByteBuf(LEASE_BYTES);

  constructor(
    readonly me: u64,
    readonly leaseMs: u64,
  ) {
    this.out.reserve(LEASE_BYTES);
  }

  get held(): bool {
    return this.state === LEASE_HELD;
  }

  /** One tick of the protocol; true while this root holds the lease. */
  tick(nowMs: u64): bool {
    const r = this.read;
    getShared(LEASE_KEY, r);
    const v = r.value;
    const p: usize = v === null ? 0 : changetype<usize>(v);
    const len = v === null ? 0 : v.byteLength;
    const mine = leaseOwner(p, len) === this.me;
    this.otherLive = false;
    if (this.state === LEASE_HELD) {
      if (mine && this.renew(nowMs, r.cas)) return true;
      this.state = LEASE_NONE;
      return false;
    }
    if (this.state === LEASE_CLAIMED) {
      // Two ticks: the claim stands only if nobody wrote the key since we read it back.
      if (mine && r.cas === this.claimCas && this.renew(nowMs, r.cas)) {
        this.state = LEASE_HELD;
        return true;
      }
      this.state = LEASE_NONE;
      this.otherLive = !mine && !leaseLapsed(p, len, nowMs);
      return false;
    }
    if (!leaseLapsed(p, len, nowMs)) {
      this.otherLive = !mine;
      return false;
    }
    writeLease(this.out.ptr, this.me, nowMs + this.leaseMs);
    if (setShared(LEASE_KEY, this.out.ptr, LEASE_BYTES, v === null ? ABSENT_KEY_CAS : r.cas) !== OK) {
      this.otherLive = true;
      return false;
    }
    getShared(LEASE_KEY, r);
    const back = r.value;
    if (back !== null && leaseOwner(changetype<usize>(back), back.byteLength) === this.me) {
      this.state = LEASE_CLAIMED;
      this.claimCas = r.cas;
    } else this.otherLive = true;
    return false;
  }

  /** Is the lease still ours and unexpired right now? Steps down when it is not. */
  holds(nowMs: u64): bool {
    if (this.state !== LEASE_HELD) return false;
    const r = this.read;
    getShared(LEASE_KEY, r);
    const v = r.value;
    const p: usize = v === null ? 0 : changetype<usize>(v);
    const len = v === null ? 0 : v.byteLength;
    if (leaseOwner(p, len) === this.me && !leaseLapsed(p, len, nowMs)) return true;
    this.state = LEASE_NONE;
    return false;
  }

  /** Gives the lease up (a newer configuration leads, or this root is done): expired at once. */
  release(): void {
    if (this.state === LEASE_NONE) return;
    this.state = LEASE_NONE;
    const r = this.read;
    getShared(LEASE_KEY, r);
    const v = r.value;
    if (v === null || leaseOwner(changetype<usize>(v), v.byteLength) !== this.me) return;
    writeLease(this.out.ptr, this.me, 0);
    setShared(LEASE_KEY, this.out.ptr, LEASE_BYTES, r.cas);
  }

  private renew(nowMs: u64, cas: u32): bool {
    writeLease(this.out.ptr, this.me, nowMs + this.leaseMs);
    return setShared(LEASE_KEY, this.out.ptr, LEASE_BYTES, cas) === OK;
  }
}
