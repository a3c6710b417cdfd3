// Keys for full blocks of token ids, chained (a key stands for the whole prefix up to its
// block), for the routers that see tokens: the Dynamo oracle's active-block accounting and the
// ideal bound's global cache. 52-bit values so they stay plain numbers.
export function tokenBlockKeys(ids: readonly number[], blockSize: number): number[] {
  const out: number[] = [];
  let hi = 0x811c9dc5;
  let lo = 0x2c1b3c6d;
  for (let at = 0; at + blockSize <= ids.length; at += blockSize) {
    for (let i = at; i < at + blockSize; i++) {
      const t = ids[i] as number;
      hi = Math.imul(hi ^ t, 0x01000193) >>> 0;
      lo = Math.imul(lo ^ t ^ (hi >>> 9), 0x5bd1e995) >>> 0;
    }
    out.push((hi & 0xfffff) * 0x100000000 + lo);
  }
  return out;
}
