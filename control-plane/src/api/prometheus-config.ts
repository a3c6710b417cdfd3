// Configuration reloads (docs/operations.md "Changing the configuration without a restart").
import { Counter, Gauge, type Registry } from "prom-client";
import { RELOAD_RESULTS, type ReloadStats } from "../config/reload-stats.ts";

export function registerConfigMetrics(registry: Registry, stats: ReloadStats): void {
  new Counter({
    name: "kvroute_config_reloads_total",
    help: "Configuration reloads by result: applied, partly_applied (some fields need a restart), refused (only restart-only fields changed), invalid (old configuration kept), unchanged.",
    labelNames: ["result"],
    registers: [registry],
    collect() {
      this.reset();
      for (const result of RELOAD_RESULTS) this.inc({ result }, stats.counts.get(result) ?? 0);
    },
  });
  new Gauge({
    name: "kvroute_config_restart_pending_fields",
    help: "Fields the configuration file changes that apply only on a restart (0 = the file runs as written).",
    registers: [registry],
    collect() {
      this.set(stats.restartPending.length);
    },
  });
}
