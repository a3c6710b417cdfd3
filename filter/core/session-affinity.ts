// Session affinity (docs/configuration.md "Session affinity"): a conversation's requests carry a
// session header; the slot its last request went to is a preference for the next one — kept while
// that slot is a candidate of the request's pool and its cost is within the configured margin of
// the best, so a session follows its cache before the engine's KV events confirm it.
//
// The session id is never stored or reported: only its XXH64 (seeded apart from the chunk
// hashes). Two tables hold session → slot, both in the speculative routes' layout
// (speculative.ts) with depth 0 — count u8, 3 reserved bytes, up to SESSION_WAYS entries of
// (hash u64, expiry u64, depth u32 = 0, slot u16, reserved u16):
// - `kvr.ss.<j>`: this gateway's, written by the filter after routing (expiry = now + TTL);
// - `kvr.sc.<j>`: the fleet's, published by the control plane from every gateway's reports, with
//   the expiry the reporting gateway gave it (gateways' clocks are wall clocks: a skew between
//   them only shifts the TTL by as much).
// When both name the session, the entry that expires last — the session's latest request,
// wherever it was routed — wins.
// j = hash & (SESSION_KEYS − 1): both are bounded to SESSION_KEYS × SESSION_WAYS sessions.
import { ByteBuf } from "./byte-buf";
import { specExpiry, specLookup, specUpdate } from "./speculative";
import { xxh64 } from "./xxh64";

export const SESSION_KEYS: u32 = 1024;
/** Entries per key: the speculative layout's bound (speculative.ts SPEC_WAYS). */
export const SESSION_WAYS: i32 = 8;
/**
 * Longest session id used. A longer header (up to Envoy's header limits) is ignored and counted —
 * hashing it would be bounded anyway, but no client's real session id is that long.
 */
export const MAX_SESSION_ID_BYTES: i32 = 256;
/** Seed of the session hash: a session id never hashes like a prompt chunk. */
const SESSION_SEED: u64 = 0x5345535349; // "ISSES"

/** The depth a session entry carries in the shared speculative layout. */
const SESSION_DEPTH: u32 = 0;

/** What happened to a request's session (stats and the report's session entries). */
export const SESSION_NEW: u8 = 0;
export const SESSION_KEPT: u8 = 1;
export const SESSION_MOVED: u8 = 2;

/** The session hash of a header value, or 0 when the value is no usable session id (empty, too long). */
export function sessionHash(p: usize, len: i32): u64 {
  if (len <= 0 || len > MAX_SESSION_ID_BYTES) return 0;
  const h = xxh64(p, <usize>len, SESSION_SEED);
  // 0 means "no session" to the callers; a real id hashing to 0 takes the next value.
  return h === 0 ? 1 : h;
}

/** Shared-data key index of a session hash (both tables). */
export function sessionKey(hash: u64): u32 {
  return <u32>(hash & <u64>(SESSION_KEYS - 1));
}

/** The slot a live entry for `hash` names in the table value at p (may be 0), or -1. */
export function sessionLookup(p: usize, len: i32, hash: u64, nowMs: u64): i32 {
  return specLookup(p, len, hash, SESSION_DEPTH, nowMs);
}

/** The expiry of the live entry for `hash` in the table value at p (may be 0), or 0. */
export function sessionExpiry(p: usize, len: i32, hash: u64, nowMs: u64): u64 {
  return specExpiry(p, len, hash, SESSION_DEPTH, nowMs);
}

/** Whether the remembered slot stays: cost within `margin` of the lowest (both in the cost's units). */
export function keepsSession(cost: f64, lowest: f64, margin: f64): bool {
  return cost <= lowest + margin;
}

/** Writes into `out` the table value at p (may be 0) with `hash` → `slot` until `expiresMs`. */
export function sessionUpdate(
  p: usize,
  len: i32,
  hash: u64,
  slot: i32,
  expiresMs: u64,
  nowMs: u64,
  out: ByteBuf,
): void {
  specUpdate(p, len, hash, SESSION_DEPTH, slot, expiresMs, nowMs, out);
}
