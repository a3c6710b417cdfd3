// KV-cache event ingest: public surface of control-plane/src/events (docs/kv-events.md).

export * from "../vocabulary/kv-events.ts";
export { type BatchResult, type DecodedBatch, decodeBatch } from "./batch-decoder.ts";
export { BindPool, type BindPoolOptions, TopicConflictError } from "./bind-pool.ts";
export {
  type EngineKvEventsConfig,
  hostOf,
  offsetEndpoint,
  publisherBinds,
  replayEndpoint,
  type SubscriberMode,
  subscriberEndpoint,
  subscriptionFor,
} from "./endpoints.ts";
export { decodeEvent, type EventResult } from "./event-decoder.ts";
export { encodeSeq, parseLiveMessage, parseReplayFrames } from "./frames.ts";
export { normaliseHash } from "./hash.ts";
export { RankIngest, type RankIngestOptions } from "./rank-ingest.ts";
export { RankSubscriber, type RankSubscriberOptions } from "./rank-subscriber.ts";
export { type ReplayFn, type ReplayResult, requestReplay } from "./replay-client.ts";
export { SequenceTracker } from "./sequence.ts";
export { type DropReason, newRankStats, type RankStats, ThrottledLog } from "./stats.ts";
export { EventsSupervisor, type SubscriptionSpec, type SupervisorOptions } from "./supervisor.ts";
