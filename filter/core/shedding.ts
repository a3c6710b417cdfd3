// Overload shedding (docs/configuration.md "Overload shedding"): a slot is saturated for a request
// of some priority when the requests queued there, or its KV-cache usage, are over that priority's
// thresholds. The filter leaves saturated slots out of a standard or sheddable request's candidates;
// when that leaves none, the request is shed (429) instead of piling onto full queues. Critical
// requests are never shed and see every candidate.
//
// Queued requests are what the least-load policy counts (queued-work.ts): the engine's `waiting`
// at its last scrape, other gateways' requests its metrics do not show yet, and this gateway's
// unanswered requests there. KV usage is the load image's per mille. Pure: bitmaps in, bitmaps out.
import { LoadImage, PoolImage } from "./cache-images";
import { PRIORITY_CRITICAL, PRIORITY_SHEDDABLE } from "./priority";
import { LocalQueue, queuedAt } from "./queued-work";

/** Is slot s over the thresholds of `priority` in `pool`? Never for critical requests. */
export function saturated(
  pool: PoolImage,
  loads: LoadImage,
  s: i32,
  local: LocalQueue | null,
  priority: i32,
): bool {
  if (priority === PRIORITY_CRITICAL) return false;
  const sheddable = priority === PRIORITY_SHEDDABLE;
  const maxQueued = sheddable ? pool.sheddableMaxQueued : pool.standardMaxQueued;
  const maxKv = sheddable ? pool.sheddableMaxKvPermille : pool.standardMaxKvPermille;
  return loads.kvPermille(s) > maxKv || queuedAt(loads, s, local) > <f64>maxQueued;
}

/**
 * Clears the saturated slots of the candidate bitmap (words × u64) when the pool sheds and the
 * request may be shed. Returns how many candidates were in the bitmap and how many are left,
 * packed as (before << 32) | after, so the caller tells "no candidate at all" (the fail mode's to
 * answer) from "all saturated" (shed).
 */
export function dropSaturated(
  pool: PoolImage,
  loads: LoadImage,
  bitmap: usize,
  words: i32,
  local: LocalQueue | null,
  priority: i32,
): u64 {
  let before: u64 = 0;
  let after: u64 = 0;
  const active = pool.shedding && priority !== PRIORITY_CRITICAL;
  for (let w = 0; w < words; w++) {
    const at = bitmap + ((<usize>w) << 3);
    let bits = load<u64>(at);
    let kept = bits;
    while (bits !== 0) {
      const bit = bits & (~bits + 1);
      const s = w * 64 + <i32>ctz(bits);
      bits ^= bit;
      before++;
      if (active && saturated(pool, loads, s, local, priority)) kept ^= bit;
      else after++;
    }
    store<u64>(at, kept);
  }
  return (before << 32) | after;
}

/** The lowest slot of a candidate bitmap, or -1 (the slot a shed request's report names). */
export function firstSlot(bitmap: usize, words: i32): i32 {
  for (let w = 0; w < words; w++) {
    const bits = load<u64>(bitmap + ((<usize>w) << 3));
    if (bits !== 0) return w * 64 + <i32>ctz(bits);
  }
  return -1;
}
