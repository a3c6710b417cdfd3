// The endpoint picker's counters (epp/server.ts `stats`), read at scrape time like the other
// metrics. Registered only when the configuration has `epp`: a control plane without a picker
// exports none of these names.
import { Counter, type Registry } from "prom-client";
import type { EppStats } from "../epp/server.ts";

export function registerEppMetrics(registry: Registry, stats: EppStats): void {
  new Counter({
    name: "kvroute_epp_streams_total",
    help: "ext_proc streams the endpoint picker accepted (one per gateway request).",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.streams);
    },
  });
  new Counter({
    name: "kvroute_epp_routed_total",
    help: "Requests the endpoint picker answered with a destination.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.routed);
    },
  });
  new Counter({
    name: "kvroute_epp_immediate_responses_total",
    help: "Requests the endpoint picker answered itself (ImmediateResponse), by HTTP status.",
    labelNames: ["status"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [status, n] of Object.entries(stats.immediate)) this.inc({ status }, n);
    },
  });
  new Counter({
    name: "kvroute_epp_invalid_streams_total",
    help: "ext_proc streams ended with INVALID_ARGUMENT (undecodable or out-of-order messages).",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.invalid);
    },
  });
  new Counter({
    name: "kvroute_epp_internal_errors_total",
    help: "ext_proc streams ended with INTERNAL (an exception inside the picker).",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.internalErrors);
    },
  });
  new Counter({
    name: "kvroute_epp_served_elsewhere_total",
    help: "Responses the gateway reports served by another endpoint than the first of the list.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.servedElsewhere);
    },
  });
  new Counter({
    name: "kvroute_epp_invalid_json_total",
    help: "Inference requests the endpoint picker answered 400 because the body is not JSON.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.invalidJson);
    },
  });
  new Counter({
    name: "kvroute_epp_unsupported_body_mode_total",
    help: "ext_proc streams refused (500) because the gateway's request_body_mode cannot carry a routing decision, by mode.",
    labelNames: ["mode"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [mode, n] of Object.entries(stats.unsupportedBodyMode)) this.inc({ mode }, n);
    },
  });
  new Counter({
    name: "kvroute_epp_objectives_total",
    help: "Requests naming a GAIE InferenceObjective: mapped to a priority level, or unknown (not in epp.objectives).",
    labelNames: ["result"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [result, n] of Object.entries(stats.objectives)) this.inc({ result }, n);
    },
  });
}
