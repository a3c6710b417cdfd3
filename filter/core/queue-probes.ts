// Probes into the queued term of the cost model (queued-work.ts) for Node tests: the pure
// functions as they are, and one LocalQueue driven step by step. Numbers in, numbers out.
import { LocalQueue, queuedRequests, queuedTokens } from "./queued-work";

let queue = new LocalQueue();

export function queuedRequestsOf(
  waiting: f64,
  fleet: f64,
  ownReported: f64,
  ownSeen: f64,
  ownCount: f64,
): f64 {
  return queuedRequests(waiting, fleet, ownReported, ownSeen, ownCount);
}

export function queuedTokensOf(
  waiting: f64,
  fleet: f64,
  ownReported: f64,
  ownSeen: f64,
  ownTokens: f64,
): f64 {
  return queuedTokens(waiting, fleet, ownReported, ownSeen, ownTokens);
}

export function localQueueReset(): void {
  queue = new LocalQueue();
}

export function localQueueAdd(slot: i32, sig: u64, tokens: f64): u32 {
  return queue.add(slot, sig, tokens);
}

export function localQueueObserve(slot: i32, sig: u64): void {
  queue.observe(slot, sig);
}

export function localQueueRemove(slot: i32, window: u32, tokens: f64): void {
  queue.remove(slot, window, tokens);
}

export function localQueueCount(slot: i32): f64 {
  return queue.countAt(slot);
}

export function localQueueSeen(slot: i32): f64 {
  return queue.seenAt(slot);
}

export function localQueueUnseen(slot: i32): f64 {
  return slot >= 0 && slot < queue.slots ? <f64>queue.unseen[slot] : 0;
}

export function localQueueTokens(slot: i32): f64 {
  return queue.tokensAt(slot);
}

export function localQueuePublished(nowMs: u64, horizonMs: u64): void {
  queue.published(nowMs, horizonMs);
}

export function localQueueReported(slot: i32): f64 {
  return queue.reportedAt(slot);
}
