// XXH64 fed piecewise (xxh64.ts hashes a whole input at once): the four accumulators of an input
// whose 32-byte stripes came so far, kept at `state` (4 × u64), so the rest can come later. The
// block table keeps this state for a chunk in progress instead of the chunk's bytes (a stripe
// costs 32 bytes of bytes and none of state), and finishes the chunk when a child block brings
// its end: the result equals xxh64 over the whole chunk.
import { mergeRound, P1, P2, P3, P4, P5, round } from "./xxh64";

/** The state of an input with nothing hashed yet. */
export function xxhStart(state: usize, seed: u64): void {
  store<u64>(state, seed + P1 + P2);
  store<u64>(state, seed + P2, 8);
  store<u64>(state, seed, 16);
  store<u64>(state, seed - P1, 24);
}

/** Hashes the n / 32 whole stripes at p into the state (n a multiple of 32). */
export function xxhStripes(state: usize, p: usize, n: usize): void {
  if (n === 0) return;
  let v1 = load<u64>(state);
  let v2 = load<u64>(state, 8);
  let v3 = load<u64>(state, 16);
  let v4 = load<u64>(state, 24);
  const end = p + n;
  while (p < end) {
    v1 = round(v1, load<u64>(p));
    v2 = round(v2, load<u64>(p, 8));
    v3 = round(v3, load<u64>(p, 16));
    v4 = round(v4, load<u64>(p, 24));
    p += 32;
  }
  store<u64>(state, v1);
  store<u64>(state, v2, 8);
  store<u64>(state, v3, 16);
  store<u64>(state, v4, 24);
}

/**
 * XXH64 of an input of `total` bytes whose whole stripes are in the state and whose last
 * total % 32 bytes lie at [p, p + total % 32). An input under 32 bytes has no stripes: its seed
 * is still the state's third accumulator, as xxhStart left it.
 */
export function xxhFinish(state: usize, p: usize, total: usize): u64 {
  let h: u64;
  if (total >= 32) {
    const v1 = load<u64>(state);
    const v2 = load<u64>(state, 8);
    const v3 = load<u64>(state, 16);
    const v4 = load<u64>(state, 24);
    h = rotl<u64>(v1, 1) + rotl<u64>(v2, 7) + rotl<u64>(v3, 12) + rotl<u64>(v4, 18);
    h = mergeRound(h, v1);
    h = mergeRound(h, v2);
    h = mergeRound(h, v3);
    h = mergeRound(h, v4);
  } else {
    h = load<u64>(state, 16) + P5;
  }
  h += <u64>total;
  const end = p + (total & 31);
  while (p + 8 <= end) {
    h ^= round(0, load<u64>(p));
    h = rotl<u64>(h, 27) * P1 + P4;
    p += 8;
  }
  if (p + 4 <= end) {
    h ^= <u64>load<u32>(p) * P1;
    h = rotl<u64>(h, 23) * P2 + P3;
    p += 4;
  }
  while (p < end) {
    h ^= <u64>load<u8>(p) * P5;
    h = rotl<u64>(h, 11) * P1;
    p++;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}
