// The filter's own speculative routes (DESIGN §3): right after routing a prompt, a gateway
// records "chunk h at depth d → slot s until time t" in shared data keys `kvr.s.<j>`, so the
// next requests with the same prefix — on any worker thread — follow before the engine's KV
// events (and the control plane's round trip) confirm it. Bounded: SPEC_KEYS keys of at most
// SPEC_WAYS entries; a full key replaces its expired or soonest-expiring entry.
// Layout of one value: count u8, 3 reserved bytes, then `count` entries of 24 bytes:
// chunk hash u64, expiry (ms, the host clock) u64, depth u32, slot u16, reserved u16.
import { ByteBuf } from "./byte-buf";

export const SPEC_KEYS: u32 = 1024;
export const SPEC_WAYS: i32 = 8;
const ENTRY: i32 = 24;
const HEADER: i32 = 4;

/** Entries a value really holds (count bounded by its length, so a damaged value reads as fewer). */
function countOf(p: usize, len: i32): i32 {
  if (p === 0 || len < HEADER) return 0;
  const n = <i32>load<u8>(p);
  const fit = (len - HEADER) / ENTRY;
  return n < fit ? n : fit;
}

/** The live entry for `hash` at `depth` in the value at p, or 0. */
function liveEntry(p: usize, len: i32, hash: u64, depth: u32, nowMs: u64): usize {
  const n = countOf(p, len);
  for (let i = 0; i < n; i++) {
    const e = p + <usize>(HEADER + i * ENTRY);
    if (load<u64>(e) === hash && load<u32>(e, 16) === depth && load<u64>(e, 8) > nowMs) return e;
  }
  return 0;
}

/** The slot a live entry for `hash` at `depth` names in the value at p, or -1. */
export function specLookup(p: usize, len: i32, hash: u64, depth: u32, nowMs: u64): i32 {
  const e = liveEntry(p, len, hash, depth, nowMs);
  return e === 0 ? -1 : <i32>load<u16>(e, 20);
}

/** The expiry of the live entry for `hash` at `depth` in the value at p, or 0. */
export function specExpiry(p: usize, len: i32, hash: u64, depth: u32, nowMs: u64): u64 {
  const e = liveEntry(p, len, hash, depth, nowMs);
  return e === 0 ? 0 : load<u64>(e, 8);
}

/** Writes into `out` the value at p (may be 0) with the entry for `hash` set to slot/depth/expiry. */
export function specUpdate(
  p: usize,
  len: i32,
  hash: u64,
  depth: u32,
  slot: i32,
  expiresMs: u64,
  nowMs: u64,
  out: ByteBuf,
): void {
  const n = countOf(p, len);
  out.len = 0;
  out.reserve(HEADER + SPEC_WAYS * ENTRY);
  const o = out.ptr;
  let kept = 0;
  // Keep the other live entries (this hash's old entry is replaced).
  for (let i = 0; i < n && kept < SPEC_WAYS; i++) {
    const e = p + <usize>(HEADER + i * ENTRY);
    if (load<u64>(e) === hash || load<u64>(e, 8) <= nowMs) continue;
    memory.copy(o + <usize>(HEADER + kept * ENTRY), e, <usize>ENTRY);
    kept++;
  }
  // Full of live entries: the one expiring soonest makes room.
  while (kept >= SPEC_WAYS) {
    let soonest = 0;
    for (let i = 1; i < kept; i++) {
      if (load<u64>(o + <usize>(HEADER + i * ENTRY), 8) < load<u64>(o + <usize>(HEADER + soonest * ENTRY), 8))
        soonest = i;
    }
    kept--;
    if (soonest !== kept)
      memory.copy(o + <usize>(HEADER + soonest * ENTRY), o + <usize>(HEADER + kept * ENTRY), <usize>ENTRY);
  }
  const e = o + <usize>(HEADER + kept * ENTRY);
  store<u64>(e, hash);
  store<u64>(e, expiresMs, 8);
  store<u32>(e, depth, 16);
  store<u16>(e, <u16>slot, 20);
  store<u16>(e, 0, 22);
  kept++;
  store<u32>(o, <u32>kept);
  out.len = HEADER + kept * ENTRY;
}

/** Shared-data key index of a chunk hash. */
export function specKey(hash: u64): u32 {
  return <u32>(hash & <u64>(SPEC_KEYS - 1));
}

/**
 * The checkpoint depths a prompt of `count` chunks is recorded and looked up at: 1, 2, 4, …
 * and `count` itself. Writes them deepest first into `out` (i32 each); returns how many.
 */
export function checkpoints(count: i32, out: ByteBuf): i32 {
  out.len = 0;
  if (count <= 0) return 0;
  out.appendI32(count);
  let d = 1;
  while (d * 2 <= count) d *= 2;
  for (; d >= 1; d >>= 1) if (d !== count) out.appendI32(d);
  return out.len >> 2;
}
