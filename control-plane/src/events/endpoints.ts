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

/** Splits `tcp://host:port`; null for other transports. */
function splitTcp(endpoint: string): { host: string; port: number } | null {
  if (!endpoint.startsWith("tcp://")) return null;
  const colon = endpoint.lastIndexOf(":");
  const port = Number(endpoint.slice(colon + 1));
  if (colon < 6 || !Number.isInteger(port)) return null;
  return { host: endpoint.slice(6, colon), port };
}

const WILDCARD_HOSTS = new Set(["*", "0.0.0.0", "::", "[::]"]);

/** A host as it goes into a ZMQ tcp endpoint (IPv6 literals in brackets). */
function zmqHost(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

/** Where to reach a socket the engine binds: its own host, unless it bound a wildcard. */
function connectTarget(offsetEndpoint: string, workerHost: string): string {
  const tcp = splitTcp(offsetEndpoint);
  if (tcp === null) return offsetEndpoint; // ipc/inproc: same path on this machine
  const host = WILDCARD_HOSTS.has(tcp.host) ? zmqHost(workerHost) : tcp.host;
  return `tcp://${host}:${tcp.port}`;
}

/**
 * The address kvroute's SUB socket uses for one rank, given the engine's configured
 * `endpoint` (as in --kv-events-config) and the worker's host:
 * - engine binds (`tcp://*:5557`): connect to `tcp://<worker host>:5557+rank`;
 * - engine connects (`tcp://kvroute:5557`): bind `tcp://*:5557+rank` here.
 */
export function subscriberEndpoint(
  engineEndpoint: string,
  workerHost: string,
  rank: number,
): { endpoint: string; mode: SubscriberMode } {
  const offset = offsetEndpoint(engineEndpoint, rank);
  if (publisherBinds(engineEndpoint)) return { endpoint: connectTarget(offset, workerHost), mode: "connect" };
  const tcp = splitTcp(offset);
  if (tcp === null) throw new Error(`cannot bind for KV event endpoint ${engineEndpoint}`);
  return { endpoint: `tcp://*:${tcp.port}`, mode: "bind" };
}

/** The replay endpoint kvroute connects to (the engine always binds its ROUTER). */
export function replayEndpoint(engineReplayEndpoint: string, workerHost: string, rank: number): string {
  return connectTarget(offsetEndpoint(engineReplayEndpoint, rank), workerHost);
}

/** The engine's --kv-events-config fields kvroute needs, verbatim. */
export interface EngineKvEventsConfig {
  endpoint: string;
  replayEndpoint?: string;
  topic: string;
}

/** Host part of an `ip:port` / `[v6]:port` / `name:port` address. */
export function hostOf(address: string): string {
  if (address.startsWith("[")) return address.slice(1, address.indexOf("]"));
  const colon = address.lastIndexOf(":");
  return colon < 0 ? address : address.slice(0, colon);
}

/**
 * Everything a RankSubscriber needs for one slot, from the engine's own config and its HTTP
 * address (whose host is where a wildcard-bound publisher is reached).
 */
export function subscriptionFor(
  slotKey: string,
  globalRank: number,
  engineAddress: string,
  cfg: EngineKvEventsConfig,
): {
  slotKey: string;
  rank: number;
  endpoint: string;
  mode: SubscriberMode;
  replayEndpoint: string | null;
  topic: string;
} {
  const host = hostOf(engineAddress);
  const sub = subscriberEndpoint(cfg.endpoint, host, globalRank);
  return {
    slotKey,
    rank: globalRank,
    endpoint: sub.endpoint,
    mode: sub.mode,
    replayEndpoint:
      cfg.replayEndpoint === undefined ? null : replayEndpoint(cfg.replayEndpoint, host, globalRank),
    topic: cfg.topic,
  };
}
