// Which configuration changes apply without a restart. A live field only changes what the
// filters read from `kvr.cfg` (or the log level): publishing a new `kvr.cfg` applies it on every
// gateway within a sync, with the index, the slots and the gateways' state kept. A static pool's
// `endpoints` are live too: they go where a discovery's news goes (the fleet), as if Kubernetes
// had added or removed a pod. Every other field
// feeds a part built at start (listeners, discovery, the index's geometry, tokenizers, the
// endpoint picker, NATS), so it changes only on a restart; a reload keeps its running value.
import type { Config } from "./schema.ts";

type Pool = Config["pools"][number];

/** Routing fields read only from `kvr.cfg`. chunkSize re-keys the index; maxBodyBytes and
 * priorityHeader also configure the endpoint picker's embedded filter; sessionTtlMs sizes the
 * control plane's session table: those need a restart. */
const LIVE_ROUTING = [
  "overlapWeight",
  "decodeWeight",
  "inflightWeight",
  "temperature",
  "tierWeights",
  "rankHeaderPolicy",
  "failMode",
  "sessionHeader",
  "sessionMargin",
  "lora",
  "defaultPool",
] as const satisfies ReadonlyArray<keyof Config["routing"]>;

/** Per-pool fields read only from `kvr.cfg`; a pool is matched by name. */
const LIVE_POOL = [
  "policy",
  "shedding",
  "sglangBodyRank",
  "dynamoLegacyHeaders",
] as const satisfies ReadonlyArray<keyof Pool>;

export interface LiveChangeOptions {
  /** Static pools' `endpoints` apply live (false when the control plane runs a discovery of its own, e.g. tests'). */
  staticEndpoints?: boolean;
}

export interface LiveChange {
  /** What runs after the reload: the current configuration with the new file's live fields. */
  running: Config;
  /** Paths of the fields whose new value now runs, e.g. `routing.temperature`. */
  applied: string[];
  /** Paths of the fields the file changes that apply only on a restart (their old value runs). */
  refused: string[];
}

function copyField<T extends object>(to: T, from: T, key: keyof T): void {
  if (from[key] === undefined) delete to[key];
  else to[key] = structuredClone(from[key]);
}

type Endpoint = Pool["endpoints"][number];
const sameEndpoint = (a: Endpoint, b: Endpoint) => JSON.stringify(a) === JSON.stringify(b);

/** Splits the change from `current` to `next` into what applies now and what waits for a restart. */
export function liveChange(current: Config, next: Config, opts: LiveChangeOptions = {}): LiveChange {
  const running = structuredClone(current);
  // The endpoint objects the fleet was given are kept, not cloned: it tells an unchanged
  // endpoint by identity.
  running.pools.forEach((pool, i) => {
    pool.endpoints = (current.pools[i] as Pool).endpoints;
  });
  running.logLevel = next.logLevel;
  running.cache.speculativeTtlMs = next.cache.speculativeTtlMs;
  for (const key of LIVE_ROUTING) copyField(running.routing, next.routing, key);
  for (const pool of running.pools) {
    const wanted = next.pools.find((p) => p.name === pool.name);
    if (wanted === undefined) continue;
    for (const key of LIVE_POOL) copyField(pool, wanted, key);
    if (opts.staticEndpoints && pool.discovery === undefined && wanted.discovery === undefined)
      pool.endpoints = wanted.endpoints.map(
        (e) => pool.endpoints.find((old) => sameEndpoint(old, e)) ?? structuredClone(e),
      );
  }
  return { running, applied: diffPaths(current, running), refused: diffPaths(running, next) };
}

/** The paths where two parsed configurations differ: objects field by field, arrays of
 * objects element by element when their lengths agree, anything else as a whole. */
export function diffPaths(a: unknown, b: unknown, path = ""): string[] {
  if (Object.is(a, b)) return [];
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length || !a.every(isObject) || !b.every(isObject))
      return JSON.stringify(a) === JSON.stringify(b) ? [] : [path];
    return a.flatMap((x, i) => diffPaths(x, b[i], `${path}[${i}]`));
  }
  if (isObject(a) && isObject(b) && !Array.isArray(a) && !Array.isArray(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return keys.flatMap((k) => diffPaths(a[k], b[k], path === "" ? k : `${path}.${k}`));
  }
  return [path];
}
