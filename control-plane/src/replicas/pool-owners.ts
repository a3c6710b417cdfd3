// Which replica owns which pool, decided by each replica alone from the set of replicas it hears
// on NATS: rendezvous (highest-random-weight) hashing, pool × replica id → a 64-bit weight, the
// highest weight owns. No election and no coordination: replicas that hear the same set compute
// the same owners, and a replica that leaves or joins moves only the pools it wins or held
// (about 1/n of them), never reshuffles the rest. Pure: the liveness that feeds it is
// peer-slots.ts's silence timeout, and pool-shards.ts acts on the changes.
import { createHash } from "node:crypto";

/** The weight of `replica` for `pool`: SHA-256's first 8 bytes (stable across processes and versions). */
export function ownerWeight(pool: string, replica: string): bigint {
  const h = createHash("sha256").update(pool).update("\0").update(replica).digest();
  return h.readBigUInt64BE(0);
}

/** The owner of `pool` among `replicas` (null when there are none); ties go to the smaller id. */
export function poolOwner(pool: string, replicas: readonly string[]): string | null {
  let best: string | null = null;
  let bestWeight = -1n;
  for (const r of replicas) {
    const w = ownerWeight(pool, r);
    if (w > bestWeight || (w === bestWeight && best !== null && r < best)) {
      best = r;
      bestWeight = w;
    }
  }
  return best;
}

/** Every pool's owner among `replicas`. */
export function poolOwners(
  pools: readonly string[],
  replicas: readonly string[],
): Map<string, string | null> {
  return new Map(pools.map((p) => [p, poolOwner(p, replicas)]));
}
