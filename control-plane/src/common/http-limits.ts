// What one HTTP client may hold of the control plane: connections, and time to send a request.
// Defaults shared by the configuration (config/schema.ts `http`) and createHttpServer.

export interface HttpLimits {
  /**
   * Connections open at once; past it a new connection is closed as soon as it is accepted
   * (Node's server.maxConnections). A gateway holds about two: its leader's /v1/sync long poll
   * and the connection its reports go on. 1024 serves some 500 gateways with room for
   * Prometheus, probes and dashboards, and stays below the common open-file limit of 1024 plus
   * what the KV-event sockets and discovery use only where that limit was raised (containers
   * get 1 048 576).
   */
  maxConnections: number;
  /** Time a client has to send a request's headers (Node's server.headersTimeout). */
  headersTimeoutMs: number;
  /**
   * Time a client has to send a whole request, headers and body (Node's server.requestTimeout):
   * a slow or stalled upload is answered 408 and its connection closed. Only receiving counts:
   * once the request is complete the clock stops, so /v1/sync's long poll and the dashboard's
   * event stream hold their answers open as long as they need. 30 s moves a 16 MiB report (the
   * largest accepted) at 5 Mbit/s.
   */
  requestTimeoutMs: number;
}

export const HTTP_LIMIT_DEFAULTS: HttpLimits = {
  maxConnections: 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
};

/**
 * How often Node looks for requests past their timeout (createServer's
 * connectionsCheckingInterval, 30 s by default, which would let a stalled upload live up to a
 * minute under a 30 s timeout): a tenth of the shorter timeout, between 10 ms and 1 s.
 */
export function timeoutCheckIntervalMs(l: HttpLimits): number {
  return Math.max(10, Math.min(1_000, Math.floor(Math.min(l.headersTimeoutMs, l.requestTimeoutMs) / 10)));
}
