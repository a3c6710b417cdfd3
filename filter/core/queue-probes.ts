// Probes into the queued term of the cost model (queued-work.ts) for Node tests: the pure
// functions as they are, and one LocalQueue driven step by step. Numbers in, numbers out.
import { decodedLoad } from "./image-probes";
import { elsewhereOf, LocalQueue, queuedRequests, queuedTokens, ReportedMax } from "./queued-work";

let queue = new LocalQueue();
let reported = new ReportedMax();

export function queuedRequestsOf(waiting: f64, elsewhere: f64, seen: f64, count: f64): f64 {
  return queuedRequests(waiting, elsewhere, seen, count);
}

export function queuedTokensOf(waiting: f64, elsewhere: f64, seen: f64, tokens: f64): f64 {
  return queuedTokens(waiting, elsewhere, seen, tokens);
}

export function elsewhereOfIo(fleet: f64, gatewayReported: f64): f64 {
  return elsewhereOf(fleet, gatewayReported);
}

export function localQueueReset(): void {
  queue = new LocalQueue();
}

/** Another VM published (pending, tokens, unseen, decoding) at `slot`; the leader reported `reported` there. */
export function localQueueGatewayView(
  slot: i32,
  pending: u32,
  tokens: f64,
  unseen: u32,
  decoding: u32,
  reported: u32,
): void {
  queue.clearGatewayView();
  queue.addSiblings(slot, pending, tokens, unseen, decoding);
  queue.setGatewayReported(slot, reported);
}

/** Another VM published (pending, tokens) at `slot`, its queue there started at `since` (ms). */
export function localQueueSiblingSince(slot: i32, pending: u32, tokens: f64, since: f64): void {
  queue.clearGatewayView();
  queue.addSiblings(slot, pending, tokens, 0, 0, since);
}

/** The queue's clock (ms): what the aged token counts are read at. */
export function localQueueClock(nowMs: f64): void {
  queue.nowMs = nowMs;
}

export function localQueueAddAt(slot: i32, tokens: f64, nowMs: f64, aheadTokens: f64): u32 {
  return queue.add(slot, 0, tokens, nowMs, aheadTokens);
}

export function localQueueAnswerAt(slot: i32, window: u32, tokens: f64, nowMs: f64): void {
  queue.answer(slot, window, tokens, true, nowMs);
}

export function localQueuePrefillRate(): f64 {
  return queue.prefillRate;
}

export function localQueuePromptTokens(slot: i32): f64 {
  return queue.gatewayPromptTokensAt(slot);
}

export function localQueueGatewayCount(slot: i32): f64 {
  return queue.gatewayCountAt(slot);
}

export function localQueueGatewayTokens(slot: i32): f64 {
  return queue.gatewayTokensAt(slot);
}

export function localQueueGatewaySeen(slot: i32): f64 {
  return queue.gatewaySeenAt(slot);
}

export function localQueueUnseenRunning(slot: i32): f64 {
  return queue.unseenRunningAt(slot);
}

export function localQueueGatewayReported(slot: i32): f64 {
  return queue.gatewayReportedAt(slot);
}

export function localQueueAdd(slot: i32, sig: u64, tokens: f64): u32 {
  return queue.add(slot, sig, tokens);
}

export function localQueueObserve(slot: i32, sig: u64): void {
  queue.observe(slot, sig);
}

export function localQueueAnswer(slot: i32, window: u32, tokens: f64, decodes: bool): void {
  queue.answer(slot, window, tokens, decodes);
}

export function localQueueEnd(slot: i32, window: u32, tokens: f64, answered: bool): void {
  queue.end(slot, window, tokens, answered);
}

export function localQueueDecoding(slot: i32): f64 {
  return <f64>queue.unseenDecodingAt(slot);
}

export function localQueueCount(slot: i32): f64 {
  return queue.countAt(slot);
}

export function localQueueSeen(slot: i32): f64 {
  return queue.seenAt(slot);
}

export function localQueueUnseen(slot: i32): f64 {
  return <f64>queue.unseenPendingAt(slot);
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

/** The queue reads the last decoded load image's running and waiting counts (observeAdmission). */
export function localQueueObserveAdmission(): void {
  const l = decodedLoad();
  if (l !== null) queue.observeAdmission(l);
}

export function localQueueAdmissionBlocked(slot: i32): bool {
  return queue.admissionBlockedAt(slot);
}
