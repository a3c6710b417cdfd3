// kvroute's control plane, assembled around the virtual-time simulator instead of sockets: the
// real config schema, slot table, load model, prefix index (real detokenizer, the core's chunk
// hashing) and image encoders, fed with what the engines publish — KV events through their msgpack
// wire form and the real batch decoder, metrics as a scrape would read them — in virtual time.
// What a gateway would find in shared data is then `images()` and `bucket(i)`.
import type { EngineLoad } from "../../../control-plane/sim/engine.ts";
import { encodeEventBatch, type KvEvent as SimKvEvent } from "../../../control-plane/sim/kv-events.ts";
import { parseConfig } from "../../../control-plane/src/config/load-config.ts";
import type { Config } from "../../../control-plane/src/config/schema.ts";
import { feedChunks, initialState } from "../../../control-plane/src/core/kvroute-core.ts";
import { decodeBatch } from "../../../control-plane/src/events/batch-decoder.ts";
import { PrefixIndex } from "../../../control-plane/src/index/prefix-index.ts";
import { LoadModel } from "../../../control-plane/src/model/slot-load.ts";
import { type Slot, SlotTable } from "../../../control-plane/src/model/slot-table.ts";
import { loadPoolTokens, type PoolTokens } from "../../../control-plane/src/pools/pool-tokens.ts";
import {
  encodeCfgImage,
  encodeLoadImage,
  encodeSlotsImage,
} from "../../../control-plane/src/publish/images.ts";
import { MODEL, QWEN3_DIR } from "../tokens.ts";

export interface SimControlPlaneOptions {
  workers: number;
  ranksPerWorker: number;
  /** Engine publish → visible in the gateway's shared data (ms of virtual time). */
  kvEventDelayMs: number;
  /** Extra routing settings (weights, temperature…) merged into the config's `routing`. */
  routing?: Record<string, unknown>;
  /** The config's `load` section (scrape interval…); defaults otherwise. */
  load?: Record<string, unknown>;
}

const GATEWAY = "bench-gateway";
const MAX_SLOTS = 64;
let poolTokens: PoolTokens | undefined;

export function benchConfig(o: SimControlPlaneOptions): Config {
  return parseConfig(
    {
      pools: [
        {
          name: "qwen3",
          models: [MODEL],
          tokenizer: QWEN3_DIR,
          engine: "vllm",
          // One API server per worker serving its 4 local ranks (vLLM hybrid LB, REFERENCE §1.2).
          dpMode: "hybrid",
          blockSize: 16,
          endpoints: Array.from({ length: o.workers }, (_, w) => ({
            address: `10.0.0.${w + 1}:8000`,
            ranks: Array.from({ length: o.ranksPerWorker }, (_, i) => w * o.ranksPerWorker + i),
            startRank: w * o.ranksPerWorker,
          })),
        },
      ],
      routing: o.routing ?? {},
      load: o.load ?? {},
    },
    "quality bench",
    {},
  );
}

interface PendingBatch {
  visibleMs: number;
  rank: number;
  payload: Buffer;
}

export class SimControlPlane {
  readonly cfg: Config;
  readonly slots = new SlotTable(MAX_SLOTS);
  readonly load: LoadModel;
  readonly index: PrefixIndex;
  /** Sim rank → slot (ids are assigned by the slot table, not assumed). */
  readonly slotOfRank: Slot[] = [];
  readonly #buckets = new Map<number, Uint8Array>();
  readonly #pending: PendingBatch[] = [];
  #nowMs = 0;
  readonly #cfgImage: Uint8Array;
  decodeErrors = 0;

  constructor(readonly opts: SimControlPlaneOptions) {
    this.cfg = benchConfig(opts);
    const pool = this.cfg.pools[0];
    if (pool === undefined) throw new Error("no pool");
    poolTokens ??= loadPoolTokens(pool);
    const tokens = poolTokens;
    if (tokens.detokenize === null || tokens.segmentTemplate === null)
      throw new Error(`Qwen3 tokenizer unusable for kvroute: ${tokens.problems.join("; ")}`);
    this.load = new LoadModel(this.cfg.load.unhealthyAfter);
    this.index = new PrefixIndex({
      buckets: this.cfg.cache.buckets,
      ways: this.cfg.cache.ways,
      maxSlots: MAX_SLOTS,
      now: () => this.#nowMs,
    });
    const chunk = this.cfg.routing.chunkSize;
    for (const endpoint of pool.endpoints) {
      const ranks = endpoint.ranks === "auto" ? [] : endpoint.ranks;
      for (const slot of this.slots.setEndpointRanks(pool, endpoint, ranks)) {
        this.slotOfRank[slot.globalRank] = slot;
        this.index.addSlot({
          slotKey: slot.key,
          slotId: slot.id,
          model: MODEL,
          hasher: { initialState, feed: (s, b) => feedChunks(s, b, chunk) },
          detokenize: tokens.detokenize,
        });
      }
    }
    this.#cfgImage = encodeCfgImage(this.cfg, this.index.slotWords, new Map([[pool.name, tokens.rendering]]));
  }

  /** An engine published a batch at `atMs`; the index sees it `kvEventDelayMs` later. */
  publish(rank: number, events: SimKvEvent[], atMs: number): void {
    const payload = encodeEventBatch(atMs / 1000, events, rank, "map");
    this.#pending.push({ visibleMs: atMs + this.opts.kvEventDelayMs, rank, payload });
  }

  /** Applies every batch visible by `nowMs`, expires speculative routes, refreshes bucket images. */
  advance(nowMs: number): void {
    this.#nowMs = nowMs;
    let i = 0;
    for (; i < this.#pending.length; i++) {
      const p = this.#pending[i] as PendingBatch;
      if (p.visibleMs > nowMs) break;
      const r = decodeBatch(p.payload);
      if (!r.ok) {
        this.decodeErrors++;
        continue;
      }
      const key = (this.slotOfRank[p.rank] as Slot).key;
      const meta = { seq: 0, ts: r.batch.ts, receivedAt: p.visibleMs, replayed: false };
      for (const e of r.batch.events) this.index.event(key, e, meta);
    }
    if (i > 0) this.#pending.splice(0, i);
    this.index.chunks.expire(nowMs);
    for (const [key, image] of this.index.takeDirtyImages()) this.#buckets.set(Number(key.slice(6)), image);
  }

  /** A metrics scrape of every rank plus this gateway's in-flight report. */
  scrape(nowMs: number, loads: readonly EngineLoad[], inflightByRank: readonly number[]): void {
    const inflight = new Map<number, number>();
    for (const l of loads) {
      const slot = this.slotOfRank[l.rank] as Slot;
      this.load.scraped(slot.id, { running: l.running, waiting: l.waiting, kvUsage: l.kvUsage }, nowMs);
      inflight.set(slot.id, inflightByRank[l.rank] ?? 0);
    }
    this.load.gatewayInflight(GATEWAY, inflight, nowMs);
  }

  /** A gateway's speculative route (DESIGN §3): these chunks count as held by `rank` for the TTL. */
  speculate(chunkHashes: ArrayLike<bigint>, rank: number, nowMs: number): void {
    const slot = (this.slotOfRank[rank] as Slot).id;
    const ttl = this.cfg.cache.speculativeTtlMs;
    for (let k = 0; k < chunkHashes.length; k++)
      this.index.chunks.speculate(chunkHashes[k] as bigint, k + 1, slot, nowMs, nowMs + ttl);
  }

  images(): { cfg: Uint8Array; slots: Uint8Array; load: Uint8Array } {
    const all = this.slots.all();
    return {
      cfg: this.#cfgImage,
      slots: encodeSlotsImage(all, () => 0),
      load: encodeLoadImage(all, (id) => this.load.get(id)),
    };
  }

  bucket(index: number): Uint8Array | undefined {
    return this.#buckets.get(index);
  }
}
