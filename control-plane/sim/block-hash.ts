// Chained block hashes, the way vLLM keys its prefix cache: every full block of `blockSize`
// tokens is identified by hash(parent hash, the block's token ids, extra keys), so equal hashes
// mean equal prefixes. vLLM's exact function does not matter to consumers (they re-derive
// their own keys from `token_ids`), but the value range does: vLLM publishes unsigned 64-bit
// ints, so ours are the first 8 bytes of a SHA-256 read as an unsigned big-endian integer —
// values of 2^63 and above occur about half of the time, as they do with vLLM.
import { createHash } from "node:crypto";

export type BlockHash = bigint;

/** What vLLM mixes into a block's hash besides tokens: the LoRA adapter (every block) and the
 * cache salt (first block only). */
export interface BlockExtraKeys {
  loraName?: string | null;
  cacheSalt?: string | null;
}

/** vLLM seeds the hash of the first block with a per-process random NONE_HASH
 * (deterministic under PYTHONHASHSEED); ours comes from the simulator seed. */
export function noneHash(seed: number): BlockHash {
  return createHash("sha256").update(`kvroute-sim-none-hash:${seed}`).digest().readBigUInt64BE(0);
}

/** The extra keys of block `index` as vLLM reports them in `BlockStored.extra_keys`
 * (null when the block has none). */
export function blockExtraKeys(index: number, keys: BlockExtraKeys): string[] | null {
  const out: string[] = [];
  if (keys.loraName) out.push(keys.loraName);
  if (index === 0 && keys.cacheSalt) out.push(keys.cacheSalt);
  return out.length > 0 ? out : null;
}

const parentBuf = Buffer.alloc(8);

/** A block hashed under a parent: its tokens and extra keys, and the hash they gave. */
interface Hashed {
  tokens: Uint32Array;
  extra: string | null;
  hash: BlockHash;
}

/** Blocks already hashed, by parent hash. Shared prefixes are hashed again for every request that
 * sends them (and, in the quality bench, for every router run on the same requests); one SHA-256
 * costs ~2 µs against ~0.1 µs to find the block here. A pure function's memo: results are the same.
 * A parent keeps its latest children only, and the table is dropped whole when it grows past
 * MEMO_PARENTS, so memory stays bounded whatever the workload. */
const memo = new Map<BlockHash, Hashed[]>();
const MEMO_PARENTS = 1 << 20;
const MEMO_CHILDREN = 8;

export function hashBlock(
  parent: BlockHash,
  tokens: ArrayLike<number>,
  start: number,
  end: number,
  extra: string[] | null,
): BlockHash {
  const extraKey = extra === null ? null : JSON.stringify(extra);
  const children = memo.get(parent);
  if (children !== undefined)
    for (const c of children)
      if (c.extra === extraKey && sameTokens(c.tokens, tokens, start, end)) return c.hash;
  const hash = sha256Block(parent, tokens, start, end, extraKey);
  const copy = new Uint32Array(end - start);
  for (let i = start; i < end; i++) copy[i - start] = tokens[i] as number;
  const entry = { tokens: copy, extra: extraKey, hash };
  if (children === undefined) {
    if (memo.size >= MEMO_PARENTS) memo.clear();
    memo.set(parent, [entry]);
  } else {
    if (children.length >= MEMO_CHILDREN) children.shift();
    children.push(entry);
  }
  return hash;
}

function sameTokens(block: Uint32Array, tokens: ArrayLike<number>, start: number, end: number): boolean {
  if (block.length !== end - start) return false;
  for (let i = 0; i < block.length; i++) if (block[i] !== tokens[start + i]) return false;
  return true;
}

function sha256Block(
  parent: BlockHash,
  tokens: ArrayLike<number>,
  start: number,
  end: number,
  extra: string | null,
): BlockHash {
  const h = createHash("sha256");
  parentBuf.writeBigUInt64BE(parent, 0);
  h.update(parentBuf);
  const body = Buffer.allocUnsafe((end - start) * 4);
  for (let i = start; i < end; i++) body.writeUInt32LE(tokens[i] as number, (i - start) * 4);
  h.update(body);
  if (extra !== null) h.update(extra);
  return h.digest().readBigUInt64BE(0);
}

/**
 * Incrementally hashes the full blocks of a growing token sequence (prompt, then generated
 * tokens), so each block is hashed exactly once over a request's life.
 */
export class BlockHasher {
  readonly hashes: BlockHash[] = [];

  constructor(
    private readonly blockSize: number,
    private readonly root: BlockHash,
    private readonly keys: BlockExtraKeys,
  ) {}

  /** Hashes every block that `tokens[0..length)` completes and returns the count of full blocks. */
  update(tokens: ArrayLike<number>, length: number): number {
    const full = Math.floor(length / this.blockSize);
    for (let b = this.hashes.length; b < full; b++) {
      const parent = b === 0 ? this.root : (this.hashes[b - 1] as BlockHash);
      this.hashes.push(
        hashBlock(parent, tokens, b * this.blockSize, (b + 1) * this.blockSize, blockExtraKeys(b, this.keys)),
      );
    }
    return full;
  }
}
