// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// Node export surface of the control plane's index storage (chunk-table.ts, block-table.ts),
// re-exported by index.ts. Tables are named by small integer ids; inputs lie at a pointer the
// caller wrote (its I/O region), outputs go to one shared buffer (ingestOutPtr) and the counters
// of the last call to ingestStatsPtr. Only the control plane calls these (the filter never
// links this module), and it passes pointers and counts it computed itself.
import { BlockTable, CallStats } from "./block-table";
import { encodeBucketImage, MAX_ROWS } from "./bucket-encode";
import { BucketJournal } from "./bucket-journal";
import { applyBucketPatch, diffBucket } from "./bucket-patch";
import { ByteBuf } from "./byte-buf";
import { ChunkTable } from "./chunk-table";
import { keepHeadroom } from "./heap-headroom";
import { applyBatch, scanBatch } from "./kv-batch";

export { batchResultsPtr } from "./kv-batch";

import { TokenTable } from "./token-table";

const chunkTables: usize[] = [];
const blockTables: usize[] = [];
const tokenTables: usize[] = [];
const out = new ByteBuf(4096);
const scratch = new ByteBuf(1024);
const hashOut = new ByteBuf(64);
const stats = new CallStats();

function freeId(ids: usize[]): i32 {
  for (let i = 0; i < ids.length; i++) if (unchecked(ids[i]) === 0) return i;
  ids.push(0);
  return ids.length - 1;
}

function chunkTable(id: i32): ChunkTable {
  return changetype<ChunkTable>(unchecked(chunkTables[id]));
}

function blockTable(id: i32): BlockTable {
  return changetype<BlockTable>(unchecked(blockTables[id]));
}

function resetStats(): void {
  stats.stored = 0;
  stats.duplicates = 0;
  stats.lowerTier = 0;
  stats.removed = 0;
  stats.unknownRemovals = 0;
  stats.evicted = 0;
}

export function ingestOutPtr(): usize {
  return out.ptr;
}

/**
 * Ends each call that changes table `id`: the chunks its stores completed go to the chunk table
 * (BlockTable.flushChunks: nothing stays pending between calls), and its block count goes into
 * the counters.
 */
function counted<T>(id: i32, result: T): T {
  const table = blockTable(id);
  table.flushChunks();
  stats.blocks = <i32>table.map.size;
  return result;
}

/** Address of the last call's counters: stored, duplicates, lowerTier, removed, unknownRemovals,
 * evicted, then the table's block count after the call (i32 each). */
export function ingestStatsPtr(): usize {
  return changetype<usize>(stats);
}

export function chunkTableNew(buckets: u32): i32 {
  const id = freeId(chunkTables);
  chunkTables[id] = changetype<usize>(new ChunkTable(buckets));
  return id;
}

/** Frees a chunk table (its block tables must be freed without chunks, or already be). */
export function chunkTableFree(id: i32): void {
  chunkTable(id).dispose();
  chunkTables[id] = 0;
}

export function chunkTableSize(id: i32): u32 {
  return chunkTable(id).size;
}

export function chunkTableBytes(id: i32): f64 {
  return <f64>chunkTable(id).bytes;
}

export function chunkAdd(id: i32, hash: u64, depth: u32, slot: u32, tier: u32, nowMs: f64): void {
  chunkTable(id).add(hash, depth, slot, tier, nowMs);
}

export function chunkRemove(id: i32, hash: u64, slot: u32, tier: u32): void {
  chunkTable(id).remove(hash, slot, tier);
}

/** Creates the chunk's record when absent and marks whether speculative routes hold it. */
export function chunkSpeculated(id: i32, hash: u64, depth: u32, nowMs: f64, on: bool): void {
  const t = chunkTable(id);
  t.setSpeculated(t.ensure(hash, depth, nowMs), on);
}

/** Drops the chunk when nothing holds it any more; true when it went. */
export function chunkDropIfEmpty(id: i32, hash: u64): bool {
  const t = chunkTable(id);
  const ref = t.find(hash);
  return ref !== 0 && t.dropIfEmpty(ref);
}

/** How many stored blocks on (slot, tier) produced the chunk (0: none). */
export function chunkHolderCount(id: i32, hash: u64, slot: u32, tier: u32): u32 {
  const t = chunkTable(id);
  const ref = t.find(hash);
  if (ref === 0) return 0;
  const r = t.rec(ref);
  const i = t.holderAt(r, slot, tier);
  return i < 0 ? 0 : <u32>(load<u64>(t.holders(r) + ((<usize>i) << 3)) >> 32);
}

/**
 * The rows the table's buckets may show, in full mode and not, and whether a full one keeps its
 * newest rows (`newest` 1) or its shallowest (ChunkTable.setRowLimits).
 */
export function chunkSetRowLimits(id: i32, ways: i32, fullRows: i32, newest: i32): void {
  chunkTable(id).setRowLimits(ways, fullRows, newest !== 0);
}

export function chunkMarkDirty(id: i32, bucket: u32): void {
  chunkTable(id).markDirty(bucket);
}

/** Writes the chunk's record to the output buffer (ChunkTable.write); 0 when absent. */
export function chunkGetIo(id: i32, hash: u64): i32 {
  const t = chunkTable(id);
  const ref = t.find(hash);
  out.len = 0;
  if (ref === 0) return 0;
  t.write(ref, out);
  return 1;
}

export function chunkBucketIo(id: i32, bucket: u32): i32 {
  return chunkTable(id).writeBucket(bucket, out);
}

/**
 * Writes bucket `bucket`'s shared-data image (docs/wire-format.md §4.4) to the output buffer and
 * returns its length (-1: ways or slotWords out of range). The caller wrote the bucket's
 * speculative routes at specPtr: specCount × {hash u64, slot u32, 0 u32}.
 */
export function chunkEncodeBucketIo(
  id: i32,
  bucket: u32,
  ways: i32,
  slotWords: i32,
  specPtr: usize,
  specCount: i32,
): i32 {
  return encodeBucketImage(chunkTable(id), bucket, ways, slotWords, specPtr, specCount, out);
}

export function chunkTakeDirtyIo(id: i32): i32 {
  return chunkTable(id).takeDirty(out);
}

export function blockTableNew(chunkId: i32, slot: u32, chunkSize: i32, maxBlocks: u32): i32 {
  const id = freeId(blockTables);
  blockTables[id] = changetype<usize>(new BlockTable(chunkTable(chunkId), slot, chunkSize, maxBlocks));
  return id;
}

/** Frees a block table; its chunks leave the chunk table first when withChunks. */
export function blockTableFree(id: i32, withChunks: bool): void {
  blockTable(id).dispose(withChunks);
  blockTables[id] = 0;
}

export function blockCount(id: i32): u32 {
  return blockTable(id).map.size;
}

export function blockTableBytes(id: i32): f64 {
  return <f64>blockTable(id).bytes;
}

/** BlockTable.lookup over n hashes at ptr; the held blocks' last tokens go to the output buffer. */
export function blockLookupIo(id: i32, ptr: usize, n: i32, hasParent: bool, parent: u64): i32 {
  out.len = 0;
  out.reserve((n + 1) << 2);
  return blockTable(id).lookup(ptr, n, hasParent, parent, out.ptr);
}

/** BlockTable.store with the bytes the caller detokenized. */
export function blockStoreIo(
  id: i32,
  ptr: usize,
  n: i32,
  tier: u32,
  hasParent: bool,
  parent: u64,
  root: u64,
  nowMs: f64,
): i32 {
  keepHeadroom();
  resetStats();
  return counted(
    id,
    blockTable(id).store(ptr, n, null, 0, tier, hasParent, parent, root, nowMs, scratch, hashOut, stats),
  );
}

/** BlockTable.store with token ids, detokenized here through token table `tokensId`. */
export function blockStoreTokensIo(
  id: i32,
  tokensId: i32,
  ptr: usize,
  n: i32,
  blockSize: i32,
  tier: u32,
  hasParent: bool,
  parent: u64,
  root: u64,
  nowMs: f64,
): i32 {
  keepHeadroom();
  resetStats();
  const tokens = changetype<TokenTable>(unchecked(tokenTables[tokensId]));
  return counted(
    id,
    blockTable(id).store(
      ptr,
      n,
      tokens,
      blockSize,
      tier,
      hasParent,
      parent,
      root,
      nowMs,
      scratch,
      hashOut,
      stats,
    ),
  );
}

/** A token table of `size` ids and `byteLen` bytes (filled by the caller at tokenTable*Ptr). */
export function tokenTableNew(size: u32, byteLen: u32, dummy: i32): i32 {
  const id = freeId(tokenTables);
  tokenTables[id] = changetype<usize>(new TokenTable(size, byteLen, dummy));
  return id;
}

export function tokenTableBytesPtr(id: i32): usize {
  return changetype<TokenTable>(unchecked(tokenTables[id])).bytes;
}

export function tokenTableOffsetsPtr(id: i32): usize {
  return changetype<TokenTable>(unchecked(tokenTables[id])).offsets;
}

export function tokenTableFlagsPtr(id: i32): usize {
  return changetype<TokenTable>(unchecked(tokenTables[id])).flags;
}

/** Readies a token table for use once its bytes, offsets and flags are written (TokenTable.seal). */
export function tokenTableSeal(id: i32): void {
  changetype<TokenTable>(unchecked(tokenTables[id])).seal();
}

export function blockCopiesIo(id: i32, ptr: usize, n: i32, tier: u32, nowMs: f64): i32 {
  resetStats();
  return counted(id, blockTable(id).storeCopies(ptr, n, tier, nowMs, stats));
}

export function blockRemoveIo(id: i32, ptr: usize, n: i32, tier: u32): void {
  resetStats();
  blockTable(id).remove(ptr, n, tier, stats);
  counted(id, 0);
}

export function blockClear(id: i32): void {
  blockTable(id).clear(true);
}

export function blockHashesIo(id: i32): i32 {
  return blockTable(id).writeHashes(out);
}

/**
 * The ingest fast path (kv-batch.ts): walks the batch payload at ptr (len bytes); 1 when it
 * takes the batch (results at batchResultsPtr, the plan staged), 0 when JavaScript must decode it.
 */
export function batchScanIo(ptr: usize, len: i32): i32 {
  return scanBatch(ptr, len);
}

/**
 * Applies the last accepted scan to block table `id`, detokenizing through `tokensId`; counters
 * at ingestStatsPtr. The slot's plain h0 comes as two u32 halves (a BigInt argument costs a
 * conversion per batch); the model's UTF-8 at [modelPtr, +modelLen) seeds LoRA and salted roots
 * (needed only when the scan staged some: modelLen 0 otherwise).
 */
export function batchApply(
  id: i32,
  tokensId: i32,
  rootLo: u32,
  rootHi: u32,
  modelPtr: usize,
  modelLen: i32,
  nowMs: f64,
): void {
  keepHeadroom();
  resetStats();
  const tokens = changetype<TokenTable>(unchecked(tokenTables[tokensId]));
  const root = ((<u64>rootHi) << 32) | <u64>rootLo;
  applyBatch(blockTable(id), tokens, root, modelPtr, modelLen, nowMs, scratch, hashOut, stats);
  counted(id, 0);
}

const patchBuf = new ByteBuf(256);
const patchedBuf = new ByteBuf(256);

/** The output of bucketDiffIo (a patch) and of bucketPatchIo (an image). */
export function patchOutPtr(): usize {
  return patchBuf.ptr;
}

export function patchedOutPtr(): usize {
  return patchedBuf.ptr;
}

/** Length of the image at patchedOutPtr(). */
export function patchedLen(): i32 {
  return patchedBuf.len;
}

/** The patch from image old to image fresh (bucket-patch.ts) at patchOutPtr(); its length, 0, or an error. */
export function bucketDiffIo(oldPtr: usize, oldLen: i32, freshPtr: usize, freshLen: i32): i32 {
  return diffBucket(oldPtr, oldLen, freshPtr, freshLen, patchBuf);
}

/** The image after the patch (bucket-patch.ts) at patchedOutPtr(); its length or an error. */
export function bucketPatchIo(imagePtr: usize, imageLen: i32, patchPtr: usize, patchLen: i32): i32 {
  return applyBucketPatch(imagePtr, imageLen, patchPtr, patchLen, patchedBuf);
}

// The published buckets (bucket-journal.ts), named by small integer ids like the tables.
const journals: usize[] = [];

function journal(id: i32): BucketJournal {
  return changetype<BucketJournal>(unchecked(journals[id]));
}

/**
 * A journal for `buckets` images of `ways` rows (`fullRows` for a bucket in full mode, ChunkTable
 * setRowLimits; `newest` 1: it keeps its newest rows) and slots of `slotWords` × 64, with a patch
 * ring of `ringBytes`.
 */
export function journalNew(
  buckets: u32,
  ways: i32,
  slotWords: i32,
  ringBytes: f64,
  fullRows: i32,
  newest: i32,
): i32 {
  if (ways < 1 || ways > MAX_ROWS || slotWords < 1 || slotWords > 1024 || ringBytes < 64) return -1;
  if (fullRows < 1 || fullRows > ways) return -1;
  const id = freeId(journals);
  journals[id] = changetype<usize>(
    new BucketJournal(buckets, ways, slotWords, <u64>ringBytes, fullRows, newest !== 0),
  );
  return id;
}

export function journalFree(id: i32): void {
  journal(id).dispose();
  journals[id] = 0;
}

/**
 * Takes table `tableId`'s dirty buckets (the list chunkTakeDirtyIo left at ingestOutPtr, `n` of
 * them) and publishes them into journal `id` (BucketJournal.publishDirty; the caller wrote their
 * speculative routes at specPtr in dirty-list order). Returns how many changed, listed at
 * journalChangedPtr in version order from `firstVersion`; -1 for a geometry the image cannot state.
 */
export function journalPublishIo(
  id: i32,
  tableId: i32,
  n: i32,
  specPtr: usize,
  specCount: i32,
  firstVersion: f64,
): i32 {
  keepHeadroom();
  return journal(id).publishDirty(chunkTable(tableId), out.ptr, n, specPtr, specCount, firstVersion);
}

export function journalChangedPtr(id: i32): usize {
  return journal(id).changed.ptr;
}

/** Bucket b's image as gateways hold it: its address (length: journalImageLen). */
export function journalImagePtr(id: i32, b: u32): usize {
  return journal(id).image(b);
}

/** Its length; -1 before its first publication. */
export function journalImageLen(id: i32, b: u32): i32 {
  return journal(id).imageLen(b);
}

/** The joined patch from version `since` (BucketJournal.serve) at journalServedPtr; its length or -1 (send the image). */
export function journalServeIo(id: i32, b: u32, since: f64): i32 {
  return journal(id).serve(b, since);
}

export function journalServedPtr(id: i32): usize {
  return journal(id).served.ptr;
}

/**
 * The sync-page entries of the `n` buckets listed at idsPtr (u32 each) for a gateway at `since`
 * (BucketJournal.writeEntries): how many fit `budget`, at journalPagePtr (journalPageLen bytes).
 */
export function journalWriteEntriesIo(
  id: i32,
  idsPtr: usize,
  n: i32,
  since: f64,
  patches: i32,
  budget: i32,
  first: i32,
): i32 {
  return journal(id).writeEntries(idsPtr, n, since, patches !== 0, budget, first !== 0);
}

export function journalPagePtr(id: i32): usize {
  return journal(id).page.ptr;
}

export function journalPageLen(id: i32): i32 {
  return journal(id).page.len;
}

/** Whether the last journalWriteEntriesIo wrote a patch. */
export function journalPagePatched(id: i32): i32 {
  return journal(id).pagePatched ? 1 : 0;
}

/** Linear memory the journal holds (images, per-bucket arrays, ring). */
export function journalBytes(id: i32): f64 {
  const j = journal(id);
  return <f64>j.buckets * <f64>(j.stride + 4 + 8 + 8 + 8) + <f64>j.cap;
}
