// The slot table: every routable (endpoint, DP rank) with a stable numeric id — the bit the
// prefix-index bitmaps use. Ids are never reused within an epoch (a gateway may still hold
// bucket images naming an old id), so the table is bounded by maxSlots and a removed slot
// keeps its id as a tombstone.
import type { EndpointConfig, PoolConfig } from "../config/schema.ts";

export type SlotRole = "aggregated" | "prefill" | "decode";

export interface Slot {
  id: number;
  /** `<pool>/<address>#<global rank>`: stable identity across discovery refreshes. */
  key: string;
  pool: string;
  /** Engine HTTP `ip:port`: the value of x-gateway-destination-endpoint. */
  address: string;
  globalRank: number;
  /** What the rank header carries: the global rank (internal LB), the local index (hybrid), or null (external LB: the port is the rank). */
  headerRank: number | null;
  role: SlotRole;
  /** Dynamo worker instance id. */
  workerId: bigint | null;
  /** The engine's KV-event config (as in its --kv-events-config); events/endpoints.ts derives this rank's sockets. */
  kvEvents: { endpoint: string; replayEndpoint?: string; topic: string } | null;
  /** False once discovery dropped it: kept as a tombstone so its id is not reused. */
  present: boolean;
}

export class SlotTableFullError extends Error {}

export function headerRankFor(pool: PoolConfig, endpoint: EndpointConfig, globalRank: number): number | null {
  if (pool.engine !== "vllm") return globalRank;
  switch (pool.dpMode) {
    case "internal":
      return globalRank;
    case "hybrid":
      // startRank is required for hybrid endpoints (config schema, Kubernetes discovery): the
      // lowest rank seen is not the start rank when that rank's engine is missing.
      return endpoint.startRank === undefined ? null : globalRank - endpoint.startRank;
    case "external":
      return null;
  }
}

export class SlotTable {
  readonly #slots: Slot[] = [];
  readonly #byKey = new Map<string, Slot>();
  #changed = true;

  constructor(readonly maxSlots: number) {}

  /** Makes exactly these ranks of an endpoint present; returns the slots that are new. */
  setEndpointRanks(pool: PoolConfig, endpoint: EndpointConfig, ranks: number[]): Slot[] {
    const wanted = new Set(
      pool.useRanks === undefined ? ranks : ranks.filter((r) => pool.useRanks?.includes(r)),
    );
    const added: Slot[] = [];
    for (const slot of this.#slots) {
      if (
        slot.pool === pool.name &&
        slot.address === endpoint.address &&
        slot.present &&
        !wanted.has(slot.globalRank)
      ) {
        slot.present = false;
        this.#changed = true;
      }
    }
    for (const rank of [...wanted].sort((a, b) => a - b)) {
      const key = `${pool.name}/${endpoint.address}#${rank}`;
      const existing = this.#byKey.get(key);
      if (existing !== undefined) {
        if (!existing.present) {
          existing.present = true;
          this.#changed = true;
          added.push(existing);
        }
        continue;
      }
      if (this.#slots.length >= this.maxSlots) {
        throw new SlotTableFullError(`slot table full (${this.maxSlots} slots): cannot add ${key}`);
      }
      const slot: Slot = {
        id: this.#slots.length,
        key,
        pool: pool.name,
        address: endpoint.address,
        globalRank: rank,
        headerRank: headerRankFor(pool, endpoint, rank),
        role: endpoint.role,
        workerId: endpoint.workerId === undefined ? null : BigInt(endpoint.workerId),
        kvEvents: endpoint.kvEvents ?? null,
        present: true,
      };
      this.#slots.push(slot);
      this.#byKey.set(key, slot);
      this.#changed = true;
      added.push(slot);
    }
    return added;
  }

  /** Removes every rank of an endpoint that discovery no longer lists. */
  removeEndpoint(poolName: string, address: string): Slot[] {
    const removed: Slot[] = [];
    for (const slot of this.#slots) {
      if (slot.pool === poolName && slot.address === address && slot.present) {
        slot.present = false;
        removed.push(slot);
        this.#changed = true;
      }
    }
    return removed;
  }

  get(id: number): Slot | undefined {
    return this.#slots[id];
  }

  byKey(key: string): Slot | undefined {
    return this.#byKey.get(key);
  }

  /** All slots including tombstones, in id order (the order of the shared-data image). */
  all(): readonly Slot[] {
    return this.#slots;
  }

  present(): Slot[] {
    return this.#slots.filter((s) => s.present);
  }

  /** True once after any change: the publisher re-encodes the slot image. */
  takeChanged(): boolean {
    const c = this.#changed;
    this.#changed = false;
    return c;
  }
}
