// Folds discovery and scrapes into the slot table and load model: which endpoints exist (from
// discovery), which ranks each serves (configured, or read from its /metrics `engine`
// labels), and how loaded and healthy each rank is.
import type { EndpointConfig, PoolConfig } from "../config/schema.ts";
import type { ScrapeOutcome, ScrapeTarget } from "../vocabulary/load.ts";
import type { LoadModel } from "./slot-load.ts";
import type { Slot, SlotTable } from "./slot-table.ts";

export interface FleetHooks {
  slotsAdded(slots: Slot[], pool: PoolConfig): void;
  slotsRemoved(slots: Slot[], pool: PoolConfig): void;
}

interface KnownEndpoint {
  pool: PoolConfig;
  endpoint: EndpointConfig;
  target: ScrapeTarget;
}

export class Fleet {
  readonly #endpoints = new Map<string, KnownEndpoint>();

  constructor(
    private readonly slots: SlotTable,
    private readonly load: LoadModel,
    private readonly hooks: FleetHooks,
    private readonly now: () => number = Date.now,
  ) {}

  /** Discovery's current list of endpoints for a pool (replaces the previous list). */
  setEndpoints(pool: PoolConfig, endpoints: EndpointConfig[]): void {
    const listed = new Set(endpoints.map((e) => endpointKey(pool, e)));
    for (const [key, known] of this.#endpoints) {
      if (known.pool.name !== pool.name || listed.has(key)) continue;
      this.#endpoints.delete(key);
      const removed = this.slots.removeEndpoint(pool.name, known.endpoint.address);
      if (removed.length > 0) this.hooks.slotsRemoved(removed, pool);
    }
    for (const endpoint of endpoints) {
      const key = endpointKey(pool, endpoint);
      const previous = this.#endpoints.get(key);
      this.#endpoints.set(key, {
        pool,
        endpoint,
        target: {
          key,
          url: endpoint.metricsUrl ?? `http://${endpoint.address}/metrics`,
          modelName: undefined,
        },
      });
      if (
        Array.isArray(endpoint.ranks) &&
        (previous === undefined || previous.endpoint.ranks !== endpoint.ranks)
      ) {
        this.#applyRanks(pool, endpoint, endpoint.ranks);
      }
    }
  }

  scrapeTargets(): ScrapeTarget[] {
    return [...this.#endpoints.values()].map((e) => e.target);
  }

  /** Every endpoint's pool and HTTP address (the gateway's destination, where /v1/models is). */
  endpoints(): Array<{ pool: string; address: string }> {
    return [...this.#endpoints.values()].map((e) => ({ pool: e.pool.name, address: e.endpoint.address }));
  }

  onScrape(target: ScrapeTarget, outcome: ScrapeOutcome): void {
    const known = this.#endpoints.get(target.key);
    if (known === undefined) return;
    const { pool, endpoint } = known;
    if (!outcome.ok) {
      for (const slot of this.#slotsOf(pool, endpoint)) this.load.failed(slot.id);
      return;
    }
    const { ranks } = outcome.metrics;
    // "auto": the engine labels say which ranks this server runs. A page without engine
    // metrics (still starting) leaves the slots as they are.
    if (endpoint.ranks === "auto" && ranks.size > 0) this.#applyRanks(pool, endpoint, [...ranks.keys()]);
    const nowMs = this.now();
    for (const slot of this.#slotsOf(pool, endpoint)) {
      this.load.scraped(slot.id, ranks.get(slot.globalRank) ?? { running: 0, waiting: 0, kvUsage: 0 }, nowMs);
    }
  }

  /** Every endpoint has known ranks: the slot table is complete for the configured fleet. */
  ranksResolved(): boolean {
    return [...this.#endpoints.values()].every((e) => this.#slotsOf(e.pool, e.endpoint).length > 0);
  }

  #applyRanks(pool: PoolConfig, endpoint: EndpointConfig, ranks: number[]): void {
    const before = new Set(this.#slotsOf(pool, endpoint).map((s) => s.id));
    const added = this.slots.setEndpointRanks(pool, endpoint, ranks);
    const after = new Set(this.#slotsOf(pool, endpoint).map((s) => s.id));
    const removed = [...before].filter((id) => !after.has(id)).map((id) => this.slots.get(id) as Slot);
    if (removed.length > 0) this.hooks.slotsRemoved(removed, pool);
    if (added.length > 0) this.hooks.slotsAdded(added, pool);
  }

  #slotsOf(pool: PoolConfig, endpoint: EndpointConfig): Slot[] {
    return this.slots.present().filter((s) => s.pool === pool.name && s.address === endpoint.address);
  }
}

function endpointKey(pool: PoolConfig, endpoint: EndpointConfig): string {
  return `${pool.name}/${endpoint.address}`;
}
