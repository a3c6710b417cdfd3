// The control plane's Prometheus metrics (names documented in docs/operations.md). Values are
// read from the model at scrape time, so nothing on the hot paths updates a metric.
import { Counter, Gauge, Registry } from "prom-client";
import { buildInfo } from "../common/build-info.ts";
import { registerReportMetrics } from "./prometheus-reports.ts";
import { registerSlotLoadMetrics } from "./prometheus-slot-load.ts";
import type { StatusInput } from "./status.ts";

export function buildMetrics(s: StatusInput): Registry {
  const registry = new Registry();
  registerBuildInfo(registry);
  registerFleetMetrics(registry, s);
  registerSyncMetrics(registry, s);
  registerSourceMetrics(registry, s);
  registerSlotLoadMetrics(registry, s);
  registerReportMetrics(registry, s);
  return registry;
}

/** The Prometheus `*_build_info` convention: a constant 1 whose labels name the build. */
function registerBuildInfo(registry: Registry): void {
  const b = buildInfo();
  new Gauge({
    name: "kvroute_build_info",
    help: "Always 1; the labels name the running build (package version, git commit, filter module SHA-256).",
    labelNames: ["version", "commit", "wasm_sha256"],
    registers: [registry],
  }).set({ version: b.version, commit: b.commit ?? "unknown", wasm_sha256: b.wasmSha256 ?? "unknown" }, 1);
}

/** Slots by state and the prefix index's size. */
function registerFleetMetrics(registry: Registry, s: StatusInput): void {
  new Gauge({
    name: "kvroute_slots",
    help: "Slots by pool and state (healthy, unhealthy, gone).",
    labelNames: ["pool", "state"],
    registers: [registry],
    collect() {
      this.reset();
      for (const slot of s.slots.all()) {
        const state = !slot.present ? "gone" : s.load.get(slot.id).healthy ? "healthy" : "unhealthy";
        this.inc({ pool: slot.pool, state });
      }
    },
  });
  new Gauge({
    name: "kvroute_index_chunks",
    help: "Chunk hashes in the prefix index.",
    registers: [registry],
    collect() {
      this.set(s.index.chunks.size);
    },
  });
  new Gauge({
    name: "kvroute_index_blocks",
    help: "KV blocks indexed per slot.",
    labelNames: ["slot"],
    registers: [registry],
    collect() {
      this.reset();
      for (const slot of s.slots.present()) {
        const blocks = s.index.slot(slot.key);
        if (blocks !== undefined) this.set({ slot: slot.key }, blocks.blockCount);
      }
    },
  });
}

/** The sync log's version and the gateways that poll it. */
function registerSyncMetrics(registry: Registry, s: StatusInput): void {
  new Gauge({
    name: "kvroute_sync_version",
    help: "Newest published shared-data version.",
    registers: [registry],
    collect() {
      this.set(s.log.version);
    },
  });
  new Gauge({
    name: "kvroute_sync_gateways",
    help: "Gateways that polled /v1/sync recently.",
    registers: [registry],
    collect() {
      this.set(s.gateways.list().length);
    },
  });
  new Gauge({
    name: "kvroute_sync_gateway_lag_versions",
    help: "Versions a gateway is behind the newest publication.",
    labelNames: ["gateway"],
    registers: [registry],
    collect() {
      this.reset();
      for (const g of s.gateways.list()) this.set({ gateway: g.id }, s.log.version - g.version);
    },
  });
}

/** The sources: KV events per rank (received, dropped, gaps, replays, index resets), scrape failures. */
function registerSourceMetrics(registry: Registry, s: StatusInput): void {
  const eventsByRank = () => s.events.stats();
  new Counter({
    name: "kvroute_kv_events_total",
    help: "KV events applied, per slot and event type.",
    labelNames: ["slot", "type"],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of eventsByRank())
        for (const [type, n] of Object.entries(r.events)) this.inc({ slot: r.slotKey, type }, n);
    },
  });
  new Counter({
    name: "kvroute_kv_events_dropped_total",
    help: "KV-event messages or events dropped, per slot and reason.",
    labelNames: ["slot", "reason"],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of eventsByRank())
        for (const [reason, n] of Object.entries(r.dropped)) this.inc({ slot: r.slotKey, reason }, n ?? 0);
    },
  });
  new Counter({
    name: "kvroute_kv_event_gaps_total",
    help: "Sequence gaps detected per slot.",
    labelNames: ["slot"],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of eventsByRank()) this.inc({ slot: r.slotKey }, r.gaps);
    },
  });
  new Counter({
    name: "kvroute_kv_event_replays_total",
    help: "Replays requested per slot and result.",
    labelNames: ["slot", "result"],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of eventsByRank()) {
        this.inc({ slot: r.slotKey, result: "ok" }, r.replays.ok);
        this.inc({ slot: r.slotKey, result: "failed" }, r.replays.failed);
      }
    },
  });
  new Counter({
    name: "kvroute_kv_index_resets_total",
    help: "Times a slot's index was cleared (engine restart, uncovered gap), per slot and reason.",
    labelNames: ["slot", "reason"],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of eventsByRank())
        for (const [reason, n] of Object.entries(r.resets)) this.inc({ slot: r.slotKey, reason }, n);
    },
  });
  new Gauge({
    name: "kvroute_slot_scrape_failures",
    help: "Consecutive failed /metrics scrapes per slot.",
    labelNames: ["slot"],
    registers: [registry],
    collect() {
      this.reset();
      for (const slot of s.slots.present())
        this.set({ slot: slot.key }, s.load.get(slot.id).consecutiveFailures);
    },
  });
}
