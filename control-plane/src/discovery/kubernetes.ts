// Kubernetes discovery: per pool, a ListWatch of the Service's EndpointSlices (addresses and
// readiness) and one of the pool's pods (selector, annotations, labels). Whenever either copy
// changes, the pool's complete endpoint list is recomputed (kubernetes-endpoints.ts) and
// reported if it differs from the last report. During an API outage the last list stays.
import {
  CoreV1Api,
  DiscoveryV1Api,
  KubeConfig,
  type V1EndpointSlice,
  type V1Pod,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { PoolConfig } from "../config/schema.ts";
import { clusterEndpoints, type KubernetesDiscoveryConfig } from "./kubernetes-endpoints.ts";
import { ListWatch } from "./kubernetes-watch.ts";
import { reportChanges } from "./report-changes.ts";
import type { Discovery, EndpointsListener } from "./source.ts";

export interface KubernetesDiscoveryOptions {
  /** Default: in-cluster service account, else ~/.kube/config (KubeConfig.loadFromDefault). */
  kubeConfig?: KubeConfig;
  logger: Logger;
  /** start() resolves after this long even if the API has not answered, so probes can serve. */
  initialTimeoutMs?: number;
  retryMinMs?: number;
  retryMaxMs?: number;
}

const SERVICE_NAME_LABEL = "kubernetes.io/service-name";

function selectorString(labels: Record<string, string>): string {
  return Object.entries(labels)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
}

interface PoolWatch {
  pool: PoolConfig;
  k8s: KubernetesDiscoveryConfig;
  slices: ListWatch<V1EndpointSlice>;
  pods: ListWatch<V1Pod>;
  lastReported: string | undefined;
  lastProblems: string;
}

export class KubernetesDiscovery implements Discovery {
  readonly #watches: PoolWatch[] = [];

  constructor(
    private readonly pools: readonly PoolConfig[],
    private readonly opts: KubernetesDiscoveryOptions,
  ) {}

  /** Lists made per pool and kind (tests and the log). */
  lists(): Array<{ pool: string; slices: number; pods: number }> {
    return this.#watches.map((w) => ({ pool: w.pool.name, slices: w.slices.lists, pods: w.pods.lists }));
  }

  async start(onEndpoints: EndpointsListener): Promise<void> {
    const kc = this.opts.kubeConfig ?? defaultKubeConfig();
    const discoveryApi = kc.makeApiClient(DiscoveryV1Api);
    const coreApi = kc.makeApiClient(CoreV1Api);
    const log = this.opts.logger;
    let resolveFirst: () => void = () => {};
    const first = new Promise<void>((r) => (resolveFirst = r));

    const report = (w: PoolWatch) => {
      if (!w.slices.synced || !w.pods.synced) return;
      const picture = clusterEndpoints(w.pool, w.k8s, w.slices.objects.values(), w.pods.objects);
      reportChanges(
        w,
        picture,
        log,
        { problems: "pods skipped", endpoints: "kubernetes endpoints" },
        onEndpoints,
      );
      if (this.#watches.every((x) => x.lastReported !== undefined)) resolveFirst();
    };

    for (const pool of this.pools) {
      const k8s = pool.discovery?.kubernetes;
      if (k8s === undefined) continue;
      const { namespace } = k8s;
      const sliceSelector = `${SERVICE_NAME_LABEL}=${k8s.service}`;
      const podSelector = selectorString(k8s.selector.matchLabels);
      const common = {
        kubeConfig: kc,
        retryMinMs: this.opts.retryMinMs,
        retryMaxMs: this.opts.retryMaxMs,
      };
      const w: PoolWatch = {
        pool,
        k8s,
        lastReported: undefined,
        lastProblems: "",
        slices: new ListWatch<V1EndpointSlice>({
          ...common,
          path: `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`,
          labelSelector: sliceSelector,
          list: () => discoveryApi.listNamespacedEndpointSlice({ namespace, labelSelector: sliceSelector }),
          onChange: () => report(w),
          onError: (err) =>
            log.warn({ pool: pool.name, err: String(err) }, "EndpointSlice watch failed; relisting"),
        }),
        pods: new ListWatch<V1Pod>({
          ...common,
          path: `/api/v1/namespaces/${namespace}/pods`,
          labelSelector: podSelector,
          list: () => coreApi.listNamespacedPod({ namespace, labelSelector: podSelector }),
          onChange: () => report(w),
          onError: (err) => log.warn({ pool: pool.name, err: String(err) }, "pod watch failed; relisting"),
        }),
      };
      this.#watches.push(w);
    }
    if (this.#watches.length === 0) return;
    for (const w of this.#watches) {
      w.slices.start();
      w.pods.start();
    }
    const timeoutMs = this.opts.initialTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((r) => {
      timer = setTimeout(() => r(true), timeoutMs);
    });
    const late = await Promise.race([first.then(() => false), timedOut]);
    clearTimeout(timer);
    if (late)
      log.warn({ timeoutMs }, "Kubernetes API has not answered yet; starting without those pools' endpoints");
  }

  async stop(): Promise<void> {
    await Promise.all(this.#watches.flatMap((w) => [w.slices.stop(), w.pods.stop()]));
  }
}

function defaultKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}
