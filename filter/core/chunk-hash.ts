// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// Chained chunk hashes (docs/wire-format.md §3): h0 = XXH64(model ‖ 0 ‖ lora ‖ 0 ‖ cache_salt, 0),
// h_k = XXH64(chunk_k, seed = h_{k-1}); only complete chunks count. The state between calls is
// just (previous hash, bytes of the incomplete chunk), so a caller that keeps both can resume
// anywhere: feeding (partial ‖ next bytes) contiguously continues the chain exactly.
import { ByteBuf } from "./byte-buf";
import { xxh64 } from "./xxh64";

export const DEFAULT_CHUNK_SIZE: i32 = 128;

/** Hash of the last chunk chainChunks hashed (its `prev` when it hashed none). */
export let lastChainHash: u64 = 0;

/** h0 from the three key strings (concatenated in `scratch`, which is reused). */
export function rootHash(
  model: usize,
  modelLen: i32,
  lora: usize,
  loraLen: i32,
  salt: usize,
  saltLen: i32,
  scratch: ByteBuf,
): u64 {
  scratch.len = 0;
  scratch.append(model, modelLen);
  scratch.appendByte(0);
  scratch.append(lora, loraLen);
  scratch.appendByte(0);
  scratch.append(salt, saltLen);
  return xxh64(scratch.ptr, <usize>scratch.len, 0);
}

/**
 * Hashes the complete chunks of [p, p+len) continuing from `prev`, writing one u64 per chunk at
 * `out` (the caller provides len / chunk slots). Returns the number of chunks; the remaining
 * len % chunk bytes are the new partial chunk. `chunk` must be ≥ 1 (callers check).
 */
export function chainChunks(prev: u64, p: usize, len: i32, chunk: i32, out: usize): i32 {
  const count = len / chunk;
  let h = prev;
  for (let k = 0; k < count; k++) {
    h = xxh64(p + <usize>(k * chunk), <usize>chunk, h);
    store<u64>(out + ((<usize>k) << 3), h);
  }
  lastChainHash = h;
  return count;
}
