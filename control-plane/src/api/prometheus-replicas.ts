// The replica exchange's metrics (replicas/replica-exchange.ts), read at scrape time. Registered
// only when the configuration has `nats`: a single replica exports none of these names.
import { Counter, Gauge, type Registry } from "prom-client";
import type { PoolSharding } from "../replicas/pool-sharding.ts";
import type { ReplicaExchange } from "../replicas/replica-exchange.ts";

export function registerReplicaMetrics(
  registry: Registry,
  x: ReplicaExchange,
  sharding: PoolSharding | null,
): void {
  if (sharding !== null) registerShardingMetrics(registry, sharding);
  new Gauge({
    name: "kvroute_replica_nats_connected",
    help: "1 while this replica is connected to NATS (sharing gateway reports with its peers), else 0.",
    registers: [registry],
    collect() {
      this.set(x.connected ? 1 : 0);
    },
  });
  new Gauge({
    name: "kvroute_replica_peers",
    help: "Peer replicas heard on NATS within three announce intervals.",
    registers: [registry],
    collect() {
      this.set(x.peers().length);
    },
  });
  new Counter({
    name: "kvroute_replica_reports_relayed_total",
    help: "Gateway reports this replica relayed to its peers.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(x.stats.relayed);
    },
  });
  new Counter({
    name: "kvroute_replica_reports_applied_total",
    help: "Peers' relayed gateway reports applied here.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(x.stats.applied);
    },
  });
  new Counter({
    name: "kvroute_replica_nats_disconnects_total",
    help: "Times the NATS connection was lost.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(x.stats.disconnects);
    },
  });
  new Counter({
    name: "kvroute_replica_messages_split_total",
    help: "Replica messages larger than the NATS server's max_payload, sent as parts.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(x.stats.messagesSplit);
    },
  });
  new Counter({
    name: "kvroute_replica_messages_joined_total",
    help: "Peers' replica messages that came as parts and were joined whole.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(x.stats.messagesJoined);
    },
  });
  new Counter({
    name: "kvroute_replica_messages_dropped_total",
    help: "Replica messages not sent or not applied, by reason (disconnected, too_large, publish_failed, unknown_slot_table, malformed, own_id, too_many_peers, part_duplicate, parts_expired, parts_evicted, internal).",
    labelNames: ["reason"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(x.stats.dropped)) this.inc({ reason }, n);
    },
  });
}

/** With `nats.shardPools`: this replica's share of the pools and the KV events relayed for them. */
function registerShardingMetrics(registry: Registry, s: PoolSharding): void {
  new Gauge({
    name: "kvroute_replica_pools_owned",
    help: "Pools whose KV events this replica ingests and relays to its peers (nats.shardPools).",
    registers: [registry],
    collect() {
      this.set(s.shards.owned().length);
    },
  });
  new Gauge({
    name: "kvroute_replica_pool_owner",
    help: "1 for each pool and the replica that owns it in this replica's view (nats.shardPools).",
    labelNames: ["pool", "owner"],
    registers: [registry],
    collect() {
      this.reset();
      for (const pool of s.shards.pools) this.set({ pool, owner: s.shards.ownerOf(pool) ?? "" }, 1);
    },
  });
  new Counter({
    name: "kvroute_replica_pool_handovers_total",
    help: "Pools this replica took over (gained: a peer fell silent) or gave up (lost: a peer joined).",
    labelNames: ["direction"],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ direction: "gained" }, s.shards.stats.gained);
      this.inc({ direction: "lost" }, s.shards.stats.lost);
    },
  });
  new Counter({
    name: "kvroute_replica_kv_relayed_total",
    help: "KV-event batches and resets of owned pools this replica relayed to its peers.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(s.sink.relayed);
    },
  });
  new Counter({
    name: "kvroute_replica_kv_applied_total",
    help: "Owners' relayed KV-event batches (kind=batch) and slot resets (kind=reset) applied here.",
    labelNames: ["kind"],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ kind: "batch" }, s.relayed.stats.batches);
      this.inc({ kind: "reset" }, s.relayed.stats.resets);
    },
  });
  new Counter({
    name: "kvroute_replica_kv_gaps_total",
    help: "Owners' relays found missing (NATS delivers at most once): the pool's slots were cleared here and refill.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(s.relayed.stats.gaps);
    },
  });
  new Counter({
    name: "kvroute_replica_kv_dropped_total",
    help: "Relayed KV events not applied, by reason (own_pool, not_owner, wrong_pool, undecodable).",
    labelNames: ["reason"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(s.relayed.stats.dropped)) this.inc({ reason }, n);
    },
  });
}
