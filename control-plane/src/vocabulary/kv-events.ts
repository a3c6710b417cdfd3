// Normalised KV-cache events, as the rest of the control plane sees them, whatever engine,
// version or msgpack encoding produced them. The events layer (events/) produces them and the
// index (index/) consumes them; this vocabulary is neutral so neither knows the other. Wire
// details live in docs/kv-events.md.

/** Where a block lives. null/"" on the wire means the GPU; other media keep the engine's name
 * (vLLM: "CPU", "STORAGE"; SGLang: "CPU_PINNED", "DISK", "EXTERNAL", "CPU_TIER1", "CPU_TIER2");
 * the index maps them to its tiers (index/tier.ts), this layer does not decide. */
export type Medium = string;
export const MEDIUM_GPU: Medium = "GPU";

export interface BlockStored {
  type: "BlockStored";
  /** One unsigned 64-bit key per stored block (see events/hash.ts for the normalisation). */
  hashes: bigint[];
  /** Key of the block before the first stored one; null at the start of a sequence. */
  parent: bigint | null;
  /**
   * Tokens of the stored blocks, `hashes.length * blockSize` of them (checked) — or none at all:
   * a placeholder store naming blocks by hash only (an offloading connector's copy to another
   * medium), which the index resolves against the blocks it holds. blockSize may then be 0.
   */
  tokenIds: number[];
  blockSize: number;
  loraName: string | null;
  /** Deprecated in vLLM in favour of loraName; kept because older engines only send this. */
  loraId: number | null;
  medium: Medium;
  /** vLLM's per-block extra hash keys (multimodal ids, LoRA, cache_salt), passed through raw. */
  extraKeys: unknown[] | null;
  /** The salt of the request that stored a sequence's first block: SGLang's `cache_salt` field
   * (top level or its positional metadata map), else vLLM's, read from the first block's extra
   * keys (events/extra-keys.ts), which it sends with a sequence's first block only. The index reads it
   * where `parent` is null; later blocks inherit it through the chain. */
  cacheSalt: string | null;
  /** SGLang's `session_id` of the request that stored the blocks (passed through, not indexed). */
  sessionId: string | null;
  groupIdx: number | null;
  kvCacheSpecKind: string | null;
  slidingWindow: number | null;
  eventVersion: number | null;
  locality: string | null;
  ownership: string | null;
}

export interface BlockRemoved {
  type: "BlockRemoved";
  hashes: bigint[];
  medium: Medium;
  groupIdx: number | null;
  locality: string | null;
  ownership: string | null;
}

export interface AllBlocksCleared {
  type: "AllBlocksCleared";
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;
export type KvEventType = KvEvent["type"];

/** Context of the batch an event came in. */
export interface BatchMeta {
  seq: number;
  /** Engine wall-clock seconds when the batch was published. */
  ts: number;
  /** Local epoch milliseconds when the frames were read (or replayed). */
  receivedAt: number;
  replayed: boolean;
}

/** Why a rank's whole index must be dropped. */
export type RankResetReason = "gap" | "restart";

/** A batch payload a sink's fast path has read whole and will apply itself: what the events
 * layer needs of it for sequencing and stats (index/batch-fast-path.ts). */
export interface ScannedBatch {
  ts: number;
  rank: number | null;
  events: Record<KvEventType, number>;
  storedBlocks: number;
  removedBlocks: number;
  /** Stored blocks per medium, media with none left out. */
  storedByMedium: Record<string, number>;
}

/** Where normalised events go (the index, in production). Calls are synchronous and in
 * sequence order per slot; a sink that throws has the error counted, never the process. */
export interface EventSink {
  event(slotKey: string, event: KvEvent, meta: BatchMeta): void;
  /** Everything known about this slot's cache is stale: clear it before further events. */
  rankReset(slotKey: string, reason: RankResetReason): void;
  /**
   * Optional fast path: reads a whole batch payload without decoding it into events, or
   * returns null (the payload is then decoded and delivered event by event, as without it).
   * Reading changes nothing; applyScanned(slotKey) applies the batch read last, and must come
   * before the next scanBatch. The result must be what delivering the decoded events would give;
   * it may be the same object every call, rewritten by the next scanBatch (read it before then).
   */
  scanBatch?(slotKey: string, payload: Uint8Array): ScannedBatch | null;
  applyScanned?(slotKey: string): void;
}
