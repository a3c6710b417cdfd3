// The HTTP listener's own counters (http-server.ts `stats`): what its limits turned away, so a
// cap that starts refusing gateways, or a client that keeps stalling uploads, shows on a graph
// and not only in a log line per interval.
import { Counter, type Registry } from "prom-client";
import type { HttpServerStats } from "./http-server.ts";

export function registerHttpMetrics(registry: Registry, stats: HttpServerStats): void {
  new Counter({
    name: "kvroute_http_connections_refused_total",
    help: "Connections closed as soon as accepted because http.maxConnections were open.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.connectionsRefused);
    },
  });
  new Counter({
    name: "kvroute_http_requests_cut_total",
    help: "Requests that never arrived whole: aborted by the client, or past http.headersTimeoutMs / requestTimeoutMs (timeout).",
    labelNames: ["reason"],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ reason: "aborted" }, stats.requestsAborted);
      this.inc({ reason: "timeout" }, stats.requestsTimedOut);
    },
  });
  new Counter({
    name: "kvroute_http_handler_failures_total",
    help: "Requests whose handler failed (answered 500): a bug.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.handlerFailures);
    },
  });
}
