// Probes into the queued term of the cost model (queued-work.ts) for Node tests: the pure
// functions as they are, and one LocalQueue driven step by step. Numbers in, numbers out.
import { LocalQueue, queuedRequests, queuedTokens, ReportedMax } from "./queued-work";

let queue = new LocalQueue();
let reported = new ReportedMax();

export function queuedRequestsOf(
  waiting: f64,
  fleet: f64,
  gatewayReported: f64,
  siblings: f64,
  ownSeen: f64,
  ownCount: f64,
): f64 {
  return queuedRequests(waiting, fleet, gatewayReported, siblings, ownSeen, ownCount);
}

export function queuedTokensOf(
  waiting: f64,
  fleet: f64,
  gatewayReported: f64,
  siblings: f64,
  ownSeen: f64,
  ownTokens: f64,
): f64 {
  return queuedTokens(waiting, fleet, gatewayReported, siblings, ownSeen, ownTokens);
}

export function localQueueReset(): void {
  queue = new LocalQueue();
}

export function localQueueGatewayView(
  siblingSlot: i32,
  siblings: u32,
  reportedSlot: i32,
  reportedCount: u32,
): void {
  queue.clearGatewayView();
  queue.addSiblings(siblingSlot, siblings);
  queue.setGatewayReported(reportedSlot, reportedCount);
}

export function localQueueSiblings(slot: i32): f64 {
  return queue.siblingsAt(slot);
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

export function reportedMaxReset(): void {
  reported = new ReportedMax();
}

export function reportedMaxBegin(nowMs: u64, horizonMs: u64): void {
  reported.begin(nowMs, horizonMs);
}

export function reportedMaxRecord(slot: i32, n: u32): void {
  reported.record(slot, n);
}

export function reportedMaxAt(slot: i32): u32 {
  return reported.at(slot);
}
