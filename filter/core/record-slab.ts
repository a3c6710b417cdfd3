// Fixed-size records addressed by a 1-based ref, in segments that never move (the chunk table's
// records, chunk-table.ts, found through u64-map.ts). The first segment starts small and doubles
// in place up to SEGMENT_RECORDS records, so a small table stays small; past that each growth adds
// a segment of SEGMENT_RECORDS. Why not one slab doubled by realloc: at 800 ranks the chunk
// table holds ~17.6 M records, a doubled slab then reserves 2^25 (1.9× the records), and the
// realloc that doubles it holds the old and the new slab at once (2.9×) — with 56-byte records
// 1.9 GB and 2.8 GB for 1 GB of records, past what a 32-bit memory addresses beside the block
// tables (docs/scaling.md "Memory"). Segments
// hold the records plus at most one segment's spare, and a growth copies nothing.
//
// A ref's record: segment (ref - 1) >> SEGMENT_BITS, record (ref - 1) & SEGMENT_MASK in it. The
// segment table (u32 addresses) is tiny and stays in cache; it moves when it grows, so callers
// take `segments` anew on every call.

export const SEGMENT_BITS: u32 = 16;
const SEGMENT_RECORDS: u32 = 1 << SEGMENT_BITS;
const SEGMENT_MASK: u32 = SEGMENT_RECORDS - 1;
/** Records of the first segment at the start. */
const FIRST_RECORDS: u32 = 64;

@unmanaged
export class RecordSlab {
  /** Segment addresses, u32 each. */
  segments: usize;
  segmentCount: u32 = 1;
  segmentCap: u32 = 4;
  /** Records the segments hold room for. */
  cap: u32 = FIRST_RECORDS;

  constructor(public stride: usize) {
    this.segments = heap.alloc((<usize>this.segmentCap) << 2);
    store<u32>(this.segments, <u32>heap.alloc(<usize>FIRST_RECORDS * stride));
  }

  /** Record `ref`'s address in the slab whose segment table is at `segments`. */
  @inline static at(segments: usize, stride: usize, ref: u32): usize {
    const i = ref - 1;
    return (
      <usize>load<u32>(segments + ((<usize>(i >> SEGMENT_BITS)) << 2)) + <usize>(i & SEGMENT_MASK) * stride
    );
  }

  @inline at(ref: u32): usize {
    return RecordSlab.at(this.segments, this.stride, ref);
  }

  /** Makes room for `n` records (refs 1..n); existing records stay where they are, but the first
   * segment while it is below SEGMENT_RECORDS, which a realloc may move. */
  reserve(n: u32): void {
    while (n > this.cap) {
      if (this.cap < SEGMENT_RECORDS) {
        const grown = this.cap << 1;
        store<u32>(
          this.segments,
          <u32>heap.realloc(<usize>load<u32>(this.segments), <usize>grown * this.stride),
        );
        this.cap = grown;
        continue;
      }
      if (this.segmentCount === this.segmentCap) {
        this.segmentCap <<= 1;
        this.segments = heap.realloc(this.segments, (<usize>this.segmentCap) << 2);
      }
      store<u32>(
        this.segments + ((<usize>this.segmentCount) << 2),
        <u32>heap.alloc(<usize>SEGMENT_RECORDS * this.stride),
      );
      this.segmentCount++;
      this.cap += SEGMENT_RECORDS;
    }
  }

  /** Bytes of the segments (the records and their spare room). */
  get bytes(): usize {
    return <usize>this.cap * this.stride;
  }

  /** Gives back every segment, the slab included. */
  dispose(): void {
    for (let i: u32 = 0; i < this.segmentCount; i++)
      heap.free(<usize>load<u32>(this.segments + ((<usize>i) << 2)));
    heap.free(this.segments);
    heap.free(changetype<usize>(this));
  }
}
