// The shared-data key of prefix-index bucket i, `kvr.b.<i>` in decimal (docs/wire-format.md §4.4),
// written as bytes: the filter reads buckets by it on the request path, and the control plane's
// core writes it into every sync page entry, neither making a string.

/** Bytes a bucket key takes at most: "kvr.b." and the ten digits of a u32. */
export const BUCKET_KEY_MAX: i32 = 16;

/** Writes bucket i's key at p (BUCKET_KEY_MAX bytes of room); its length. */
export function writeBucketKey(p: usize, i: u32): i32 {
  store<u32>(p, 0x2e72766b); // "kvr."
  store<u16>(p, 0x2e62, 4); // "b."
  let digits: usize = 1;
  for (let rest = i / 10; rest > 0; rest /= 10) digits++;
  let v = i;
  for (let d = digits; d > 0; d--) {
    store<u8>(p + 5 + d, <u8>(0x30 + (v % 10)));
    v /= 10;
  }
  return 6 + <i32>digits;
}
