// Per-slot load and health gauges (the Grafana dashboard's per-slot panels), and how fresh each
// slot's KV-event stream is. Read from the model at scrape time like the rest of /metrics.
import { Counter, Gauge, type Registry } from "prom-client";
import type { SlotLoad } from "../model/slot-load.ts";
import type { StatusInput } from "./status.ts";

export function registerSlotLoadMetrics(registry: Registry, s: StatusInput): void {
  const perSlot = (name: string, help: string, value: (l: SlotLoad) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ["pool", "slot"],
      registers: [registry],
      collect() {
        this.reset();
        for (const slot of s.slots.present())
          this.set({ pool: slot.pool, slot: slot.key }, value(s.load.get(slot.id)));
      },
    });
  perSlot("kvroute_slot_healthy", "1 while the slot is routable, 0 once marked unhealthy.", (l) =>
    l.healthy ? 1 : 0,
  );
  perSlot("kvroute_slot_running", "Requests running on the slot (engine /metrics).", (l) => l.running);
  perSlot("kvroute_slot_waiting", "Requests queued on the slot (engine /metrics).", (l) => l.waiting);
  perSlot(
    "kvroute_slot_kv_usage_ratio",
    "KV-cache usage of the slot, 0..1 (engine /metrics).",
    (l) => l.kvUsage,
  );
  perSlot(
    "kvroute_slot_inflight",
    "Requests in flight on the slot summed over gateway reports.",
    (l) => l.inflight,
  );
  perSlot(
    "kvroute_slot_ttft_seconds",
    "Moving average of reported time to first token on the slot (0 before any report).",
    (l) => l.ttftMs / 1000,
  );

  new Gauge({
    name: "kvroute_kv_event_last_message_age_seconds",
    help: "Seconds since the slot's KV-event socket last delivered a message (absent before the first).",
    labelNames: ["slot"],
    registers: [registry],
    collect() {
      this.reset();
      const now = Date.now();
      for (const r of s.events.stats())
        if (r.lastMessageAt !== null) this.set({ slot: r.slotKey }, (now - r.lastMessageAt) / 1000);
    },
  });
  new Gauge({
    name: "kvroute_kv_event_last_seq",
    help: "Last KV-event sequence number consumed per slot (absent before the first batch).",
    labelNames: ["slot"],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of s.events.stats()) if (r.lastSeq !== null) this.set({ slot: r.slotKey }, r.lastSeq);
    },
  });
  new Counter({
    name: "kvroute_kv_event_missed_batches_total",
    help: "KV-event batches reported missing by sequence gaps, before any replay.",
    labelNames: ["slot"],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of s.events.stats()) this.inc({ slot: r.slotKey }, r.missedBatches);
    },
  });
}
