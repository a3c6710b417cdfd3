// SipHash-c-d with a 128-bit key over bytes, as in the reference implementation
// (github.com/veorq/SipHash). kvroute needs SipHash-1-3 with zero keys because that is Rust's
// `DefaultHasher::new()`, which Dynamo uses for worker instance ids (dynamo-worker-id.ts).
// Written here rather than taken from npm: the maintained npm packages (siphash, siphash24,
// @posthog/siphash) implement only SipHash-2-4. Both round counts are tested against
// published vectors (test/discovery/siphash.test.ts). BigInt is slow but this runs once per
// pod, never per request.

const MASK64 = (1n << 64n) - 1n;

function rotl(x: bigint, b: bigint): bigint {
  return ((x << b) | (x >> (64n - b))) & MASK64;
}

function readLE64(bytes: Uint8Array, at: number, n: number): bigint {
  let v = 0n;
  for (let i = n - 1; i >= 0; i--) v = (v << 8n) | BigInt(bytes[at + i] as number);
  return v;
}

/** SipHash with `cRounds` compression and `dRounds` finalization rounds; returns the u64. */
export function siphash(bytes: Uint8Array, k0 = 0n, k1 = 0n, cRounds = 1, dRounds = 3): bigint {
  let v0 = k0 ^ 0x736f6d6570736575n;
  let v1 = k1 ^ 0x646f72616e646f6dn;
  let v2 = k0 ^ 0x6c7967656e657261n;
  let v3 = k1 ^ 0x7465646279746573n;
  const round = () => {
    v0 = (v0 + v1) & MASK64;
    v1 = rotl(v1, 13n) ^ v0;
    v0 = rotl(v0, 32n);
    v2 = (v2 + v3) & MASK64;
    v3 = rotl(v3, 16n) ^ v2;
    v0 = (v0 + v3) & MASK64;
    v3 = rotl(v3, 21n) ^ v0;
    v2 = (v2 + v1) & MASK64;
    v1 = rotl(v1, 17n) ^ v2;
    v2 = rotl(v2, 32n);
  };
  const compress = (m: bigint) => {
    v3 ^= m;
    for (let i = 0; i < cRounds; i++) round();
    v0 ^= m;
  };
  const whole = bytes.length - (bytes.length % 8);
  for (let at = 0; at < whole; at += 8) compress(readLE64(bytes, at, 8));
  // Last block: the remaining bytes, with the message length (mod 256) in the top byte.
  compress(readLE64(bytes, whole, bytes.length - whole) | (BigInt(bytes.length & 0xff) << 56n));
  v2 ^= 0xffn;
  for (let i = 0; i < dRounds; i++) round();
  return v0 ^ v1 ^ v2 ^ v3;
}
