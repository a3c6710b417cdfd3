// The seam between where endpoints come from (a static list, Kubernetes EndpointSlices, an
// InferencePool) and the fleet model. A discovery source reports, per pool, the complete current
// list of endpoints; the fleet works out what was added or removed. The interface has a file of
// its own so the sources and the composition that loads them (discovery.ts) both point here.
import type { EndpointConfig, PoolConfig } from "../config/schema.ts";

export type EndpointsListener = (pool: PoolConfig, endpoints: EndpointConfig[]) => void;

export interface Discovery {
  /** Starts reporting; resolves once the first complete picture of every pool was reported. */
  start(onEndpoints: EndpointsListener): Promise<void>;
  stop(): Promise<void>;
}
