// Free memory kept ahead of the allocator once linear memory passes half of what 32 bits address.
//
// AssemblyScript's allocator (TLSF) doubles memory when it runs out, but past 2 GiB doubling
// would pass 4 GiB, so it falls back to growing by exactly what the one allocation needs: a
// megabyte at a time. V8 answers a memory.grow past its external-memory limit (half the old
// generation's limit, ~2 GiB by default, and the whole of linear memory counts) with a full,
// memory-reducing collection of the JavaScript heap. At 800 ranks the index passes 2 GiB and
// the control plane spent a quarter of its time, and most of its fill, in those collections
// (issue 31). So after memory grows past that point, one large block is allocated and freed at
// once: the allocator keeps it as free space, and the next hundreds of megabytes come from it
// with one grow instead of hundreds. Untouched pages cost no resident memory.

/** Where TLSF stops doubling: 2 GiB in 64 KiB pages. */
const HALF_PAGES: i32 = 32768;
const MAX_PAGES: i32 = 65536;
/** Each reserve: an eighth of memory, at most 256 MiB (under TLSF's 1 GiB block limit). */
const RESERVE_MAX_PAGES: i32 = 4096;
/** Pages never reserved below 4 GiB, so the reserve itself cannot fail to grow (a trap). */
const SPARE_PAGES: i32 = 4;

let seenPages: i32 = 0;

/** After memory grew past 2 GiB, puts up to an eighth of it more in the allocator's free space. */
export function keepHeadroom(): void {
  const pages = memory.size();
  if (pages === seenPages) return;
  seenPages = pages;
  if (pages < HALF_PAGES) return;
  // The allocator rounds a large request up to its size class (at most a sixteenth more).
  const room = ((MAX_PAGES - pages - SPARE_PAGES) * 15) >> 4;
  const want = min(min(pages >> 3, RESERVE_MAX_PAGES), room);
  if (want <= 0) return;
  heap.free(heap.alloc(((<usize>want) << 16) - 65536));
  seenPages = memory.size();
}
