// The discovery a configuration asks for: the static list, Kubernetes EndpointSlices and GAIE
// InferencePools side by side, the Kubernetes ones loaded only when a pool uses them. What a
// source is (the interface) lives in source.ts.
import type { KubeConfig } from "@kubernetes/client-node";
import { type Logger, pino } from "pino";
import type { Config, PoolConfig } from "../config/schema.ts";
import type { Discovery, EndpointsListener } from "./source.ts";

/** The endpoints written in the configuration, reported once. */
export class StaticDiscovery implements Discovery {
  constructor(private readonly pools: readonly PoolConfig[]) {}

  async start(onEndpoints: EndpointsListener): Promise<void> {
    for (const pool of this.pools) onEndpoints(pool, pool.endpoints);
  }

  async stop(): Promise<void> {}
}

/** Several sources side by side, each for its own pools. */
export class CompositeDiscovery implements Discovery {
  constructor(private readonly sources: readonly Discovery[]) {}

  async start(onEndpoints: EndpointsListener): Promise<void> {
    await Promise.all(this.sources.map((s) => s.start(onEndpoints)));
  }

  async stop(): Promise<void> {
    await Promise.all(this.sources.map((s) => s.stop()));
  }
}

export interface DiscoveryOptions {
  logger?: Logger;
  /** For Kubernetes pools; default in-cluster, else ~/.kube/config. */
  kubeConfig?: KubeConfig;
}

/**
 * The discovery a configuration asks for: Kubernetes (Service EndpointSlices) for pools with
 * `discovery.kubernetes`, a GAIE InferencePool for `discovery.inferencePool`, static for the rest.
 */
export function discoveryFor(cfg: Config, opts: DiscoveryOptions = {}): Discovery {
  const kubernetes = cfg.pools.filter((p) => p.discovery?.kubernetes !== undefined);
  const inferencePools = cfg.pools.filter((p) => p.discovery?.inferencePool !== undefined);
  const fixed = cfg.pools.filter((p) => p.discovery === undefined);
  const k8sOpts = {
    logger: opts.logger ?? pino({ level: cfg.logLevel }),
    ...(opts.kubeConfig === undefined ? {} : { kubeConfig: opts.kubeConfig }),
  };
  const sources: Discovery[] = [];
  if (fixed.length > 0 || (kubernetes.length === 0 && inferencePools.length === 0))
    sources.push(new StaticDiscovery(fixed));
  if (kubernetes.length > 0) sources.push(new LazyKubernetesDiscovery(kubernetes, k8sOpts));
  if (inferencePools.length > 0) sources.push(new LazyInferencePoolDiscovery(inferencePools, k8sOpts));
  return sources.length === 1 ? (sources[0] as Discovery) : new CompositeDiscovery(sources);
}

/**
 * Loads the Kubernetes client only when a pool asks for it: importing @kubernetes/client-node
 * takes about a second, which static-only control planes (and their tests) should not pay.
 */
class LazyKubernetesDiscovery implements Discovery {
  #inner: Discovery | undefined;

  constructor(
    private readonly pools: readonly PoolConfig[],
    private readonly opts: { logger: Logger; kubeConfig?: KubeConfig },
  ) {}

  async start(onEndpoints: EndpointsListener): Promise<void> {
    const { KubernetesDiscovery } = await import("./kubernetes.ts");
    this.#inner = new KubernetesDiscovery(this.pools, this.opts);
    await this.#inner.start(onEndpoints);
  }

  async stop(): Promise<void> {
    await this.#inner?.stop();
  }
}

/** The InferencePool source, loaded on demand like the Kubernetes one. */
class LazyInferencePoolDiscovery implements Discovery {
  #inner: Discovery | undefined;

  constructor(
    private readonly pools: readonly PoolConfig[],
    private readonly opts: { logger: Logger; kubeConfig?: KubeConfig },
  ) {}

  async start(onEndpoints: EndpointsListener): Promise<void> {
    const { InferencePoolDiscovery } = await import("./inference-pool-discovery.ts");
    this.#inner = new InferencePoolDiscovery(this.pools, this.opts);
    await this.#inner.start(onEndpoints);
  }

  async stop(): Promise<void> {
    await this.#inner?.stop();
  }
}
