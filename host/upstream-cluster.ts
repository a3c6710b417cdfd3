// An upstream cluster as Envoy balances it, for the module's proxy_http_call and the gateway's
// default route: endpoints at priority levels (LocalityLbEndpoints.priority), optional active
// HTTP health checking (HealthCheck.http_health_check), and Envoy's priority load with the
// default overprovisioning factor 1.4 and panic threshold 50 %, then round robin inside the
// chosen level. Without health checking every host counts as healthy — as in Envoy, where a
// cluster then never fails over to a lower priority (nothing tells it a host is gone).
//
// Health checking follows Envoy's HealthCheckerImplBase: a host is unhealthy until its first
// check (the cluster's initial health check), the first check's result applies at once; after
// that `unhealthyThreshold` consecutive network failures (refused, reset, timeout) or one answer
// outside the expected statuses (200) mark it unhealthy, `healthyThreshold` consecutive successes
// healthy again. The check is GET `path` with Host = the cluster name. Simplified: no interval
// jitter, no no_traffic_interval, one check at a time per host.
import http from "node:http";
import type { HeaderMap } from "./header-map.ts";
import { addressString, parseDestination } from "./original-dst.ts";

export interface ClusterAddress {
  host: string;
  port: number;
}

export interface HealthCheckConfig {
  path: string;
  intervalMs: number;
  timeoutMs: number;
  unhealthyThreshold: number;
  healthyThreshold: number;
}

export interface ClusterEndpoint {
  address: string | ClusterAddress;
  /** 0 is the highest priority (Envoy: LocalityLbEndpoints.priority). */
  priority?: number;
}

export interface ClusterSpec {
  endpoints: Array<string | ClusterAddress | ClusterEndpoint>;
  healthCheck?: HealthCheckConfig;
  /**
   * load_balancing_policy envoy.load_balancing_policies.override_host with a header source: the
   * first value of this request header lists hosts ("ip:port[,ip:port…]"); the first that is one
   * of this cluster's endpoints (Envoy's crossPriorityHostMap, keyed by "ip:port") is chosen,
   * else the fallback policy (here the cluster's own balancing) picks
   * (source/extensions/load_balancing_policies/override_host/load_balancer.cc). A header naming
   * an address outside the cluster therefore never leaves the cluster.
   */
  overrideHostHeader?: string;
  /**
   * type ORIGINAL_DST with original_dst_lb_config.use_http_header: the host is whatever single
   * literal ip:port this header holds (endpoints must be empty); anything else selects no host.
   */
  originalDstHeader?: string;
}

/** The host a cluster chose for one request, as the router needs it. */
export interface HostChoice {
  target: ClusterAddress | null;
  /** ORIGINAL_DST: the header was present but not one literal ip:port (original_dst_host_invalid). */
  originalDstHostInvalid?: boolean;
}

interface UpstreamHost {
  address: ClusterAddress;
  priority: number;
  healthy: boolean;
  successes: number;
  failures: number;
  /** The next check's timer. */
  timer?: NodeJS.Timeout;
}

/** Envoy's default overprovisioning factor (1.4) and panic threshold (50 %). */
const OVERPROVISIONING = 1.4;
const PANIC_THRESHOLD = 0.5;

export function parseHostPort(s: string): ClusterAddress {
  const i = s.lastIndexOf(":");
  const host = s.slice(0, i).replace(/^\[|\]$/g, "");
  const port = Number(s.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port) || port <= 0 || port > 65535) throw new Error(`bad address ${s}`);
  return { host, port };
}

function toEndpoint(e: string | ClusterAddress | ClusterEndpoint): {
  address: ClusterAddress;
  priority: number;
} {
  if (typeof e === "string") return { address: parseHostPort(e), priority: 0 };
  if ("address" in e)
    return {
      address: typeof e.address === "string" ? parseHostPort(e.address) : e.address,
      priority: e.priority ?? 0,
    };
  return { address: e, priority: 0 };
}

export class UpstreamCluster {
  readonly #hosts: UpstreamHost[];
  /** Priority levels in order, each with its hosts. */
  readonly #levels: UpstreamHost[][];
  readonly #next = new Map<number, number>();
  /** Endpoints by Envoy's address string, for override_host. */
  readonly #byAddress = new Map<string, UpstreamHost>();
  readonly #overrideHostHeader: string | undefined;
  readonly #originalDstHeader: string | undefined;
  #closed = false;

  constructor(
    readonly name: string,
    spec: string | ClusterAddress | ClusterSpec,
  ) {
    const endpoints =
      typeof spec === "object" && "endpoints" in spec ? spec.endpoints.map(toEndpoint) : [toEndpoint(spec)];
    const full = typeof spec === "object" && "endpoints" in spec ? spec : undefined;
    this.#overrideHostHeader = full?.overrideHostHeader?.toLowerCase();
    this.#originalDstHeader = full?.originalDstHeader?.toLowerCase();
    if (this.#originalDstHeader !== undefined && endpoints.length > 0)
      throw new Error(`cluster ${name}: an ORIGINAL_DST cluster has no endpoints`);
    if (this.#originalDstHeader === undefined && endpoints.length === 0)
      throw new Error(`cluster ${name} has no endpoints`);
    const checked = typeof spec === "object" && "endpoints" in spec && spec.healthCheck !== undefined;
    this.#hosts = endpoints.map((e) => ({ ...e, healthy: !checked, successes: 0, failures: 0 }));
    const priorities = [...new Set(this.#hosts.map((h) => h.priority))].sort((a, b) => a - b);
    this.#levels = priorities.map((p) => this.#hosts.filter((h) => h.priority === p));
    for (const h of this.#hosts) this.#byAddress.set(addressString(h.address), h);
    if (checked)
      for (const h of this.#hosts)
        this.#check(h, (spec as ClusterSpec).healthCheck as HealthCheckConfig, true);
  }

  /** The host for the next call or connection. */
  pick(): ClusterAddress {
    if (this.#hosts.length === 0)
      throw new Error(`cluster ${this.name} (ORIGINAL_DST) has no hosts to balance over`);
    const level = this.#levels[this.#chooseLevel()] as UpstreamHost[];
    const healthy = level.filter((h) => h.healthy);
    // Panic: too few healthy hosts in the level; Envoy then balances over all of them.
    const pool = healthy.length >= PANIC_THRESHOLD * level.length && healthy.length > 0 ? healthy : level;
    const i = this.#next.get(level[0]?.priority ?? 0) ?? 0;
    this.#next.set(level[0]?.priority ?? 0, i + 1);
    return (pool[i % pool.length] as UpstreamHost).address;
  }

  /**
   * The host for one request: ORIGINAL_DST reads its header; override_host takes the first listed
   * host that is one of the cluster's endpoints, else falls back to the cluster's balancing.
   */
  choose(h: HeaderMap): HostChoice {
    if (this.#originalDstHeader !== undefined) {
      const value = h.get(this.#originalDstHeader);
      if (value === undefined) return { target: null };
      const target = parseDestination(value);
      return target === null ? { target: null, originalDstHostInvalid: true } : { target };
    }
    if (this.#overrideHostHeader !== undefined) {
      for (const entry of (h.get(this.#overrideHostHeader) ?? "").split(",")) {
        const host = this.#byAddress.get(entry.trim());
        if (host !== undefined) return { target: host.address };
      }
    }
    return { target: this.pick() };
  }

  /** Hosts and their health, for tests and operators. */
  hosts(): Array<{ address: string; priority: number; healthy: boolean; failures: number }> {
    return this.#hosts.map((h) => ({
      address: `${h.address.host}:${h.address.port}`,
      priority: h.priority,
      healthy: h.healthy,
      failures: h.failures,
    }));
  }

  close(): void {
    this.#closed = true;
    for (const h of this.#hosts) clearTimeout(h.timer);
  }

  /** Envoy's priority load: each level takes min(rest, 1.4 × its healthy share), normalised when all fall short. */
  #chooseLevel(): number {
    const health = this.#levels.map((l) =>
      Math.min(1, (OVERPROVISIONING * l.filter((h) => h.healthy).length) / l.length),
    );
    const total = Math.min(
      1,
      health.reduce((a, b) => a + b, 0),
    );
    if (total === 0) return 0;
    let left = 1;
    const load = health.map((h) => {
      const take = Math.min(left, h);
      left -= take;
      return take / total;
    });
    let r = Math.random();
    for (let i = 0; i < load.length; i++) {
      r -= load[i] as number;
      if (r < 0 || (load[i] as number) === 1) return i;
    }
    return load.length - 1;
  }

  #check(h: UpstreamHost, hc: HealthCheckConfig, first: boolean): void {
    if (this.#closed) return;
    let done = false;
    const finish = (ok: boolean, network: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      this.#result(h, hc, ok, network, first);
      if (this.#closed) return;
      h.timer = setTimeout(() => this.#check(h, hc, false), hc.intervalMs);
      h.timer.unref();
    };
    const req = http.request(
      {
        host: h.address.host,
        port: h.address.port,
        method: "GET",
        path: hc.path,
        headers: { host: this.name },
        agent: false,
      },
      (res) => {
        res.resume();
        res.on("end", () => finish(res.statusCode === 200, false));
        res.on("error", () => finish(false, true));
      },
    );
    req.on("error", () => finish(false, true));
    const timer = setTimeout(() => {
      req.destroy();
      finish(false, true);
    }, hc.timeoutMs);
    timer.unref();
    req.end();
  }

  #result(h: UpstreamHost, hc: HealthCheckConfig, ok: boolean, network: boolean, first: boolean): void {
    if (ok) {
      h.failures = 0;
      h.successes++;
      if (!h.healthy && (first || h.successes >= hc.healthyThreshold)) h.healthy = true;
      return;
    }
    h.successes = 0;
    h.failures++;
    // An answer outside the expected statuses marks the host unhealthy at once (Envoy ignores
    // unhealthy_threshold for it); network failures must reach the threshold.
    if (h.healthy && (first || !network || h.failures >= hc.unhealthyThreshold)) h.healthy = false;
  }
}
