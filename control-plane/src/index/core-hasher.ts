// The routing core's chunk hashing as the index consumes it: the chunk size and the chain's
// h0 (the index's block table in the core hashes the chunks itself, filter/core/block-table.ts).
import { rootHash } from "../core/kvroute-core.ts";
import type { ChunkHasher } from "./slot-blocks.ts";

export function coreChunkHasher(chunkSize: number): ChunkHasher {
  if (!Number.isInteger(chunkSize) || chunkSize < 1 || chunkSize > 0x7fffffff)
    throw new RangeError(`chunkSize must be a positive integer (got ${chunkSize})`);
  return { chunkSize, rootHash };
}
