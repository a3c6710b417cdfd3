// Keys for full blocks of token ids, chained (a key stands for the whole prefix up to its
// block), for the routers that see tokens: Dynamo's and llm-d's indexes (re-derived from the
// token ids of KV events, as both do), active-block accounting, the ideal bound's global cache.
// 52-bit values so they stay plain numbers; a chain can be continued from any key, which is
// what re-deriving keys from a `BlockStored` (parent key + the new blocks' tokens) needs.

/** Key of the (virtual) block before the first one. */
export const ROOT_KEY = 0x5eed_c0ffee;

const TWO32 = 0x100000000;

/** Keys of the full blocks of `ids`, chained from `parent` (ROOT_KEY for a prompt's start). */
export function chainBlockKeys(
  ids: ArrayLike<number>,
  blockSize: number,
  parent: number = ROOT_KEY,
): number[] {
  const out: number[] = [];
  let prev = parent;
  for (let at = 0; at + blockSize <= ids.length; at += blockSize) {
    let hi = (Math.floor(prev / TWO32) ^ 0x811c9dc5) >>> 0;
    let lo = (prev >>> 0) ^ 0x2c1b3c6d;
    for (let i = at; i < at + blockSize; i++) {
      const t = ids[i] as number;
      hi = Math.imul(hi ^ t, 0x01000193) >>> 0;
      lo = Math.imul(lo ^ t ^ (hi >>> 9), 0x5bd1e995) >>> 0;
    }
    hi = Math.imul(hi ^ (lo >>> 13), 0x85ebca6b) >>> 0;
    prev = (hi & 0xfffff) * TWO32 + lo;
    out.push(prev);
  }
  return out;
}
