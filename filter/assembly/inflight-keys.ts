// What remains of the per-VM in-flight keys now that the gateway board (gateway-board.ts) carries
// the VMs' requests: the thread-slot bound, how long a VM's published counts stay fresh, and the
// stamp of kvr.un.<t> — written by VMs of earlier builds, which the thread-slot claim must not
// take a live slot from (thread-slot.ts).
import { getShared, SharedValue } from "./host";

export const THREADS_KEY = "kvr.threads";
/**
 * VM slots are bounded by this many: a slot is reused once its owner's lease lapsed
 * (thread-slot.ts), and a VM that finds them all held goes without one.
 */
export const MAX_THREADS: u32 = 1024;

/** A VM's in-flight counts count while their stamp is this recent: 5 ticks, at least 500 ms. */
export function inflightFreshMs(tickMs: u32): u64 {
  const five = <u64>tickMs * 5;
  return five > 500 ? five : 500;
}

/** The stamp (ms) of an earlier build's kvr.un.<t>, 0 when it is absent or malformed. */
export function unseenStamp(t: u32, r: SharedValue): u64 {
  getShared(`kvr.un.${t}`, r);
  const v = r.value;
  return v === null || v.byteLength < 8 ? 0 : load<u64>(changetype<usize>(v));
}
