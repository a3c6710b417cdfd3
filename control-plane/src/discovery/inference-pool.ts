// Pure: a GAIE InferencePool (inference.networking.k8s.io/v1, gateway-api-inference-extension
// api/v1/inferencepool_types.go, v1.5) and the pods it selects → the pool's endpoints. Every
// targetPort of every ready pod is an endpoint `podIP:port`; with several ports each port is one
// DP rank (external LB: port i serves rank start + i, the kvroute.io/start-rank annotation
// giving the start); with one port the ranks behind it come from /metrics (or the
// kvroute.io/ranks annotation) and are addressed by the rank header. A pod is ready when its
// Ready condition is True, it has an IP and it is not being deleted — the readiness an
// EndpointSlice would report, read from the pod itself because an InferencePool has no Service.
import type { V1Pod } from "@kubernetes/client-node";
import type { PoolConfig } from "../config/schema.ts";
import { type ClusterEndpoints, type PodEndpointSpec, podEndpoints } from "./kubernetes-endpoints.ts";

export type InferencePoolSource = NonNullable<NonNullable<PoolConfig["discovery"]>["inferencePool"]>;

/** The fields of an InferencePool that discovery reads. */
export interface InferencePoolObject {
  metadata?: { name?: string };
  spec?: {
    selector?: { matchLabels?: Record<string, string> };
    targetPorts?: Array<{ number?: number }>;
  };
}

/** What the InferencePool asks for, or a problem that leaves the pool without endpoints. */
export function inferencePoolSpec(
  pool: PoolConfig,
  src: InferencePoolSource,
  obj: InferencePoolObject | undefined,
): { spec: PodEndpointSpec } | { problem: string } {
  const where = `InferencePool ${src.namespace}/${src.name}`;
  if (obj === undefined) return { problem: `${where} does not exist` };
  const labels = obj.spec?.selector?.matchLabels ?? {};
  if (Object.keys(labels).length === 0) return { problem: `${where} has no selector.matchLabels` };
  const ports = (obj.spec?.targetPorts ?? []).map((p) => p.number);
  if (ports.length === 0 || ports.length > 8) return { problem: `${where} needs 1 to 8 targetPorts` };
  if (ports.some((p) => p === undefined || !Number.isInteger(p) || p < 1 || p > 65535))
    return { problem: `${where} has a target port that is not a port number` };
  if (new Set(ports).size !== ports.length) return { problem: `${where} repeats a target port` };
  const numbers = ports as number[];
  if (numbers.length > 1 && pool.dpMode !== "external")
    return {
      problem: `${where} has ${numbers.length} targetPorts (one rank per port): pool ${pool.name} needs dpMode: external`,
    };
  return {
    spec: {
      selector: { matchLabels: labels },
      ...(numbers.length > 1 ? { targetPorts: numbers } : { port: numbers[0] as number }),
      ...(src.kvEvents === undefined ? {} : { kvEvents: src.kvEvents }),
      metricsPath: src.metricsPath,
    },
  };
}

/** Ready pods: pod name → IP. */
export function readyPods(pods: Iterable<V1Pod>): Map<string, string> {
  const ready = new Map<string, string>();
  for (const pod of pods) {
    const name = pod.metadata?.name;
    const ip = pod.status?.podIP;
    if (name === undefined || ip === undefined || ip === "") continue;
    if (pod.metadata?.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null) continue;
    const isReady = (pod.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
    if (isReady) ready.set(name, ip);
  }
  return ready;
}

export function inferencePoolEndpoints(
  pool: PoolConfig,
  src: InferencePoolSource,
  obj: InferencePoolObject | undefined,
  pods: ReadonlyMap<string, V1Pod>,
): ClusterEndpoints {
  const r = inferencePoolSpec(pool, src, obj);
  if ("problem" in r) return { endpoints: [], problems: [r.problem] };
  return podEndpoints(pool, r.spec, readyPods(pods.values()), pods);
}
