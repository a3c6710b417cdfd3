// The prefix-index buckets as gateways hold them: the JavaScript face of the core's bucket journal
// (filter/core/bucket-journal.ts), served to gateways by the sync log as its key table. The images
// and the patches that led to them stay in the core's linear memory; a publish interval is one
// core call, and bytes are copied out only when a gateway is answered.
import type { CoreModule } from "../core/core-wasm.ts";
import { BUCKET_HEADER_BYTES, BUCKET_ROW_BYTES } from "./bucket-image.ts";
import type { ChunkIndex } from "./chunk-index.ts";

const KEY_PREFIX = "kvr.b.";

/** What writeEntries wrote: how many entries, their bytes (a view of core memory), whether one is a patch. */
export interface WrittenEntries {
  count: number;
  bytes: Uint8Array;
  patched: boolean;
}
/** Key strings made once: publication names buckets hundreds of thousands of times a second. */
const bucketKeys: string[] = [];

export function bucketKey(bucket: number): string {
  let key = bucketKeys[bucket];
  if (key === undefined) {
    key = `${KEY_PREFIX}${bucket}`;
    bucketKeys[bucket] = key;
  }
  return key;
}

/** The rows a full bucket that keeps its shallowest shows unless configured (cache.fullWays); one that keeps its newest shows `ways`. */
export const DEFAULT_FULL_WAYS = 8;

export interface PublishedBucketsOptions {
  buckets: number;
  ways: number;
  slotWords: number;
  /**
   * Bytes of patch journal. A gateway further behind than the journal reaches gets whole images
   * (more bytes, same result). Default: the images' own size, clamped to 64 KiB..32 MiB — at least
   * what the earlier rule kept (a key's patches while together smaller than its value).
   */
  journalBytes?: number;
  /** Rows a full bucket shows (filter/core/chunk-table.ts setRowLimits; default `ways` when it keeps its newest, else min(8, ways)). */
  fullWays?: number;
  /** What a full bucket keeps: its newest rows (the default) or its shallowest (cache.fullKeep). */
  fullKeep?: FullKeep;
}

/** The keep rule of full buckets (docs/wire-format.md §4.4). */
export type FullKeep = "shallowest" | "newest";

/**
 * Frees a journal whose owner was collected without dispose(): its images and ring (tens of MiB
 * at the default geometry) live in the core's linear memory, which the JavaScript GC does not
 * see, so a process that makes many indexes (benches, tests) would otherwise fill the core's
 * 4 GiB — as a quality-bench process did after ~50 runs.
 */
const journals = new FinalizationRegistry<{ core: CoreModule; id: number }>((j) =>
  j.core.ex.journalFree(j.id),
);

/** The sync log's key table of buckets (sync-log.ts KeyTable, which the index may not import: it only has the shape). */
export class PublishedBuckets {
  readonly count: number;
  readonly #id: number;

  constructor(
    private readonly core: CoreModule,
    private readonly chunks: ChunkIndex,
    opts: PublishedBucketsOptions,
  ) {
    this.count = opts.buckets;
    const imageBytes = opts.buckets * (BUCKET_HEADER_BYTES + opts.ways * BUCKET_ROW_BYTES);
    const ring = opts.journalBytes ?? Math.min(32 << 20, Math.max(64 << 10, imageBytes));
    const newest = opts.fullKeep === "shallowest" ? 0 : 1;
    const fullWays = Math.min(opts.fullWays ?? (newest ? opts.ways : DEFAULT_FULL_WAYS), opts.ways);
    this.#id = core.ex.journalNew(opts.buckets, opts.ways, opts.slotWords, ring, fullWays, newest);
    if (this.#id < 0)
      throw new Error(`cannot publish buckets of ${opts.ways} ways × ${opts.slotWords} slot words`);
    // Before the first publication, so it already shows each bucket's rows in its mode.
    core.ex.chunkSetRowLimits(chunks.tableId, opts.ways, fullWays, newest);
    journals.register(this, { core, id: this.#id }, this);
  }

  /**
   * Publishes the index's dirty buckets whose rows changed, numbering them from `firstVersion`;
   * the changed bucket ids in that order (a view of core memory: read it before the next call).
   */
  publishDirty(firstVersion: number): Uint32Array {
    const n = this.chunks.publishDirty(this.#id, firstVersion);
    const at = this.core.ex.journalChangedPtr(this.#id) >>> 2;
    return this.core.u32view.subarray(at, at + n);
  }

  key(id: number): string {
    return bucketKey(id);
  }

  idOf(key: string): number {
    if (!key.startsWith(KEY_PREFIX)) return -1;
    const text = key.slice(KEY_PREFIX.length);
    const id = Number(text);
    return /^(0|[1-9]\d*)$/.test(text) && id < this.count ? id : -1;
  }

  value(id: number): Uint8Array {
    const len = this.core.ex.journalImageLen(this.#id, id);
    return len < 0 ? new Uint8Array(0) : this.core.bytes(this.core.ex.journalImagePtr(this.#id, id), len);
  }

  /** The length of the bucket's image, without copying it (0: never published). */
  valueLength(id: number): number {
    return Math.max(0, this.core.ex.journalImageLen(this.#id, id));
  }

  patchSince(id: number, since: number): Uint8Array | null {
    const len = this.core.ex.journalServeIo(this.#id, id, since);
    return len < 0 ? null : this.core.bytes(this.core.ex.journalServedPtr(this.#id), len);
  }

  /** Hands `write` what patchSince (when `patches`) or else value would return, as a view of core memory; whether it was a patch. */
  writeValue(
    id: number,
    since: number,
    patches: boolean,
    write: (value: Uint8Array, patch: boolean) => void,
  ): boolean {
    const ex = this.core.ex;
    const patchLen = patches ? ex.journalServeIo(this.#id, id, since) : -1;
    const patch = patchLen >= 0;
    const len = patch ? patchLen : Math.max(0, ex.journalImageLen(this.#id, id));
    const ptr = len === 0 ? 0 : patch ? ex.journalServedPtr(this.#id) : ex.journalImagePtr(this.#id, id);
    write(this.core.u8.subarray(ptr, ptr + len), patch);
    return patch;
  }

  writeEntries(
    ids: Uint32Array,
    n: number,
    since: number,
    patches: boolean,
    budget: number,
    first: boolean,
  ): WrittenEntries {
    const c = this.core;
    const ptr = c.io(4 * n);
    c.u32view.set(ids.subarray(0, n), ptr >>> 2);
    const ex = c.ex;
    const count = ex.journalWriteEntriesIo(this.#id, ptr, n, since, patches ? 1 : 0, budget, first ? 1 : 0);
    const at = ex.journalPagePtr(this.#id);
    return {
      count,
      bytes: c.u8.subarray(at, at + ex.journalPageLen(this.#id)),
      patched: ex.journalPagePatched(this.#id) !== 0,
    };
  }

  /** Linear memory held: images, per-bucket arrays and the journal's ring. */
  get bytes(): number {
    return this.core.ex.journalBytes(this.#id);
  }

  /** Frees the core's journal now rather than when this is collected; unusable after. */
  dispose(): void {
    if (journals.unregister(this)) this.core.ex.journalFree(this.#id);
  }
}
