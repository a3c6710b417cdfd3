// The replica exchange's metrics (replicas/replica-exchange.ts), read at scrape time. Registered
// only when the configuration has `nats`: a single replica exports none of these names.
import { Counter, Gauge, type Registry } from "prom-client";
import type { ReplicaExchange } from "../replicas/replica-exchange.ts";

export function registerReplicaMetrics(registry: Registry, x: ReplicaExchange): void {
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
