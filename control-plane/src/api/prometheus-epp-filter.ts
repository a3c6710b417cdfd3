// The endpoint picker's embedded filter's own stats on the control plane's /metrics, under the
// names an Envoy running the filter exports them (docs/operations.md "Filter stats (Envoy)":
// `kvroute.requests.prefix_hit` → `kvroute_requests_prefix_hit`, no `_total`), so the
// dashboard's filter panels read a picker as they read an Envoy. Histograms are exported as
// summaries (`_sum`, `_count`): the Node host keeps no buckets. A name the control plane exports
// itself (`kvroute_sync_version`, its newest version) stays the control plane's; stats the filter
// defines after start-up (`kvroute.shed.<pool>.<priority>`) are not exported.
import type { Metric, Registry } from "prom-client";

/** The embedded filter's stats, as the Node host keeps them (host/metrics.ts). */
export interface FilterStatsView {
  counter(name: string): bigint | undefined;
  gauge(name: string): bigint | undefined;
  histogram(name: string): { count: number; sum: bigint } | undefined;
  /** Envoy's /stats text: `wasmcustom.<name>: <value>` per line. */
  stats(): string;
}

const promName = (n: string) => n.replace(/[^a-zA-Z0-9_:]/g, "_");

export function registerEmbeddedFilterMetrics(registry: Registry, host: FilterStatsView): void {
  for (const line of host.stats().split("\n")) {
    const m = /^wasmcustom\.(\S+): (count=)?/.exec(line);
    if (m === null) continue;
    const stat = m[1] as string;
    const name = promName(stat);
    if (registry.getSingleMetric(name) !== undefined) continue;
    const kind = m[2] !== undefined ? "summary" : host.counter(stat) !== undefined ? "counter" : "gauge";
    const help = `The endpoint picker's embedded filter: ${stat} (as an Envoy exports it).`;
    const get = async () => {
      const values =
        kind === "summary"
          ? [
              { metricName: `${name}_sum`, value: Number(host.histogram(stat)?.sum ?? 0n), labels: {} },
              { metricName: `${name}_count`, value: host.histogram(stat)?.count ?? 0, labels: {} },
            ]
          : [
              {
                value: Number((kind === "counter" ? host.counter(stat) : host.gauge(stat)) ?? 0n),
                labels: {},
              },
            ];
      return { name, help, type: kind, values, aggregator: "sum" };
    };
    registry.registerMetric({ name, help, type: kind, get, reset() {} } as unknown as Metric<string>);
  }
}
