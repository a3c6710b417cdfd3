// The leader lease in shared data (`kvr.lease`): owner u64 and expiry (ms) u64. Exactly one root
// context per Envoy process long-polls the control plane; the others tick, see a live lease and
// do nothing. Envoy's worker and main threads tick in parallel and setting an *absent* shared-data
// key succeeds whatever the CAS value, so a lease is never taken in one step:
//   tick 1  the key is absent or lapsed: write a claim (CAS on the value read; over an absent key a
//           CAS no stored value has, so the claim fails once any other root created the key), then
//           read it back and remember the cas the claim got;
//   tick 2  the key still names us with that cas: nobody wrote since, the lease is ours. Renew it
//           by CAS on every tick after that.
// A holder that finds another owner (or loses a renewal CAS) steps down at once. A root stops
// renewing when its thread stalls or its VM fails, so the lease lapses and another root claims it.
export const LEASE_BYTES: i32 = 16;

/** CAS for a claim over an absent key (the global cas counter reaches it only after 2^32 writes). */
export const ABSENT_KEY_CAS: u32 = 0xffffffff;

export const LEASE_NONE: i32 = 0;
/** Our claim is written; it becomes the lease if it is still there, unchanged, on the next tick. */
export const LEASE_CLAIMED: i32 = 1;
export const LEASE_HELD: i32 = 2;

/** Owner of the lease at [value, value+len), 0 when absent or malformed. */
export function leaseOwner(value: usize, len: i32): u64 {
  return value === 0 || len !== LEASE_BYTES ? 0 : load<u64>(value);
}

/** Whether the lease at [value, value+len) is absent, malformed or past its expiry. */
export function leaseLapsed(value: usize, len: i32, nowMs: u64): bool {
  return value === 0 || len !== LEASE_BYTES || load<u64>(value, 8) <= nowMs;
}

export function writeLease(out: usize, me: u64, expiresMs: u64): void {
  store<u64>(out, me);
  store<u64>(out, expiresMs, 8);
}
