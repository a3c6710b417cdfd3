// Shed requests in the control plane: gateways report them with outcome `shed` (6), the priority
// byte and a slot of their pool; ReportStats counts them per pool and priority, leaves the slot's
// recent figures and the pool's hit ratio alone (no engine saw them), and /metrics shows them as
// kvroute_shed_requests_total{pool,priority}.
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { registerReportMetrics } from "../../control-plane/src/api/prometheus-reports.ts";
import { ReportStats } from "../../control-plane/src/api/report-stats.ts";
import type { StatusInput } from "../../control-plane/src/api/status.ts";
import type { FinishedRequest } from "../../control-plane/src/reports/report-codec.ts";

const request = (slot: number, outcome: number, priority: number, status = 200): FinishedRequest => ({
  slot,
  status,
  outcome,
  priority,
  promptBytes: outcome === 6 ? 0 : 1000,
  cachedBytes: outcome === 6 ? 0 : 500,
  ttftMs: 0,
  durationMs: 1,
  requestId: "",
});

describe("shed requests in gateway reports", () => {
  it("are counted per pool and priority, and change no slot's figures", async () => {
    const stats = new ReportStats((slot) => (slot < 4 ? "qwen" : "llama"));
    stats.observe({
      gateway: "gw",
      inflight: new Map(),
      speculative: [],
      finished: [
        request(0, 6, 0, 429),
        request(0, 6, 0, 429),
        request(1, 6, 1, 429),
        request(4, 6, 1, 429),
        request(2, 1, 2),
        request(0, 6, 7, 429), // a level this control plane does not know is shown, not dropped
      ],
    });
    expect(stats.pools.get("qwen")?.shedByPriority).toEqual({ standard: 2, sheddable: 1, level_7: 1 });
    expect(stats.pools.get("qwen")?.byOutcome).toEqual({ shed: 4, prefix_hit: 1 });
    expect(stats.pools.get("llama")?.shedByPriority).toEqual({ sheddable: 1 });
    expect(stats.pools.get("qwen")?.promptBytes).toBe(1000);
    expect([...stats.slots.keys()]).toEqual([2]);

    const registry = new Registry();
    registerReportMetrics(registry, { reports: stats, slots: new Map() } as unknown as StatusInput);
    const text = await registry.metrics();
    expect(text).toContain('kvroute_shed_requests_total{pool="qwen",priority="standard"} 2');
    expect(text).toContain('kvroute_shed_requests_total{pool="llama",priority="sheddable"} 1');
    expect(text).toContain('kvroute_routed_requests_total{pool="qwen",outcome="shed"} 4');
  });
});
