// The seam between where endpoints come from (a static list, Kubernetes EndpointSlices) and the
// fleet model. A discovery source reports, per pool, the complete current list of endpoints;
// the fleet works out what was added or removed.
import type { Config, EndpointConfig, PoolConfig } from "../config/schema.ts";

export type EndpointsListener = (pool: PoolConfig, endpoints: EndpointConfig[]) => void;

export interface Discovery {
  /** Starts reporting; resolves once the first complete picture of every pool was reported. */
  start(onEndpoints: EndpointsListener): Promise<void>;
  stop(): Promise<void>;
}

/** The endpoints written in the configuration, reported once. */
export class StaticDiscovery implements Discovery {
  constructor(private readonly pools: readonly PoolConfig[]) {}

  async start(onEndpoints: EndpointsListener): Promise<void> {
    for (const pool of this.pools) onEndpoints(pool, pool.endpoints);
  }

  async stop(): Promise<void> {}
}

/** The discovery a configuration asks for. */
export function discoveryFor(cfg: Config): Discovery {
  return new StaticDiscovery(cfg.pools);
}
