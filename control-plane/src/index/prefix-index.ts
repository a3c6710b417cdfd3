// The control plane's model of every slot's KV cache: KV events in (it is the events
// subscriber's sink), bucket images out. Slots are registered by discovery with a stable
// numeric id (the bit in every bucket bitmap) and the canonical model that seeds their hashes.

import { core } from "../core/core-wasm.ts";
import type { TokenBytesTable } from "../tokens/token-bytes-table.ts";
import type {
  BatchMeta,
  EventSink,
  KvEvent,
  RankResetReason,
  ScannedBatch,
} from "../vocabulary/kv-events.ts";
import { scanBatchPayload } from "./batch-fast-path.ts";
import { slotWordsFor } from "./bucket-image.ts";
import { ChunkIndex } from "./chunk-index.ts";
import { bucketKey, type FullKeep, PublishedBuckets } from "./published-buckets.ts";
import { type ChunkHasher, type Detokenize, SlotBlocks } from "./slot-blocks.ts";

export interface PrefixIndexOptions {
  buckets: number;
  ways: number;
  /** Rows a full bucket shows (published-buckets.ts; default `ways` when it keeps its newest, else 8). */
  fullWays?: number;
  /** What a full bucket keeps: its newest rows (default) or its shallowest (published-buckets.ts). */
  fullKeep?: FullKeep;
  /** Size of the slot table: fixes the bitmap width of every bucket image. */
  maxSlots: number;
  /** Blocks each slot indexes at most (slot-blocks.ts; default DEFAULT_MAX_BLOCKS_PER_SLOT). */
  maxBlocksPerSlot?: number;
  now?: () => number;
  /** Read whole batch payloads in the core when it can (batch-fast-path.ts; default true). False: always decode in JavaScript. */
  batchFastPath?: boolean;
  /** Bytes of the published buckets' patch journal (published-buckets.ts; default: the images' size, ≤ 32 MiB). */
  journalBytes?: number;
}

export interface SlotRegistration {
  slotKey: string;
  slotId: number;
  model: string;
  hasher: ChunkHasher;
  detokenize: Detokenize;
  /** The token-bytes table `detokenize` reads, if it is one: the core then detokenizes whole events (the fast path). */
  tokenTable?: TokenBytesTable | null;
}

export class PrefixIndex implements EventSink {
  readonly chunks: ChunkIndex;
  readonly #slots = new Map<string, SlotBlocks>();
  readonly #now: () => number;
  readonly slotWords: number;
  /** The slot whose batch the core scanned last and has not applied (scanBatch → applyScanned). */
  #scannedFor: string | null = null;
  #published: PublishedBuckets | undefined;
  resets = 0;
  unknownSlotEvents = 0;

  constructor(private readonly opts: PrefixIndexOptions) {
    this.chunks = new ChunkIndex(opts.buckets);
    this.slotWords = slotWordsFor(opts.maxSlots);
    this.#now = opts.now ?? Date.now;
  }

  addSlot(reg: SlotRegistration): void {
    if (reg.slotId >= this.opts.maxSlots)
      throw new Error(`slot id ${reg.slotId} exceeds the slot table size ${this.opts.maxSlots}`);
    if (this.#slots.has(reg.slotKey)) return;
    this.#slots.set(
      reg.slotKey,
      new SlotBlocks(reg.slotId, reg.model, this.chunks, reg.hasher, reg.detokenize, {
        maxBlocks: this.opts.maxBlocksPerSlot,
        tokenTable: reg.tokenTable,
      }),
    );
  }

  /** A slot that left (scaled down, removed from discovery): its chunks leave the index. */
  removeSlot(slotKey: string): void {
    const slot = this.#slots.get(slotKey);
    slot?.clear();
    slot?.dispose();
    this.#slots.delete(slotKey);
  }

  /** Gives the core memory of every table back now (tests, benches); the index is unusable after. */
  dispose(): void {
    for (const slot of this.#slots.values()) slot.dispose();
    this.#slots.clear();
    this.#published?.dispose();
    this.chunks.dispose();
  }

  slot(slotKey: string): SlotBlocks | undefined {
    return this.#slots.get(slotKey);
  }

  event(slotKey: string, event: KvEvent, _meta: BatchMeta): void {
    const slot = this.#slots.get(slotKey);
    if (slot === undefined) {
      this.unknownSlotEvents++;
      return;
    }
    switch (event.type) {
      case "BlockStored":
        slot.stored(event, this.#now());
        break;
      case "BlockRemoved":
        slot.removed(event);
        break;
      case "AllBlocksCleared":
        slot.clear();
        break;
    }
  }

  scanBatch(slotKey: string, payload: Uint8Array): ScannedBatch | null {
    if (this.opts.batchFastPath === false) return null;
    const slot = this.#slots.get(slotKey);
    if (slot === undefined || !slot.takesBatches) return null;
    slot.prepareBatch();
    const scanned = scanBatchPayload(payload);
    this.#scannedFor = scanned === null ? null : slotKey;
    return scanned;
  }

  applyScanned(slotKey: string): void {
    const slot = this.#slots.get(slotKey);
    if (slot === undefined || this.#scannedFor !== slotKey)
      throw new Error(`no batch scanned for ${slotKey}`);
    this.#scannedFor = null;
    slot.applyScannedBatch(this.#now());
  }

  rankReset(slotKey: string, _reason: RankResetReason): void {
    this.resets++;
    this.#slots.get(slotKey)?.clear();
  }

  /** Images of the buckets changed since the last call, as shared-data key/value pairs. */
  takeDirtyImages(): Array<[string, Uint8Array]> {
    return this.chunks.takeDirty().map((b) => [bucketKey(b), this.bucketImage(b)]);
  }

  /**
   * The buckets as gateways hold them, which publishDirty() keeps up to date (made on first use:
   * an index that is never published holds no images).
   */
  get published(): PublishedBuckets {
    this.#published ??= new PublishedBuckets(core(), this.chunks, {
      buckets: this.opts.buckets,
      ways: this.opts.ways,
      slotWords: this.slotWords,
      journalBytes: this.opts.journalBytes,
      fullWays: this.opts.fullWays,
      fullKeep: this.opts.fullKeep,
    });
    return this.#published;
  }

  /** Marks every bucket dirty: the next publication encodes the whole key space (an epoch's start). */
  markAllDirty(): void {
    for (let b = 0; b < this.opts.buckets; b++) this.chunks.markDirty(b);
  }

  /** Every bucket's image: the full key space, published once per epoch. */
  *allImages(): Generator<[string, Uint8Array]> {
    this.chunks.takeDirty();
    for (let b = 0; b < this.opts.buckets; b++) yield [bucketKey(b), this.bucketImage(b)];
  }

  bucketImage(bucket: number): Uint8Array {
    return this.chunks.encodeBucket(bucket, this.opts.ways, this.slotWords);
  }
}

export { bucketKey };
