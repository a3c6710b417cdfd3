// Metrics from gateway reports: how many reports came and were refused, what the gateways
// decided (outcome per finished request), the bytes behind the pool's cache hit ratio,
// upstream connection failures per slot, and predicted vs served cached tokens per slot.
import { Counter, Gauge, type Registry } from "prom-client";
import type { ServedCache } from "../reports/served-cache.ts";
import type { StatusInput } from "./status.ts";

export function registerReportMetrics(registry: Registry, s: StatusInput): void {
  registerDecisionMetrics(registry, s);
  registerServedCacheMetrics(registry, s);
  registerUpstreamFailureMetrics(registry, s);
}

/** Reports accepted and refused, and what the gateways decided: outcomes, sessions, cache-hit bytes. */
function registerDecisionMetrics(registry: Registry, s: StatusInput): void {
  const r = s.reports;
  new Counter({
    name: "kvroute_reports_total",
    help: "Gateway reports accepted on POST /v1/report.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(r.accepted);
    },
  });
  new Counter({
    name: "kvroute_report_rejected_total",
    help: "Gateway reports refused, by reason (bad_report, unauthorized, too_large, internal).",
    labelNames: ["reason"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(r.rejected)) this.inc({ reason }, n);
    },
  });
  new Counter({
    name: "kvroute_routed_requests_total",
    help: "Finished requests reported by gateways, by pool and routing outcome.",
    labelNames: ["pool", "outcome"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [pool, p] of r.pools)
        for (const [outcome, n] of Object.entries(p.byOutcome)) this.inc({ pool, outcome }, n);
    },
  });
  new Counter({
    name: "kvroute_shed_requests_total",
    help: "Requests gateways answered 429 because every candidate slot of the pool was saturated, by pool and priority.",
    labelNames: ["pool", "priority"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [pool, p] of r.pools)
        for (const [priority, n] of Object.entries(p.shedByPriority)) this.inc({ pool, priority }, n);
    },
  });
  new Counter({
    name: "kvroute_session_requests_total",
    help: "Requests with a session header reported by gateways, by what happened to the session: new (no slot remembered), kept (its slot stayed), moved (its slot was no candidate or cost more than sessionMargin over the best).",
    labelNames: ["outcome"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [outcome, n] of Object.entries(r.sessions)) this.inc({ outcome }, n);
    },
  });
  new Gauge({
    name: "kvroute_sessions",
    help: "Sessions in the fleet's session table (bounded at 8192).",
    registers: [registry],
    collect() {
      this.set(s.sessions?.size ?? 0);
    },
  });
  new Counter({
    name: "kvroute_routed_prompt_bytes_total",
    help: "Prompt bytes of reported requests, per pool.",
    labelNames: ["pool"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [pool, p] of r.pools) this.inc({ pool }, p.promptBytes);
    },
  });
  new Counter({
    name: "kvroute_routed_cached_bytes_total",
    help: "Prompt bytes the gateway expected cached on the chosen slot, per pool.",
    labelNames: ["pool"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [pool, p] of r.pools) this.inc({ pool }, p.cachedBytes);
    },
  });
}

/** Predicted vs served cached tokens per slot. */
function registerServedCacheMetrics(registry: Registry, s: StatusInput): void {
  const r = s.reports;
  // Predicted vs served, per slot. served="known" pairs with kvroute_served_cached_tokens_total:
  // the two sum over the same requests.
  const eachSlotServed = (each: (labels: { pool: string; slot: string }, c: ServedCache) => void) => {
    for (const [id, sr] of r.slots) {
      const slot = s.slots.get(id);
      if (slot !== undefined) each({ pool: slot.pool, slot: slot.key }, sr.served);
    }
  };
  new Counter({
    name: "kvroute_predicted_cached_tokens_total",
    help:
      "Prompt tokens the gateway predicted cached on the chosen slot (estimated from bytes), per slot, " +
      "by whether the engine said what it served (served=known|unknown), or the gateway did not read the answer (served=unread).",
    labelNames: ["pool", "slot", "served"],
    registers: [registry],
    collect() {
      this.reset();
      eachSlotServed((l, c) => {
        this.inc({ ...l, served: "known" }, c.predictedKnownTokens);
        this.inc({ ...l, served: "unknown" }, c.predictedUnknownTokens);
        this.inc({ ...l, served: "unread" }, c.predictedUnreadTokens);
      });
    },
  });
  new Counter({
    name: "kvroute_served_cached_tokens_total",
    help: "Prompt tokens the engine reported served from its cache (usage.prompt_tokens_details.cached_tokens), per slot.",
    labelNames: ["pool", "slot"],
    registers: [registry],
    collect() {
      this.reset();
      eachSlotServed((l, c) => this.inc(l, c.servedTokens));
    },
  });
  new Counter({
    name: "kvroute_served_cache_requests_total",
    help: "Routed requests per slot, by whether the engine said how many cached tokens it served (served=known|unknown), or the gateway did not read the answer (served=unread: a stream outside its sample).",
    labelNames: ["pool", "slot", "served"],
    registers: [registry],
    collect() {
      this.reset();
      eachSlotServed((l, c) => {
        this.inc({ ...l, served: "known" }, c.known);
        this.inc({ ...l, served: "unknown" }, c.unknown);
        this.inc({ ...l, served: "unread" }, c.unread);
      });
    },
  });
}

function registerUpstreamFailureMetrics(registry: Registry, s: StatusInput): void {
  const r = s.reports;
  new Counter({
    name: "kvroute_upstream_failures_total",
    help: "Reported requests whose upstream connection failed (status 0), per slot.",
    labelNames: ["slot"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [id, sr] of r.slots) {
        const slot = s.slots.get(id);
        if (slot !== undefined && sr.upstreamFailures > 0) this.inc({ slot: slot.key }, sr.upstreamFailures);
      }
    },
  });
}
