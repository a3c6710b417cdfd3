// Pure: what a pool's endpoints are, given the EndpointSlices of its Service and its pods.
// EndpointSlices say where a pod is reachable and whether it is ready; pods (chosen by the
// pool's selector, like an InferencePool) carry the annotations and labels kvroute reads.
// Not-ready endpoints are left out: the filter must not route to them.
import type { V1EndpointSlice, V1Pod } from "@kubernetes/client-node";
import type { EndpointConfig, PoolConfig } from "../config/schema.ts";
import { dynamoWorkerId } from "./dynamo-worker-id.ts";

export type KubernetesDiscoveryConfig = NonNullable<NonNullable<PoolConfig["discovery"]>["kubernetes"]>;

/** Pod annotations and labels kvroute reads (docs/configuration.md, "Kubernetes discovery"). */
export const ANNOTATION_START_RANK = "kvroute.io/start-rank";
export const ANNOTATION_RANKS = "kvroute.io/ranks";
export const LABEL_ROLE = "kvroute.io/role";

const MAX_RANK = 4095;
const ROLES = new Set(["aggregated", "prefill", "decode"]);

export interface ClusterEndpoints {
  endpoints: EndpointConfig[];
  /** Pods skipped or annotations ignored, one line each, for the log. */
  problems: string[];
}

/** A rank as an annotation value: ASCII digits, no sign or spaces, in range. */
function parseRank(text: string): number | null {
  if (!/^(0|[1-9]\d{0,3})$/.test(text)) return null;
  const n = Number(text);
  return n <= MAX_RANK ? n : null;
}

/** `kvroute.io/ranks`: "0-3" or "0,1,4". */
export function parseRanks(text: string): number[] | null {
  const range = /^(\d+)-(\d+)$/.exec(text);
  if (range !== null) {
    const lo = parseRank(range[1] as string);
    const hi = parseRank(range[2] as string);
    if (lo === null || hi === null || hi < lo) return null;
    return Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);
  }
  const ranks = text.split(",").map(parseRank);
  if (ranks.some((r) => r === null)) return null;
  const unique = [...new Set(ranks as number[])].sort((a, b) => a - b);
  return unique.length === ranks.length ? unique : null;
}

function matchesSelector(pod: V1Pod, matchLabels: Record<string, string>): boolean {
  const labels = pod.metadata?.labels ?? {};
  return Object.entries(matchLabels).every(([k, v]) => labels[k] === v);
}

function hostPort(ip: string, port: number): string {
  return ip.includes(":") ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/** The ready pods behind the Service's slices: pod name → IP (first address of the first ready entry). */
function readyPodAddresses(slices: Iterable<V1EndpointSlice>): Map<string, string> {
  const ready = new Map<string, string>();
  for (const slice of slices) {
    if (slice.addressType !== "IPv4" && slice.addressType !== "IPv6") continue; // FQDN: not a literal ip:port
    for (const ep of slice.endpoints ?? []) {
      // The API says a missing `ready` is unknown and consumers should treat it as ready.
      if (ep.conditions?.ready === false) continue;
      const ref = ep.targetRef;
      const ip = ep.addresses?.[0];
      if (ref?.kind !== "Pod" || ref.name === undefined || ip === undefined) continue;
      // During a rollout a pod can sit in two slices for a moment; the first entry wins.
      if (!ready.has(ref.name)) ready.set(ref.name, ip);
    }
  }
  return ready;
}

interface PodFacts {
  role: EndpointConfig["role"];
  startRank: number | undefined;
  ranks: number[] | undefined;
}

function podFacts(pod: V1Pod, name: string, problems: string[]): PodFacts | null {
  const role = pod.metadata?.labels?.[LABEL_ROLE] ?? "aggregated";
  if (!ROLES.has(role)) {
    problems.push(`pod ${name}: label ${LABEL_ROLE}=${role} is not aggregated, prefill or decode; skipped`);
    return null;
  }
  const annotations = pod.metadata?.annotations ?? {};
  let startRank: number | undefined;
  const startText = annotations[ANNOTATION_START_RANK];
  if (startText !== undefined) {
    const parsed = parseRank(startText);
    if (parsed === null) {
      problems.push(`pod ${name}: annotation ${ANNOTATION_START_RANK}=${startText} is not a rank; skipped`);
      return null;
    }
    startRank = parsed;
  }
  let ranks: number[] | undefined;
  const ranksText = annotations[ANNOTATION_RANKS];
  if (ranksText !== undefined) {
    const parsed = parseRanks(ranksText);
    if (parsed === null) {
      problems.push(
        `pod ${name}: annotation ${ANNOTATION_RANKS}=${ranksText} is not "a-b" or "a,b,…"; skipped`,
      );
      return null;
    }
    ranks = parsed;
  }
  return { role: role as EndpointConfig["role"], startRank, ranks };
}

/** How a pool's pods become endpoints: the Service-backed `kubernetes` source or an InferencePool. */
export interface PodEndpointSpec {
  selector: { matchLabels: Record<string, string> };
  /** One HTTP port per pod (ranks from /metrics or the annotation)… */
  port?: number;
  /** …or one port per rank (external LB): port i serves rank start + i. */
  targetPorts?: number[];
  kvEvents?: KubernetesDiscoveryConfig["kvEvents"];
  metricsPath: string;
}

export function clusterEndpoints(
  pool: PoolConfig,
  k8s: KubernetesDiscoveryConfig,
  slices: Iterable<V1EndpointSlice>,
  pods: ReadonlyMap<string, V1Pod>,
): ClusterEndpoints {
  return podEndpoints(pool, k8s, readyPodAddresses(slices), pods);
}

/** The endpoints of the ready pods (pod name → IP) that the pool's selector picks. */
export function podEndpoints(
  pool: PoolConfig,
  k8s: PodEndpointSpec,
  ready: ReadonlyMap<string, string>,
  pods: ReadonlyMap<string, V1Pod>,
): ClusterEndpoints {
  const problems: string[] = [];
  const endpoints: EndpointConfig[] = [];
  for (const [podName, ip] of ready) {
    const pod = pods.get(podName);
    // Behind the Service but not selected by the pool (or not seen yet): not ours.
    if (pod === undefined || !matchesSelector(pod, k8s.selector.matchLabels)) continue;
    const facts = podFacts(pod, podName, problems);
    if (facts === null) continue;
    const common = {
      role: facts.role,
      ...(pool.engine === "dynamo" ? { workerId: dynamoWorkerId(podName).toString() } : {}),
      ...(k8s.kvEvents === undefined ? {} : { kvEvents: k8s.kvEvents }),
    };
    if (k8s.targetPorts !== undefined) {
      // External LB: port i is the engine of rank start + i.
      if (facts.ranks !== undefined)
        problems.push(
          `pod ${podName}: ${ANNOTATION_RANKS} is ignored with targetPorts (port i serves rank start + i)`,
        );
      const start = facts.startRank ?? 0;
      k8s.targetPorts.forEach((port, i) => {
        const address = hostPort(ip, port);
        endpoints.push({
          address,
          ranks: [start + i],
          metricsUrl: `http://${address}${k8s.metricsPath}`,
          ...common,
        });
      });
    } else {
      if (pool.dpMode === "hybrid" && facts.startRank === undefined) {
        problems.push(
          `pod ${podName}: hybrid LB needs annotation ${ANNOTATION_START_RANK} (vLLM --data-parallel-start-rank); skipped`,
        );
        continue;
      }
      const address = hostPort(ip, k8s.port as number);
      endpoints.push({
        address,
        ranks: facts.ranks ?? "auto",
        ...(facts.startRank === undefined ? {} : { startRank: facts.startRank }),
        metricsUrl: `http://${address}${k8s.metricsPath}`,
        ...common,
      });
    }
  }
  endpoints.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  return { endpoints, problems };
}
