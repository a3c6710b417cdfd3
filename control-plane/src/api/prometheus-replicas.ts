// The replica exchange's metrics (replicas/replica-exchange.ts), read at scrape time. Registered
// only when the configuration has `nats`: a single replica exports none of these names.
import { Counter, Gauge, type Registry } from "prom-client";
import type { ReplicaExchange } from "../replicas/replica-exchange.ts";

export function registerReplicaMetrics(registry: Registry, x: ReplicaExchange): void {
  const counter = (name: string, help: string, value: () => number) =>
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(value());
      },
    });
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
  counter("kvroute_replica_reports_relayed_total", "Gateway reports this replica relayed to its peers.", () => x.stats.relayed);
  counter("kvroute_replica_reports_applied_total", "Peers' relayed gateway reports applied here.", () => x.stats.applied);
  counter("kvroute_replica_nats_disconnects_total", "Times the NATS connection was lost.", () => x.stats.disconnects);
  new Counter({
    name: "kvroute_replica_messages_dropped_total",
    help: "Replica messages not sent or not applied, by reason (disconnected, too_large, publish_failed, unknown_slot_table, malformed, own_id, too_many_peers, internal).",
    labelNames: ["reason"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(x.stats.dropped)) this.inc({ reason }, n);
    },
  });
}
