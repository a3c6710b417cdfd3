// The index a KV-event-driven router keeps: which rank holds which block, learned from the
// engines' KV events `delayMs` after they were published (the same delay kvroute's control
// plane gets). Keys are re-derived from each BlockStored's token ids chained from its parent's
// key, as Dynamo's and llm-d's indexers do; BlockRemoved and AllBlocksCleared take entries out.
// Speculative entries (llm-d's speculative indexing) are a separate layer with a TTL: an event
// never removes them, they lapse.
import type { BlockHash } from "../../../control-plane/sim/block-hash.ts";
import type { KvEvent } from "../../../control-plane/sim/kv-events.ts";
import { chainBlockKeys, ROOT_KEY } from "./token-blocks.ts";

interface Pending {
  applyAtMs: number;
  rank: number;
  events: KvEvent[];
}

export class EventBlockIndex {
  readonly #pending: Pending[] = [];
  /** Engine block hash → our key (the same tokens give the same hash on every rank). */
  readonly #keyOf = new Map<BlockHash, number>();
  /** Key → bit set of ranks holding it (confirmed by events). */
  readonly #holders = new Map<number, number>();
  /** Key → rank → expiry (ms) of a speculative entry. */
  readonly #speculative = new Map<number, Map<number, number>>();
  /** Confirmed blocks per rank (Dynamo's "tree size"). */
  readonly sizes: number[];

  constructor(
    readonly ranks: number,
    readonly blockSize: number,
    readonly delayMs: number,
  ) {
    if (ranks > 30) throw new RangeError("at most 30 ranks (a bit set per key)");
    this.sizes = new Array<number>(ranks).fill(0);
  }

  /** An engine published `events` at `atMs`; they take effect `delayMs` later. */
  receive(rank: number, events: KvEvent[], atMs: number): void {
    this.#pending.push({ applyAtMs: atMs + this.delayMs, rank, events });
  }

  /** Applies every batch due by `nowMs`, in publication order. */
  advance(nowMs: number): void {
    let n = 0;
    while (n < this.#pending.length && (this.#pending[n] as Pending).applyAtMs <= nowMs) {
      const p = this.#pending[n] as Pending;
      for (const e of p.events) this.#apply(p.rank, e);
      n++;
    }
    if (n > 0) this.#pending.splice(0, n);
  }

  #apply(rank: number, e: KvEvent): void {
    const bit = 1 << rank;
    if (e.type === "BlockStored") {
      const parent = e.parentBlockHash === null ? ROOT_KEY : this.#keyOf.get(e.parentBlockHash);
      if (parent === undefined) return; // parent unknown (evicted before we saw it): cannot chain
      const keys = chainBlockKeys(e.tokenIds, this.blockSize, parent);
      keys.forEach((key, i) => {
        this.#keyOf.set(e.blockHashes[i] as BlockHash, key);
        const h = this.#holders.get(key) ?? 0;
        if ((h & bit) === 0) {
          this.#holders.set(key, h | bit);
          this.sizes[rank] = (this.sizes[rank] as number) + 1;
        }
      });
    } else if (e.type === "BlockRemoved") {
      for (const hash of e.blockHashes) {
        const key = this.#keyOf.get(hash);
        if (key === undefined) continue;
        const h = this.#holders.get(key) ?? 0;
        if ((h & bit) === 0) continue;
        if (h === bit) this.#holders.delete(key);
        else this.#holders.set(key, h & ~bit);
        this.sizes[rank] = (this.sizes[rank] as number) - 1;
      }
    } else {
      for (const [key, h] of this.#holders) {
        if ((h & bit) === 0) continue;
        if (h === bit) this.#holders.delete(key);
        else this.#holders.set(key, h & ~bit);
      }
      this.sizes[rank] = 0;
    }
  }

  /** Marks `keys` as held by `rank` until `expiresAtMs` (llm-d's speculative entries). */
  speculate(rank: number, keys: readonly number[], expiresAtMs: number): void {
    for (const key of keys) {
      let m = this.#speculative.get(key);
      if (m === undefined) {
        m = new Map();
        this.#speculative.set(key, m);
      }
      m.set(rank, expiresAtMs);
    }
  }

  #holdersAt(key: number, nowMs: number, withSpeculative: boolean): number {
    let h = this.#holders.get(key) ?? 0;
    if (!withSpeculative) return h;
    const m = this.#speculative.get(key);
    if (m === undefined) return h;
    for (const [rank, until] of m) {
      if (until > nowMs) h |= 1 << rank;
      else m.delete(rank);
    }
    if (m.size === 0) this.#speculative.delete(key);
    return h;
  }

  /** Per rank: how many of `keys`, from the first, the rank holds without a gap. */
  prefixDepths(keys: readonly number[], nowMs: number, withSpeculative = false): number[] {
    const depth = new Array<number>(this.ranks).fill(0);
    let alive = (1 << this.ranks) - 1;
    for (const key of keys) {
      alive &= this.#holdersAt(key, nowMs, withSpeculative);
      if (alive === 0) break;
      for (let r = 0; r < this.ranks; r++) if (alive & (1 << r)) depth[r] = (depth[r] as number) + 1;
    }
    return depth;
  }
}
