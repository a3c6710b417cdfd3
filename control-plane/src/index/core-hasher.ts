// The routing core's chunk hashing as the index consumes it, per KV block on the ingest path:
// the hashes land in one reused array (valid until the next call) instead of a fresh typed
// array per block.
import { feedChunksEach, initialState } from "../core/kvroute-core.ts";
import type { ChunkHasher } from "./slot-blocks.ts";

export function coreChunkHasher(chunkSize: number): ChunkHasher {
  const hashes: bigint[] = [];
  const push = (h: bigint) => {
    hashes.push(h);
  };
  return {
    initialState,
    feed(state, bytes) {
      hashes.length = 0;
      return { hashes, state: feedChunksEach(state, bytes, chunkSize, push) };
    },
  };
}
