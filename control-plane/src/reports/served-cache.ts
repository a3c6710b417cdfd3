// Predicted vs served cache hits, per slot: what the gateway expected cached on the slot it chose
// (the decision's cached chunks × chunk size, in prompt bytes) against what the engine said it
// reused (`usage.prompt_tokens_details.cached_tokens`, read by the filter from the response).
// Bytes become an estimate of tokens the way the filter estimates them for its cost
// (BYTES_PER_TOKEN in filter/core/route-decision.ts). vLLM leaves the details out when it reused
// nothing (and always without --enable-prompt-tokens-details), so an answer with usage but no
// details counts as 0 served on a slot whose engine has shown details before, unknown otherwise.
import { type FinishedRequest, SERVED_CUT, SERVED_UNREAD, SERVED_USAGE } from "./report-codec.ts";

/** The filter's bytes-per-token estimate (filter/core/route-decision.ts BYTES_PER_TOKEN). */
export const PREDICTED_BYTES_PER_TOKEN = 4;

export interface ServedCache {
  /** Requests whose engine said how many prompt tokens it served from its cache. */
  known: number;
  /** Requests it did not (no usage in the answer, a stream without include_usage, a cut scan). */
  unknown: number;
  /** Requests whose answer the gateway did not read (streams outside usageScanStreamSample). */
  unread: number;
  /** Estimated predicted cached tokens of the known requests: compare with servedTokens. */
  predictedKnownTokens: number;
  /** Estimated predicted cached tokens of the unknown requests. */
  predictedUnknownTokens: number;
  /** Estimated predicted cached tokens of the unread requests. */
  predictedUnreadTokens: number;
  /** Prompt tokens the engine served from its cache (known requests). */
  servedTokens: number;
  /** This slot's engine has reported cached_tokens: it runs with prompt-token details. */
  detailsSeen: boolean;
}

export function emptyServedCache(): ServedCache {
  return {
    known: 0,
    unknown: 0,
    unread: 0,
    predictedKnownTokens: 0,
    predictedUnknownTokens: 0,
    predictedUnreadTokens: 0,
    servedTokens: 0,
    detailsSeen: false,
  };
}

/** The estimated tokens of a predicted cached prefix of `bytes` prompt bytes. */
export function predictedTokens(bytes: number): number {
  return bytes / PREDICTED_BYTES_PER_TOKEN;
}

/** Served cached tokens of one finished request, or null when the engine did not say. */
export function servedTokens(f: FinishedRequest, detailsSeen: boolean): number | null {
  if (f.servedCachedTokens !== undefined) return f.servedCachedTokens;
  const flags = f.servedFlags ?? 0;
  if (detailsSeen && (flags & SERVED_USAGE) !== 0 && (flags & SERVED_CUT) === 0) return 0;
  return null;
}

/** Counts one finished request that was routed to the slot. */
export function observeServed(c: ServedCache, f: FinishedRequest): void {
  const predicted = predictedTokens(f.cachedBytes);
  if (f.servedCachedTokens !== undefined) c.detailsSeen = true;
  else if (((f.servedFlags ?? 0) & SERVED_UNREAD) !== 0) {
    // A sample of the streams is read; the known requests' predicted and served stay paired.
    c.unread++;
    c.predictedUnreadTokens += predicted;
    return;
  }
  const served = servedTokens(f, c.detailsSeen);
  if (served === null) {
    c.unknown++;
    c.predictedUnknownTokens += predicted;
    return;
  }
  c.known++;
  c.predictedKnownTokens += predicted;
  c.servedTokens += served;
}
