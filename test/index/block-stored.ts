// A plain BlockStored event for the index's tests: GPU, no adapter, salt or extras — the fields a
// test sets are the chain (hashes, parent), the block size and the token ids.
import type { BlockStored } from "../../control-plane/src/vocabulary/kv-events.ts";

export function gpuStored(
  hashes: bigint[],
  parent: bigint | null,
  blockSize: number,
  tokenIds: number[],
): BlockStored {
  return {
    type: "BlockStored",
    hashes,
    parent,
    tokenIds,
    blockSize,
    loraName: null,
    loraId: null,
    medium: "GPU",
    extraKeys: null,
    cacheSalt: null,
    sessionId: null,
    groupIdx: null,
    kvCacheSpecKind: null,
    slidingWindow: null,
    eventVersion: null,
    locality: null,
    ownership: null,
  };
}
