// A stand-in for sgl-router's per-worker radix tree of request text: the set of the text's
// prefixes at every CHUNK-character boundary, each keyed by a chained hash, with LRU eviction
// by prefix (sgl-router evicts its tree to a size bound too). A lookup walks the prefixes of a
// new text from the start and stops at the first miss, so the match is the longest shared
// prefix rounded down to whole chunks — within CHUNK - 1 characters of the tree's answer.
import { LruSet } from "./lru-set.ts";

export const TEXT_CHUNK = 16;

/** Chained 52-bit FNV-1a style hashes of text[0..CHUNK·k) for every full chunk k. */
export function textPrefixHashes(text: string): number[] {
  const out: number[] = [];
  let hi = 0x811c9dc5;
  let lo = 0x01000193;
  for (let at = 0; at + TEXT_CHUNK <= text.length; at += TEXT_CHUNK) {
    for (let i = at; i < at + TEXT_CHUNK; i++) {
      const c = text.charCodeAt(i);
      hi = Math.imul(hi ^ c, 0x01000193) >>> 0;
      lo = Math.imul(lo ^ c ^ (hi >>> 7), 0x5bd1e995) >>> 0;
    }
    out.push((hi & 0xfffff) * 0x100000000 + lo);
  }
  return out;
}

export class TextPrefixSet {
  readonly #set: LruSet<number>;

  constructor(capacityChunks: number) {
    this.#set = new LruSet(capacityChunks);
  }

  /** Characters of the longest stored prefix of the text whose hashes are given. */
  matchChars(prefixes: readonly number[]): number {
    let n = 0;
    while (n < prefixes.length && this.#set.has(prefixes[n] as number)) n++;
    return n * TEXT_CHUNK;
  }

  insert(prefixes: readonly number[]): void {
    for (const p of prefixes) this.#set.touch(p);
  }

  /** Characters held (sgl-router's tenant size). */
  get chars(): number {
    return this.#set.size * TEXT_CHUNK;
  }
}
