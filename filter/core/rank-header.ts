// Strict parser for a DP-rank header value (x-data-parallel-rank, x-dynamo-dp-rank, …). vLLM's
// int() accepts " 3 ", "+3", "1_0" and "-1"; kvroute must not (REFERENCE §1.1), so only the
// canonical decimal form of one u32 passes. Whether a header is absent is the caller's to know.

export const RANK_INVALID: i64 = -1;

/** The rank in [0, 2^32-1], or RANK_INVALID. */
export function parseRank(p: usize, len: i32): i64 {
  if (len < 1 || len > 10) return RANK_INVALID;
  const first = <u32>load<u8>(p);
  if (first === 0x30 && len > 1) return RANK_INVALID; // leading zero
  let v: u64 = 0;
  for (let i = 0; i < len; i++) {
    const d = <u32>load<u8>(p + <usize>i) - 0x30;
    if (d > 9) return RANK_INVALID;
    v = v * 10 + <u64>d;
  }
  if (v > 0xffffffff) return RANK_INVALID;
  return <i64>v;
}
