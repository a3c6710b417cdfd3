// Which batch timestamps an engine can send. vLLM and SGLang stamp every batch with
// `time.time()` (seconds since the epoch, a float64) when they publish it; RankIngest compares
// consecutive stamps to notice another process speaking (a stamp going backwards). A stamp no
// running engine can produce must never become that comparison's reference: one batch stamped
// 1e300 would make every honest batch after it look like a clock stepped back and send the
// rank through a replay round per batch. Such a batch is rejected whole (`dropped.batch_ts`),
// like any other batch whose envelope is wrong; its sequence number still counts as read.

/**
 * How far ahead of the control plane's clock a stamp may be: one day. Engines and the control
 * plane run on NTP-synced hosts, where clocks agree within seconds (a leap-second smear or a
 * slow NTP step is well under a minute); a day covers any honest skew with a wide margin — the
 * two clocks would have to be set to different dates. Beyond that the stamp is broken or
 * forged, and a stamp ahead is exactly the one that poisons the step-back check.
 *
 * Stamps in the past get no such bound, only > 0: a stamp behind the last one is what the
 * step-back check looks for (one verification against the engine's replay buffer, and the next
 * honest batch is newer again), so it cannot poison anything; and recorded traces and test
 * fixtures legitimately replay old stamps.
 */
export const MAX_BATCH_TS_AHEAD_MS = 24 * 60 * 60 * 1000;

/** True when an engine could have stamped a batch `ts` (seconds) while our clock reads `nowMs`. */
export function plausibleBatchTs(ts: number, nowMs: number): boolean {
  return Number.isFinite(ts) && ts > 0 && ts * 1000 <= nowMs + MAX_BATCH_TS_AHEAD_MS;
}
