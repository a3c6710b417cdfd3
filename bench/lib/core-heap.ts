// The core's heap walked block by block, for the benches' memory figures. AssemblyScript's TLSF
// allocator (assemblyscript 0.28, std/assembly/rt/tlsf.ts) grows linear memory by doubling it, so
// memory's size says little about what the index needs; the end of the last block in use does.
// Its layout: a root of ROOT_BYTES at the heap base rounded up to 16, then blocks back to back to
// the end of memory, each a u32 header (payload size | FREE 1 | LEFTFREE 2) before its payload,
// the last one a tail of size 0. A walk that does not end at that tail returns null (another
// allocator or version): the caller then reports memory's size alone.
import type { CoreModule } from "../../control-plane/src/core/core-wasm.ts";

/** TLSF's root: flMap, 23 second-level maps, 23 × 16 list heads, the tail pointer (32-bit). */
const ROOT_BYTES = 4 + 23 * 4 + 4 + 23 * 16 * 4 + 4;
const HEADER = 4;
const FREE = 1;

export interface CoreHeap {
  /** Linear memory's size. */
  memory: number;
  /** Bytes of blocks in use (headers included) and of free blocks. */
  used: number;
  free: number;
  /** Where the last block in use ends: the memory the heap needs. */
  highWater: number;
}

export function coreHeap(c: CoreModule): CoreHeap | null {
  const u32 = c.u32view;
  const memory = u32.byteLength;
  const root = (c.ex.heapBasePtr() + 15) & ~15;
  let at = ((root + ROOT_BYTES + HEADER + 15) & ~15) - HEADER;
  let used = 0;
  let free = 0;
  let highWater = 0;
  while (at + HEADER <= memory) {
    const info = u32[at >>> 2] as number;
    const size = (info >>> 2) * 4;
    if (size === 0) return memory - at <= 16 ? { memory, used, free, highWater } : null;
    if ((info & FREE) !== 0) free += HEADER + size;
    else {
      used += HEADER + size;
      highWater = at + HEADER + size;
    }
    at += HEADER + size;
  }
  return null;
}
