// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// Memory for one block table's records (block-table.ts): one free list per size class of
// 16-byte granules, and new records carved in order from pages the pool takes from the heap. A
// record takes its size rounded up to 16 bytes where heap.alloc added TLSF's 4-byte header first
// (~3.4 bytes a block less in the ingest bench), and a store costs a free-list pop or a bump
// where heap.alloc cost a TLSF search, split and header write (~6 % of ingest under perf). Much
// of that was the first write to the record's cache line, which TLSF's header write took; the
// pool writes nothing before the record, so the batch fast path loads the lines its records will
// take first (touchAhead), overlapping those misses.
//
// Records stay 16-byte aligned (pages are heap blocks, classes are multiples of 16), which the
// block map's fingerprint bits need (block-map.ts). A record past the largest class (a block
// that completed many chunks) goes to the heap as before. A freed record waits on its class's
// free list for the next record of that size: a table gives its pages back only when it is
// cleared or freed, so `bytes` counts the pages held, not just the records in them.

/** Pooled records are at most CLASSES granules (256 bytes); larger ones come from the heap. */
const CLASSES: u32 = 16;
const GRANULE: usize = 16;
/** The first page is small and each next one doubles, up to MAX_PAGE: a small table does not
 * hold a large page, a large one takes few pages. */
const MIN_PAGE: usize = 1024;
const MAX_PAGE: usize = 16384;
/** Bytes of the cache line touchAhead loads one word of. */
const LINE: usize = 64;

/** Bytes TLSF really takes for an allocation of n (4-byte header, 16-byte granules). */
export function heapFootprint(n: usize): usize {
  return (n + 4 + 15) & ~(<usize>15);
}

@unmanaged
export class RecordPool {
  /** Free list head per class (u32 each, index = granules - 1): records given back, for reuse. */
  freeLists: usize;
  /** New records are carved from the current page in order, whatever their class: the next
   * stores' records are the bytes after `bump`, which touchAhead can load before they are written. */
  bump: usize = 0;
  end: usize = 0;
  nextPage: usize = MIN_PAGE;
  /** Every page taken, in order: its address and the end of the records carved from it (u32
   * each; the current page's end is `bump`), for reset and for walking the records (pageEnd). */
  pages: usize = 0;
  pageCount: u32 = 0;
  pageCap: u32 = 0;
  /** Records too large for a class, which live on the heap instead of a page. */
  heapRecords: u32 = 0;
  /** Heap bytes of the pages and of the records too large for a class. */
  bytes: usize = 0;

  constructor() {
    this.freeLists = heap.alloc((<usize>CLASSES) << 2);
    memory.fill(this.freeLists, 0, (<usize>CLASSES) << 2);
  }

  /** A record of n bytes (n > 0), 16-byte aligned. */
  @inline alloc(n: usize): usize {
    const g = (n + GRANULE - 1) >> 4;
    if (g > <usize>CLASSES) {
      this.bytes += heapFootprint(n);
      this.heapRecords++;
      return heap.alloc(n);
    }
    const list = this.freeLists + ((g - 1) << 2);
    const head = <usize>load<u32>(list);
    if (head !== 0) {
      store<u32>(list, load<u32>(head));
      return head;
    }
    const size = g << 4;
    const at = this.bump;
    if (at + size <= this.end && at !== 0) {
      this.bump = at + size;
      return at;
    }
    return this.refill(size);
  }

  /**
   * Takes a new page and returns its first record, of `size` bytes. The old page's last bytes
   * (under 256) stay unused.
   */
  private refill(size: usize): usize {
    const pageBytes = this.nextPage;
    if (pageBytes < MAX_PAGE) this.nextPage = pageBytes << 1;
    const page = heap.alloc(pageBytes);
    this.bytes += heapFootprint(pageBytes);
    if (this.pageCount === this.pageCap) {
      this.pageCap = this.pageCap === 0 ? 64 : this.pageCap << 1;
      const listBytes = (<usize>this.pageCap) << 3;
      this.pages = this.pages === 0 ? heap.alloc(listBytes) : heap.realloc(this.pages, listBytes);
    }
    // The page left behind ends where its last record does.
    if (this.pageCount > 0) store<u32>(this.pages + ((<usize>(this.pageCount - 1)) << 3), <u32>this.bump, 4);
    store<u32>(this.pages + ((<usize>this.pageCount) << 3), <u32>page);
    this.pageCount++;
    this.end = page + pageBytes;
    this.bump = page + size;
    return page;
  }

  /**
   * Loads a word of each cache line among the next `n` bytes new records will take, and returns
   * it, to be thrown away: a store writes a record where no line is cached yet, and a caller
   * about to store many blocks touches their lines first so the misses overlap (as the map's
   * touch does for its slots).
   */
  touchAhead(n: usize): u32 {
    let sink: u32 = 0;
    let p = this.bump;
    const stop = p + n < this.end ? p + n : this.end;
    while (p < stop) {
      sink ^= load<u32>(p);
      p += LINE;
    }
    return sink;
  }

  /** Gives back record `rec` of n bytes (the n it was allocated with). */
  @inline free(rec: usize, n: usize): void {
    const g = (n + GRANULE - 1) >> 4;
    if (g > <usize>CLASSES) {
      this.bytes -= heapFootprint(n);
      this.heapRecords--;
      heap.free(rec);
      return;
    }
    const list = this.freeLists + ((g - 1) << 2);
    store<u32>(rec, load<u32>(list));
    store<u32>(list, <u32>rec);
  }

  /** Where page i (0 ≤ i < pageCount) starts: its records lie back to back from here. */
  @inline pageStart(i: u32): usize {
    return <usize>load<u32>(this.pages + ((<usize>i) << 3));
  }

  /** Where page i's records end. */
  @inline pageEnd(i: u32): usize {
    return i + 1 === this.pageCount ? this.bump : <usize>load<u32>(this.pages + ((<usize>i) << 3), 4);
  }

  /** The bytes a pooled record of n bytes takes in its page (the stride of a walk over a page). */
  @inline static stride(n: usize): usize {
    return (n + GRANULE - 1) & ~(GRANULE - 1);
  }

  /** Is a record of n bytes one free() would give to the heap (so reset() does not)? */
  @inline static onHeap(n: usize): bool {
    return (n + GRANULE - 1) >> 4 > <usize>CLASSES;
  }

  /**
   * Gives every page back; the pooled records are gone with them. The caller frees the records
   * that came from the heap (onHeap) first, and `bytes` then counts none.
   */
  reset(): void {
    for (let i: u32 = 0; i < this.pageCount; i++) heap.free(this.pageStart(i));
    this.pageCount = 0;
    this.heapRecords = 0;
    this.bytes = 0;
    this.bump = 0;
    this.end = 0;
    this.nextPage = MIN_PAGE;
    memory.fill(this.freeLists, 0, (<usize>CLASSES) << 2);
  }

  /** Gives back everything, itself included (after the heap records, as for reset). */
  dispose(): void {
    this.reset();
    if (this.pages !== 0) heap.free(this.pages);
    heap.free(this.freeLists);
    heap.free(changetype<usize>(this));
  }
}
