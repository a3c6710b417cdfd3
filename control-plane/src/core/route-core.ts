// The filter's routing decision in Node: the same Wasm code (filter/core/route-io.ts over
// route-decision.ts, prefix-walk.ts, cache-images.ts and the request hasher), in its own
// instance so several simulated gateways can run side by side. The benchmark drives kvroute
// through this; tests use it to check decisions without a Proxy-Wasm host.
import { readFileSync } from "node:fs";
import { instantiateSync } from "@assemblyscript/loader";

interface RouteExports {
  memory: WebAssembly.Memory;
  routeIoReserve(n: number): number;
  routeTableReserve(n: number): number;
  cfgDecodeIo(len: number): number;
  slotsDecodeIo(len: number): number;
  loadDecodeIo(len: number): number;
  cfgField(which: number): number;
  routeSetInflight(slot: number, n: number): void;
  routeOutPtr(): number;
  routeAllowSlotsIo(count: number): void;
  routeFallbacksIo(engine: number, configured: number): number;
  routePrepareIo(bodyLen: number, endpoint: number): number;
  routeHashPtr(): number;
  routeHashCount(): number;
  routePromptBytes(): number;
  routeDecideIo(pin: bigint, tableLen: number): number;
  routeDecisionPtr(): number;
}

export type Outcome =
  | "load_only"
  | "prefix_hit"
  | "pinned"
  | "no_slot"
  | "bad_pin"
  | "no_pool"
  | "bad_request"
  | "no_config";

const OUTCOMES: Record<number, Outcome> = {
  0: "load_only",
  1: "prefix_hit",
  2: "pinned",
  [-1]: "no_slot",
  [-2]: "bad_pin",
};

export interface RouteDecision {
  outcome: Outcome;
  pool: number;
  /** Chosen slot (the decode slot in a disaggregated pool), -1 when none. */
  slot: number;
  /** Prefill slot in a disaggregated pool, else -1. */
  prefillSlot: number;
  cachedChunks: number;
  promptBytes: number;
  /** Bucket images the prefix walk read. */
  lookups: number;
  /** Chunk hashes of the rendered prompt (for speculative routes). */
  chunkHashes: BigUint64Array;
  /** Rank-header values the pool serves, for a bad-pin error; -1 when none. */
  rankLow: number;
  rankHigh: number;
}

export type Endpoint = "chat" | "completions";
const wasmPath = new URL("../../../build/kvroute-core.wasm", import.meta.url);

export class RoutingCore {
  readonly #ex: RouteExports;
  #buckets = 0;
  #loadedTable = -1;

  constructor(wasm: Uint8Array = readFileSync(wasmPath)) {
    this.#ex = instantiateSync<Record<string, unknown>>(wasm, {}).exports as unknown as RouteExports;
  }

  #write(bytes: Uint8Array): void {
    const ptr = this.#ex.routeIoReserve(bytes.length);
    new Uint8Array(this.#ex.memory.buffer).set(bytes, ptr);
  }

  /** Installs new images (as published under kvr.cfg / kvr.slots / kvr.load). Throws on a malformed image. */
  setImages(images: { cfg?: Uint8Array; slots?: Uint8Array; load?: Uint8Array }): void {
    const ex = this.#ex;
    for (const [name, bytes, decode] of [
      ["kvr.cfg", images.cfg, ex.cfgDecodeIo],
      ["kvr.slots", images.slots, ex.slotsDecodeIo],
      ["kvr.load", images.load, ex.loadDecodeIo],
    ] as const) {
      if (bytes === undefined) continue;
      this.#write(bytes);
      const r = decode(bytes.length);
      if (r < 0) throw new Error(`${name} image rejected by the routing core (code ${r})`);
    }
    if (images.cfg !== undefined) this.#buckets = ex.cfgField(1);
  }

  /**
   * Lays out every bucket once, for callers whose index does not change between calls (the
   * benchmark): routeLoaded() then costs what the filter's decision costs, without the
   * per-call table building route() does in JavaScript.
   */
  loadAllBuckets(bucket: (index: number) => Uint8Array | undefined): void {
    const images: Array<Uint8Array | undefined> = [];
    let total = this.#buckets * 8;
    for (let b = 0; b < this.#buckets; b++) {
      const img = bucket(b);
      images.push(img);
      total += img?.length ?? 0;
    }
    const ex = this.#ex;
    const base = ex.routeTableReserve(total);
    const mem = new Uint8Array(ex.memory.buffer);
    const dir = new DataView(ex.memory.buffer, base, this.#buckets * 8);
    let at = this.#buckets * 8;
    images.forEach((img, b) => {
      dir.setUint32(b * 8, img === undefined ? 0 : at, true);
      dir.setUint32(b * 8 + 4, img?.length ?? 0, true);
      if (img !== undefined) mem.set(img, base + at);
      at += img?.length ?? 0;
    });
    this.#loadedTable = total;
  }

  /** The decision over the buckets loadAllBuckets() laid out: outcome code, slot, cached chunks, bucket reads. */
  routeLoaded(
    body: Uint8Array,
    endpoint: Endpoint,
    pin = -1,
  ): { code: number; slot: number; cachedChunks: number; lookups: number } {
    if (this.#loadedTable < 0) throw new Error("loadAllBuckets() first");
    const ex = this.#ex;
    this.#write(body);
    const pool = ex.routePrepareIo(body.length, endpoint === "chat" ? 1 : 2);
    if (pool < 0) return { code: pool, slot: -1, cachedChunks: 0, lookups: 0 };
    const code = ex.routeDecideIo(BigInt(pin), this.#loadedTable);
    const d = new DataView(ex.memory.buffer, ex.routeDecisionPtr(), 16);
    return {
      code,
      slot: d.getInt32(0, true),
      cachedChunks: d.getInt32(8, true),
      lookups: d.getInt32(12, true),
    };
  }

  setLocalInflight(slot: number, n: number): void {
    this.#ex.routeSetInflight(slot, n);
  }

  /** Restricts later decisions to these slot ids (a gateway's subset hint); null lifts it. */
  allowSlots(ids: number[] | null): void {
    if (ids === null) {
      this.#ex.routeAllowSlotsIo(-1);
      return;
    }
    const ptr = this.#ex.routeIoReserve(ids.length * 4);
    new Int32Array(this.#ex.memory.buffer, ptr, ids.length).set(ids);
    this.#ex.routeAllowSlotsIo(ids.length);
  }

  /**
   * The fallback slots of the last decision, as the filter lists them after the pick for a pool
   * of `engine` (0 vLLM, 1 SGLang, 2 Dynamo) with destinationFallbacks = `configured`.
   */
  fallbacks(engine: number, configured: number): number[] {
    const n = this.#ex.routeFallbacksIo(engine, configured);
    return [...new Int32Array(this.#ex.memory.buffer, this.#ex.routeOutPtr(), n)];
  }

  /**
   * Routes one request body. `bucket(i)` returns the image of prefix-index bucket i (the value
   * of shared-data key kvr.b.<i>) or undefined. `pin` is a client rank-header value or -1.
   */
  route(
    body: Uint8Array,
    endpoint: Endpoint,
    bucket: (index: number) => Uint8Array | undefined,
    pin = -1,
  ): RouteDecision {
    const ex = this.#ex;
    this.#write(body);
    const pool = ex.routePrepareIo(body.length, endpoint === "chat" ? 1 : 2);
    const none = (outcome: Outcome): RouteDecision => ({
      outcome,
      pool,
      slot: -1,
      prefillSlot: -1,
      cachedChunks: 0,
      promptBytes: 0,
      lookups: 0,
      chunkHashes: new BigUint64Array(0),
      rankLow: -1,
      rankHigh: -1,
    });
    if (pool === -100) return none("no_config");
    if (pool === -101) return none("no_pool");
    if (pool < 0) return none("bad_request");
    const count = ex.routeHashCount();
    const hashes = new BigUint64Array(ex.memory.buffer, ex.routeHashPtr(), count).slice();
    // Lay out only the buckets this prompt's chunks fall into: directory, then images.
    const mask = BigInt(this.#buckets - 1);
    const wanted = new Map<number, Uint8Array>();
    for (const h of hashes) {
      const b = Number(h & mask);
      if (!wanted.has(b)) {
        const img = bucket(b);
        if (img !== undefined) wanted.set(b, img);
      }
    }
    let total = this.#buckets * 8;
    for (const img of wanted.values()) total += img.length;
    const base = ex.routeTableReserve(total);
    const mem = new Uint8Array(ex.memory.buffer);
    mem.fill(0, base, base + this.#buckets * 8);
    const dir = new DataView(ex.memory.buffer, base, this.#buckets * 8);
    let at = this.#buckets * 8;
    for (const [b, img] of wanted) {
      dir.setUint32(b * 8, at, true);
      dir.setUint32(b * 8 + 4, img.length, true);
      mem.set(img, base + at);
      at += img.length;
    }
    const code = ex.routeDecideIo(BigInt(pin), total);
    const d = new DataView(ex.memory.buffer, ex.routeDecisionPtr(), 24);
    return {
      outcome: OUTCOMES[code] ?? "no_slot",
      pool,
      slot: d.getInt32(0, true),
      prefillSlot: d.getInt32(4, true),
      cachedChunks: d.getInt32(8, true),
      promptBytes: ex.routePromptBytes(),
      lookups: d.getInt32(12, true),
      chunkHashes: hashes,
      rankLow: d.getInt32(16, true),
      rankHigh: d.getInt32(20, true),
    };
  }
}
