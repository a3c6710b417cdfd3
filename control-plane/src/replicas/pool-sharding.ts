// Sharding pools over replicas (`nats.shardPools`), assembled: who owns which pool
// (pool-shards.ts, from the replicas the exchange hears), the owner's relays of what its
// subscriptions apply, and the peers' application of them (kv-relay.ts) on `<prefix>.kv`.
// The composition (app.ts) subscribes the KV events of owned pools only, through `sink`.
import type { Logger } from "pino";
import type { EventSink } from "../vocabulary/kv-events.ts";
import { RelayApplier, RelayingSink } from "./kv-relay.ts";
import { PoolShards } from "./pool-shards.ts";
import { decodeRelayedEvents, encodeRelayedEvents } from "./replica-codec.ts";
import type { ReplicaExchange } from "./replica-exchange.ts";

/** The subject suffix of relayed KV events: `<prefix>.kv`. */
export const KV_SUBJECT = "kv";

export interface PoolShardingOptions {
  exchange: ReplicaExchange;
  pools: readonly string[];
  /** Where this replica's subscriptions and the peers' relays go (the index). */
  sink: EventSink;
  poolOf: (slotKey: string) => string | null;
  slotsOf: (pool: string) => readonly string[];
  /** Applies a relayed engine batch to the sink (events/relayed-batch.ts). */
  applyBatch: (sink: EventSink, slotKey: string, payload: Uint8Array) => boolean;
  /** This replica's share changed: subscribe to the pools gained, drop the pools lost. */
  changed: () => void;
  logger: Logger;
}

export class PoolSharding {
  readonly shards: PoolShards;
  /** What subscriptions feed: applies to the index and relays to the peers. */
  readonly sink: RelayingSink;
  readonly relayed: RelayApplier;

  constructor(o: PoolShardingOptions) {
    const { exchange, logger } = o;
    this.shards = new PoolShards({
      self: exchange.replicaId,
      pools: o.pools,
      live: () => exchange.shardingReplicas(),
      changed: (gained, lost) => {
        logger.info(
          { gained, lost, owned: this.shards.owned(), replicas: this.shards.replicas },
          "pool ownership changed",
        );
        o.changed();
      },
    });
    const owns = (pool: string) => this.shards.owns(pool);
    this.sink = new RelayingSink(o.sink, {
      poolOf: o.poolOf,
      owns,
      send: (relay) =>
        exchange.send(
          KV_SUBJECT,
          encodeRelayedEvents({ replica: exchange.replicaId, epoch: exchange.epoch, ...relay }),
        ),
    });
    // An owner heard within two intervals is alive (announcements come every interval); a peer
    // detects a loss after three, so a survivor's relays reach the others past this bound.
    const quiet = 2 * exchange.announceIntervalMs;
    this.relayed = new RelayApplier({
      owns,
      accepts: (pool, sender) => {
        const owner = this.shards.ownerOf(pool);
        return owner === sender || (owner !== null && exchange.silentForMs(owner) > quiet);
      },
      poolOf: o.poolOf,
      slotsOf: o.slotsOf,
      apply: (slotKey, payload) => o.applyBatch(o.sink, slotKey, payload),
      reset: (slotKey) => o.sink.rankReset(slotKey, "gap"),
    });
    exchange.listen(KV_SUBJECT, (m) => this.relayed.receive(decodeRelayedEvents(m)));
    exchange.watchPeers(() => this.shards.refresh());
  }

  owns(pool: string): boolean {
    return this.shards.owns(pool);
  }
}
