// XXH64 (Yann Collet's xxHash, 64-bit variant) over raw memory, written from the published
// algorithm description (xxh64-stream.ts feeds the same rounds piecewise). Little-endian loads straight from memory keep the hot loop free of
// bounds checks; callers pass ranges they own.

// Written as two halves: the literals exceed what the TypeScript-side linter can represent.
export const P1: u64 = ((<u64>0x9e3779b1) << 32) | 0x85ebca87;
export const P2: u64 = ((<u64>0xc2b2ae3d) << 32) | 0x27d4eb4f;
export const P3: u64 = ((<u64>0x165667b1) << 32) | 0x9e3779f9;
export const P4: u64 = ((<u64>0x85ebca77) << 32) | 0xc2b2ae63;
export const P5: u64 = ((<u64>0x27d4eb2f) << 32) | 0x165667c5;

export function round(acc: u64, input: u64): u64 {
  return rotl<u64>(acc + input * P2, 31) * P1;
}

export function mergeRound(acc: u64, val: u64): u64 {
  return (acc ^ round(0, val)) * P1 + P4;
}

export function xxh64(p: usize, len: usize, seed: u64): u64 {
  const end = p + len;
  let h: u64;
  if (len >= 32) {
    let v1 = seed + P1 + P2;
    let v2 = seed + P2;
    let v3 = seed;
    let v4 = seed - P1;
    const limit = end - 32;
    do {
      v1 = round(v1, load<u64>(p));
      v2 = round(v2, load<u64>(p, 8));
      v3 = round(v3, load<u64>(p, 16));
      v4 = round(v4, load<u64>(p, 24));
      p += 32;
    } while (p <= limit);
    h = rotl<u64>(v1, 1) + rotl<u64>(v2, 7) + rotl<u64>(v3, 12) + rotl<u64>(v4, 18);
    h = mergeRound(h, v1);
    h = mergeRound(h, v2);
    h = mergeRound(h, v3);
    h = mergeRound(h, v4);
  } else {
    h = seed + P5;
  }
  h += <u64>len;
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
