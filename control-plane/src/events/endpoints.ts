// Where a rank's KV events are, following the engines' own rules (vLLM ZmqEventPublisher,
// copied by SGLang): rank r publishes on `port + r` and replays on `replay_port + r`; the
// publisher binds when its endpoint has `*` or `::` or is ipc/inproc, and connects otherwise,
// in which case the subscriber (kvroute, centrally) must bind.

export type SubscriberMode = "connect" | "bind";

/** The engine's per-rank endpoint: port + rank for tcp, `_dp<rank>` suffix for inproc. */
export function offsetEndpoint(endpoint: string, rank: number): string {
  if (rank === 0) return endpoint;
  if (endpoint.includes("inproc")) return `${endpoint}_dp${rank}`;
  if (endpoint.includes("tcp")) {
    const colon = endpoint.lastIndexOf(":");
    const port = Number(endpoint.slice(colon + 1));
    if (colon < 0 || !Number.isInteger(port)) throw new Error(`no port in KV event endpoint ${endpoint}`);
    return `${endpoint.slice(0, colon)}:${port + rank}`;
  }
  // vLLM raises for this too: ipc endpoints have no per-rank form.
  throw new Error(`cannot offset KV event endpoint ${endpoint} by rank ${rank}`);
}

/** True when the engine binds its PUB socket (so kvroute connects). */
export function publisherBinds(endpoint: string): boolean {
  return (
    endpoint.includes("*") ||
    endpoint.includes("::") ||
    endpoint.startsWith("ipc://") ||
    endpoint.startsWith("inproc://")
  );
}

/**
 * The address kvroute's SUB socket uses for one rank, given the engine's configured
 * `endpoint` (as in --kv-events-config) and the worker's host:
 * - engine binds (`tcp://*:5557`): connect to `tcp://<host>:5557+rank`;
 * - engine connects (`tcp://router:5557`): bind `tcp://*:5557+rank` here.
 */
export function subscriberEndpoint(
  engineEndpoint: string,
  host: string,
  rank: number,
): { endpoint: string; mode: SubscriberMode } {
  const offset = offsetEndpoint(engineEndpoint, rank);
  if (publisherBinds(engineEndpoint)) {
    if (!offset.startsWith("tcp://")) return { endpoint: offset, mode: "connect" };
    const colon = offset.lastIndexOf(":");
    const h = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
    return { endpoint: `tcp://${h}${offset.slice(colon)}`, mode: "connect" };
  }
  const colon = offset.lastIndexOf(":");
  return { endpoint: `tcp://*${offset.slice(colon)}`, mode: "bind" };
}

/** The replay endpoint kvroute connects to (the engine always binds its ROUTER). */
export function replayEndpoint(engineReplayEndpoint: string, host: string, rank: number): string {
  const offset = offsetEndpoint(engineReplayEndpoint, rank);
  if (!offset.startsWith("tcp://")) return offset;
  const colon = offset.lastIndexOf(":");
  const h = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  return `tcp://${h}${offset.slice(colon)}`;
}
