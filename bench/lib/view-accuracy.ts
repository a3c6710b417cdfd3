// Does a gateway's view of the cache find what the control plane's full index finds? (issue 31,
// DESIGN §9: the same longest cached prefix — same slot, ≥ 95 % of its chunks — for ≥ 95 % of
// requests.) The gateway's side is the prefix walk the filter runs (filter/core/prefix-walk.ts,
// through image-probes.ts walkIo in its own instance of build/kvroute-core.wasm: the shipped
// code) over the bucket images the control plane published; the full index's side is every
// chunk's holders in the control plane's chunk table.
import { readFileSync } from "node:fs";
import { instantiateSync } from "@assemblyscript/loader";
import type { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";

interface WalkExports {
  memory: WebAssembly.Memory;
  routeIoReserve(n: number): number;
  routeOutPtr(): number;
  walkIo(count: number, buckets: number, words: number, slotCount: number, totalLen: number): number;
}

/** The share of a slot's cached chunks the view must find for the answer to count as the same. */
export const SAME_PREFIX_SHARE = 0.95;

export interface PrefixAnswer {
  /** The deepest cached prefix (chunks) and the slots holding it; depth 0: nothing cached. */
  depth: number;
  slots: number[];
}

export class ShippedWalk {
  readonly #ex: WalkExports;

  constructor() {
    const wasm = readFileSync(new URL("../../build/kvroute-core.wasm", import.meta.url));
    this.#ex = instantiateSync<Record<string, unknown>>(wasm, {}).exports as unknown as WalkExports;
  }

  /**
   * Per-slot cached depth (chunks) the filter's walk finds for the chunk hashes over the images
   * `image(bucket)` returns (the buckets the request's hashes fall in; absent ones read as empty),
   * every one of the `slotCount` slots a candidate (`words`: the images' bitmap width).
   */
  depths(
    hashes: BigUint64Array,
    image: (bucket: number) => Uint8Array | undefined,
    buckets: number,
    words: number,
    slotCount: number,
  ): Int32Array {
    const mask = BigInt(buckets - 1);
    const used = new Map<number, Uint8Array>();
    for (const h of hashes) {
      const b = Number(h & mask);
      if (!used.has(b)) used.set(b, image(b) ?? new Uint8Array(0));
    }
    const head = hashes.length * 8 + words * 8 + buckets * 8;
    let total = head;
    for (const img of used.values()) total += img.length;
    const ptr = this.#ex.routeIoReserve(total);
    const mem = new Uint8Array(this.#ex.memory.buffer, ptr, total);
    mem.fill(0, 0, head);
    const view = new DataView(this.#ex.memory.buffer, ptr, total);
    for (let i = 0; i < hashes.length; i++) view.setBigUint64(i * 8, hashes[i] as bigint, true);
    for (let w = 0; w < words; w++) {
      const bits = Math.max(0, Math.min(64, slotCount - w * 64));
      view.setBigUint64(
        hashes.length * 8 + w * 8,
        bits === 64 ? 2n ** 64n - 1n : (1n << BigInt(bits)) - 1n,
        true,
      );
    }
    const dir = hashes.length * 8 + words * 8;
    let at = head;
    for (const [b, img] of used) {
      view.setUint32(dir + b * 8, at, true);
      view.setUint32(dir + b * 8 + 4, img.length, true);
      mem.set(img, at);
      at += img.length;
    }
    if (this.#ex.walkIo(hashes.length, buckets, words, slotCount, total) < 0)
      throw new Error("the walk refused its arguments");
    return new Int32Array(this.#ex.memory.buffer, this.#ex.routeOutPtr(), slotCount).slice();
  }
}

/** The longest prefix any slot holds, by the walk's per-slot depths. */
export function deepest(depths: ArrayLike<number>): PrefixAnswer {
  let depth = 0;
  let slots: number[] = [];
  for (let s = 0; s < depths.length; s++) {
    const d = depths[s] as number;
    if (d > depth) {
      depth = d;
      slots = [s];
    } else if (d === depth && d > 0) slots.push(s);
  }
  return { depth, slots };
}

/** The full index's answer: chunk by chunk, the slots that hold every chunk so far (any tier). */
export function fullIndexAnswer(chunks: ChunkIndex, hashes: BigUint64Array): PrefixAnswer {
  let holders: Set<number> | null = null;
  let depth = 0;
  for (const h of hashes) {
    const entry = chunks.get(h);
    if (entry === undefined) break;
    const here: Set<number> = new Set(entry.slots.filter((s) => holders === null || holders.has(s)));
    if (here.size === 0) break;
    holders = here;
    depth++;
  }
  return { depth, slots: holders === null ? [] : [...holders].sort((a, b) => a - b) };
}

/**
 * Same longest cached prefix: nothing cached on both sides, or the view's deepest slots include
 * one of the full index's and the view credits it ≥ 95 % of the full index's depth.
 */
export function samePrefix(full: PrefixAnswer, view: PrefixAnswer): boolean {
  if (full.depth === 0) return view.depth === 0;
  if (view.depth < SAME_PREFIX_SHARE * full.depth) return false;
  return view.slots.some((s) => full.slots.includes(s));
}
