// Loads build/kvroute-core.wasm with @assemblyscript/loader and gives typed access to its raw
// exports plus the shared I/O region. Everything crosses as numbers and bytes in linear memory
// (filter/core/index.ts), so a call costs no loader marshalling.
import { readFileSync } from "node:fs";
import { instantiateSync } from "@assemblyscript/loader";

export interface CoreExports {
  memory: WebAssembly.Memory;
  heapBasePtr(): number;
  ioReserve(n: number): number;
  xxh64Io(len: number, seed: bigint): bigint;
  rootHashIo(modelLen: number, loraLen: number, saltLen: number): bigint;
  chunkFeedIo(prev: bigint, total: number, chunk: number): number;
  chunkLastHash(): bigint;
  hashPtr(): number;
  hashCount(): number;
  templateLoad(len: number): number;
  templateFree(id: number): void;
  scanIo(len: number): number;
  scanResultPtr(): number;
  scanMessagesPtr(): number;
  scanPartsPtr(): number;
  decodeSpanIo(off: number, len: number, escaped: number): number;
  decodedPtr(): number;
  renderIo(bodyLen: number, endpoint: number, templateId: number, bosLen: number, maxStream: number): number;
  renderedPtr(): number;
  renderedLen(): number;
  hashRequestIo(
    bodyLen: number,
    endpoint: number,
    templateId: number,
    bosLen: number,
    modelLen: number,
    loraLen: number,
    chunk: number,
    maxStream: number,
  ): number;
  parseRankIo(len: number): bigint;
  usageBegin(mode: number, budget: number): void;
  usageFeedIo(len: number): number;
  usageFinish(): number;
  usageCached(): number;
  usageScanned(): number;
  usageModeIo(typeLen: number, encodingLen: number): number;
  // Index storage (filter/core/ingest-io.ts).
  ingestOutPtr(): number;
  ingestStatsPtr(): number;
  chunkTableNew(buckets: number): number;
  chunkTableFree(id: number): void;
  chunkTableSize(id: number): number;
  chunkTableBytes(id: number): number;
  chunkAdd(id: number, hash: bigint, depth: number, slot: number, tier: number, nowMs: number): void;
  chunkRemove(id: number, hash: bigint, slot: number, tier: number): void;
  chunkSpeculated(id: number, hash: bigint, depth: number, nowMs: number, on: number): void;
  chunkDropIfEmpty(id: number, hash: bigint): number;
  chunkHolderCount(id: number, hash: bigint, slot: number, tier: number): number;
  chunkMarkDirty(id: number, bucket: number): void;
  chunkGetIo(id: number, hash: bigint): number;
  chunkBucketIo(id: number, bucket: number): number;
  chunkTakeDirtyIo(id: number): number;
  patchOutPtr(): number;
  patchedOutPtr(): number;
  bucketDiffIo(oldPtr: number, oldLen: number, freshPtr: number, freshLen: number): number;
  bucketPatchIo(imagePtr: number, imageLen: number, patchPtr: number, patchLen: number): number;
  patchedLen(): number;
  // The published buckets (filter/core/bucket-journal.ts).
  chunkSetRowLimits(id: number, ways: number, fullRows: number, newest: number): void;
  journalNew(
    buckets: number,
    ways: number,
    slotWords: number,
    ringBytes: number,
    fullRows: number,
    newest: number,
  ): number;
  journalFree(id: number): void;
  journalPublishIo(
    id: number,
    tableId: number,
    n: number,
    specPtr: number,
    specCount: number,
    firstVersion: number,
  ): number;
  journalChangedPtr(id: number): number;
  journalImagePtr(id: number, bucket: number): number;
  journalImageLen(id: number, bucket: number): number;
  journalServeIo(id: number, bucket: number, since: number): number;
  journalServedPtr(id: number): number;
  journalWriteEntriesIo(
    id: number,
    idsPtr: number,
    n: number,
    since: number,
    patches: number,
    budget: number,
    first: number,
  ): number;
  journalPagePtr(id: number): number;
  journalPageLen(id: number): number;
  journalPagePatched(id: number): number;
  journalBytes(id: number): number;
  chunkEncodeBucketIo(
    id: number,
    bucket: number,
    ways: number,
    slotWords: number,
    specPtr: number,
    specCount: number,
  ): number;
  blockTableNew(chunkId: number, slot: number, chunkSize: number, maxBlocks: number): number;
  blockTableFree(id: number, withChunks: number): void;
  blockCount(id: number): number;
  blockTableBytes(id: number): number;
  blockLookupIo(id: number, ptr: number, n: number, hasParent: number, parent: bigint): number;
  blockStoreIo(
    id: number,
    ptr: number,
    n: number,
    tier: number,
    hasParent: number,
    parent: bigint,
    root: bigint,
    nowMs: number,
  ): number;
  blockStoreTokensIo(
    id: number,
    tokensId: number,
    ptr: number,
    n: number,
    blockSize: number,
    tier: number,
    hasParent: number,
    parent: bigint,
    root: bigint,
    nowMs: number,
  ): number;
  tokenTableNew(size: number, byteLen: number, dummy: number): number;
  tokenTableBytesPtr(id: number): number;
  tokenTableOffsetsPtr(id: number): number;
  tokenTableFlagsPtr(id: number): number;
  tokenTableSeal(id: number): void;
  blockCopiesIo(id: number, ptr: number, n: number, tier: number, nowMs: number): number;
  blockRemoveIo(id: number, ptr: number, n: number, tier: number): void;
  blockClear(id: number): void;
  blockHashesIo(id: number): number;
  // The ingest fast path (filter/core/kv-batch.ts).
  batchScanIo(ptr: number, len: number): number;
  batchApply(
    id: number,
    tokensId: number,
    rootLo: number,
    rootHi: number,
    modelPtr: number,
    modelLen: number,
    nowMs: number,
  ): void;
  batchResultsPtr(): number;
}

const DEFAULT_WASM = new URL("../../../build/kvroute-core.wasm", import.meta.url);

/** Exports that return an address in linear memory (`…Ptr`, `…Reserve`). */
const ADDRESS_EXPORT = /(Ptr|[rR]eserve)$/;

/**
 * The exports, with every one that returns an address read as unsigned. Wasm hands an i32 to
 * JavaScript signed, so an address past 2 GiB — which a core indexing hundreds of ranks reaches
 * (docs/scaling.md "Memory": ~3.6 GiB at 800) — came back negative, and a view or a copy at it
 * read from the wrong end of memory or threw.
 */
export function unsignedAddresses(exports: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...exports };
  for (const [name, f] of Object.entries(exports)) {
    if (typeof f !== "function" || !ADDRESS_EXPORT.test(name)) continue;
    const signed = f as (a?: number, b?: number) => number;
    out[name] = (a?: number, b?: number): number => signed(a, b) >>> 0;
  }
  return out;
}

/** One instance of the core with helpers to move bytes in and out of its memory. */
export class CoreModule {
  readonly ex: CoreExports;
  #buffer: ArrayBuffer;
  #u8: Uint8Array;
  #u64: BigUint64Array;
  #u32: Uint32Array;
  #i32: Int32Array;
  #f64: Float64Array;
  #i64: BigInt64Array;
  #ioPtr: number;
  #ioCap: number;

  constructor(wasm: Uint8Array) {
    // A core compiled with the filter's flags (WASI shim, abort → proc_exit) imports these two
    // and runs its top-level code from `_start`; the Node build needs neither.
    const wasi = {
      fd_write: (): number => 52, // ENOSYS: the core never prints
      proc_exit: (code: number): never => {
        throw new Error(`routing core aborted (proc_exit ${code})`);
      },
    };
    const loaded = instantiateSync<Record<string, unknown>>(wasm, { wasi_snapshot_preview1: wasi });
    // The raw exports, not the loader's demangled ones: those wrap every function in a rest-args
    // closure (an array per call) to pass an argument count, which only exports with optional
    // parameters need — and asc exports __setArgumentsLength exactly when one has them.
    const raw = loaded.instance.exports as Record<string, unknown>;
    const needsCount = "__setArgumentsLength" in raw || "__argumentsLength" in raw;
    const exports = needsCount ? loaded.exports : raw;
    if (typeof exports._start === "function") (exports._start as () => void)();
    this.ex = unsignedAddresses(exports) as unknown as CoreExports;
    this.#buffer = this.ex.memory.buffer;
    this.#u8 = new Uint8Array(this.#buffer);
    this.#u64 = new BigUint64Array(this.#buffer);
    this.#u32 = new Uint32Array(this.#buffer);
    this.#i32 = new Int32Array(this.#buffer);
    this.#f64 = new Float64Array(this.#buffer);
    this.#i64 = new BigInt64Array(this.#buffer);
    this.#ioCap = 64 << 10;
    this.#ioPtr = this.ex.ioReserve(this.#ioCap);
  }

  /** A byte view of linear memory, renewed when memory grew. Growing detaches the old buffer,
   * which empties its views: checking the view's length costs far less than asking the memory
   * for its buffer (the ingest path reads views several times per batch). */
  get u8(): Uint8Array {
    if (this.#u8.length === 0) {
      this.#buffer = this.ex.memory.buffer;
      this.#u8 = new Uint8Array(this.#buffer);
      this.#u64 = new BigUint64Array(this.#buffer);
      this.#u32 = new Uint32Array(this.#buffer);
      this.#i32 = new Int32Array(this.#buffer);
      this.#f64 = new Float64Array(this.#buffer);
      this.#i64 = new BigInt64Array(this.#buffer);
    }
    return this.#u8;
  }

  /** Typed views of linear memory (index = address / element size), renewed when memory grew. */
  get u32view(): Uint32Array {
    void this.u8;
    return this.#u32;
  }

  get i32view(): Int32Array {
    void this.u8;
    return this.#i32;
  }

  get f64view(): Float64Array {
    void this.u8;
    return this.#f64;
  }

  get i64view(): BigInt64Array {
    void this.u8;
    return this.#i64;
  }

  /** A u64 view of linear memory (index = address / 8), renewed when memory grew. */
  get u64view(): BigUint64Array {
    void this.u8; // renews both views when memory grew
    return this.#u64;
  }

  get buffer(): ArrayBuffer {
    return this.u8.buffer as ArrayBuffer;
  }

  /** Address of an I/O region of at least n bytes. */
  io(n: number): number {
    if (n > this.#ioCap) {
      this.#ioCap = Math.max(n, this.#ioCap * 2);
      this.#ioPtr = this.ex.ioReserve(this.#ioCap);
    }
    return this.#ioPtr;
  }

  /** Writes the pieces back to back at the start of the I/O region; returns their lengths. */
  writeIo(...pieces: Uint8Array[]): number[] {
    const total = pieces.reduce((n, p) => n + p.length, 0);
    let at = this.io(total);
    const mem = this.u8;
    const lengths: number[] = [];
    for (const p of pieces) {
      mem.set(p, at);
      at += p.length;
      lengths.push(p.length);
    }
    return lengths;
  }

  /** A copy of n bytes at ptr. */
  bytes(ptr: number, n: number): Uint8Array {
    return this.u8.slice(ptr, ptr + n);
  }

  /** A copy of n u64 values at ptr (8-byte aligned: AssemblyScript blocks are 16-aligned). */
  u64s(ptr: number, n: number): BigUint64Array {
    return this.u64view.slice(ptr >>> 3, (ptr >>> 3) + n);
  }
}

let shared: CoreModule | undefined;

/** The process-wide core instance (KVROUTE_CORE_WASM overrides the module path). */
export function core(): CoreModule {
  if (shared === undefined) {
    const path = process.env.KVROUTE_CORE_WASM || DEFAULT_WASM; // empty = unset
    shared = new CoreModule(readFileSync(path));
  }
  return shared;
}
