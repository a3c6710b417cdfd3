// This replica's share of the pools when `nats.shardPools` is on (docs/operations.md "Sharding
// pools"): the owners computed from the replicas heard now (pool-owners.ts), and what changed
// since the last look. The replica ingests the KV events of the pools it owns and relays them
// (kv-relay.ts); the others' pools come from their owners. It starts owning every pool — it has
// heard no peer yet, so it is alone as far as it knows — which is also what it falls back to
// when NATS is gone long enough for every peer to fall silent: each replica then ingests
// everything itself, as without sharding.
import { poolOwners } from "./pool-owners.ts";

export interface PoolShardsOptions {
  self: string;
  /** The configured pools, by name. */
  pools: readonly string[];
  /** The replicas alive now that shard pools, this one included (replica-exchange.ts shardingReplicas). */
  live: () => readonly string[];
  /** Called after the owned set changed, with the pools gained and lost. */
  changed?: (gained: readonly string[], lost: readonly string[]) => void;
}

export interface PoolShardStats {
  /** Pools this replica took over (a peer left, or they are ours again) and gave up (a peer joined). */
  gained: number;
  lost: number;
}

export class PoolShards {
  readonly stats: PoolShardStats = { gained: 0, lost: 0 };
  #owners: Map<string, string | null>;
  #live: readonly string[];

  constructor(private readonly o: PoolShardsOptions) {
    this.#live = [o.self];
    this.#owners = poolOwners(o.pools, this.#live);
  }

  /** Recomputes the owners from the live set; tells `changed` when this replica's share moved. */
  refresh(): void {
    const live = [...new Set([this.o.self, ...this.o.live()])].sort();
    if (live.length === this.#live.length && live.every((r, i) => r === this.#live[i])) return;
    const before = this.owned();
    this.#live = live;
    this.#owners = poolOwners(this.o.pools, live);
    const after = new Set(this.owned());
    const gained = [...after].filter((p) => !before.includes(p));
    const lost = before.filter((p) => !after.has(p));
    if (gained.length === 0 && lost.length === 0) return;
    this.stats.gained += gained.length;
    this.stats.lost += lost.length;
    this.o.changed?.(gained, lost);
  }

  owns(pool: string): boolean {
    return this.#owners.get(pool) === this.o.self;
  }

  /** The replica that owns `pool` in this replica's view (null: not a configured pool). */
  ownerOf(pool: string): string | null {
    return this.#owners.get(pool) ?? null;
  }

  /** The pools this replica owns, in configuration order. */
  owned(): string[] {
    return this.o.pools.filter((p) => this.owns(p));
  }

  get pools(): readonly string[] {
    return this.o.pools;
  }

  /** The replicas the owners were computed from, sorted. */
  get replicas(): readonly string[] {
    return this.#live;
  }
}
