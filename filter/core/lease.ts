// The leader lease in shared data (`kvr.lease`): owner u64 and expiry (ms) u64. Exactly one root
// context per Envoy process long-polls the control plane; the others tick, see a live lease and
// do nothing. A leader renews on every tick; when it stops ticking (its thread is stuck or its
// VM failed) the lease lapses and the next thread to tick takes it over by CAS.
export const LEASE_BYTES: i32 = 16;

/** Should `me` write the lease (renew it, or take a lapsed one)? `value` is the current lease or 0 when absent. */
export function shouldTakeLease(value: usize, len: i32, me: u64, nowMs: u64): bool {
  if (value === 0 || len !== LEASE_BYTES) return true;
  const owner = load<u64>(value);
  const expires = load<u64>(value, 8);
  return owner === me || expires <= nowMs;
}

export function writeLease(out: usize, me: u64, expiresMs: u64): void {
  store<u64>(out, me);
  store<u64>(out, expiresMs, 8);
}
