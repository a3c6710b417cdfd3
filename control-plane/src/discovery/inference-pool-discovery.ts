// InferencePool discovery: per pool, a ListWatch of the InferencePools in its namespace (the one
// named in the configuration is used) and one of the pods its selector picks. When the selector
// changes the pod watch is replaced. Whenever either copy changes the pool's endpoints are
// recomputed (inference-pool.ts) and reported if they differ from the last report; during an
// API outage the last list stays (ListWatch keeps its copy until a list succeeds).
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { PoolConfig } from "../config/schema.ts";
import {
  type InferencePoolObject,
  type InferencePoolSource,
  inferencePoolEndpoints,
  inferencePoolSpec,
} from "./inference-pool.ts";
import { ListWatch } from "./kubernetes-watch.ts";
import { reportChanges } from "./report-changes.ts";
import type { Discovery, EndpointsListener } from "./source.ts";

const GROUP = "inference.networking.k8s.io";
const VERSION = "v1";
const PLURAL = "inferencepools";

export interface InferencePoolDiscoveryOptions {
  kubeConfig?: KubeConfig;
  logger: Logger;
  /** start() resolves after this long even if the API has not answered, so probes can serve. */
  initialTimeoutMs?: number;
  retryMinMs?: number;
  retryMaxMs?: number;
}

type Named = InferencePoolObject & { metadata?: { name?: string } };

interface PoolWatch {
  pool: PoolConfig;
  src: InferencePoolSource;
  pools: ListWatch<Named>;
  pods: ListWatch<V1Pod> | null;
  podSelector: string;
  lastReported: string | undefined;
  lastProblems: string;
}

function selectorString(labels: Record<string, string>): string {
  return Object.entries(labels)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
}

export class InferencePoolDiscovery implements Discovery {
  readonly #watches: PoolWatch[] = [];
  readonly #retired: Array<Promise<void>> = [];

  constructor(
    private readonly pools: readonly PoolConfig[],
    private readonly opts: InferencePoolDiscoveryOptions,
  ) {}

  async start(onEndpoints: EndpointsListener): Promise<void> {
    const kc = this.opts.kubeConfig ?? defaultKubeConfig();
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
    const log = this.opts.logger;
    const common = { kubeConfig: kc, retryMinMs: this.opts.retryMinMs, retryMaxMs: this.opts.retryMaxMs };
    let resolveFirst: () => void = () => {};
    const first = new Promise<void>((r) => (resolveFirst = r));

    const report = (w: PoolWatch) => {
      if (!w.pools.synced) return;
      const obj = w.pools.objects.get(w.src.name);
      this.#followSelector(w, obj, core, common, () => report(w));
      // The pool's endpoints need its pods, unless the InferencePool is missing or unusable.
      const usable = !("problem" in inferencePoolSpec(w.pool, w.src, obj));
      if (usable && (w.pods === null || !w.pods.synced)) return;
      const picture = inferencePoolEndpoints(w.pool, w.src, obj, w.pods?.objects ?? new Map());
      reportChanges(
        w,
        picture,
        log,
        { problems: "InferencePool endpoints incomplete", endpoints: "InferencePool endpoints" },
        onEndpoints,
      );
      if (this.#watches.every((x) => x.lastReported !== undefined)) resolveFirst();
    };

    for (const pool of this.pools) {
      const src = pool.discovery?.inferencePool;
      if (src === undefined) continue;
      const { namespace } = src;
      const w: PoolWatch = {
        pool,
        src,
        pods: null,
        podSelector: "",
        lastReported: undefined,
        lastProblems: "",
        pools: new ListWatch<Named>({
          ...common,
          path: `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${PLURAL}`,
          labelSelector: "",
          list: async () =>
            (await custom.listNamespacedCustomObject({
              group: GROUP,
              version: VERSION,
              namespace,
              plural: PLURAL,
            })) as {
              items: Named[];
              metadata?: { resourceVersion?: string };
            },
          onChange: () => report(w),
          onError: (err) =>
            log.warn({ pool: pool.name, err: String(err) }, "InferencePool watch failed; relisting"),
        }),
      };
      this.#watches.push(w);
    }
    if (this.#watches.length === 0) return;
    for (const w of this.#watches) w.pools.start();
    const timeoutMs = this.opts.initialTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((r) => {
      timer = setTimeout(() => r(true), timeoutMs);
    });
    const late = await Promise.race([first.then(() => false), timedOut]);
    clearTimeout(timer);
    if (late)
      log.warn(
        { timeoutMs },
        "Kubernetes API has not answered yet; starting without InferencePool endpoints",
      );
  }

  /** Watches the pods the InferencePool's selector picks, replacing the watch when it changes. */
  #followSelector(
    w: PoolWatch,
    obj: InferencePoolObject | undefined,
    core: CoreV1Api,
    common: { kubeConfig: KubeConfig; retryMinMs?: number; retryMaxMs?: number },
    onChange: () => void,
  ): void {
    const labels = obj?.spec?.selector?.matchLabels ?? {};
    const selector = Object.keys(labels).length === 0 ? "" : selectorString(labels);
    if (selector === w.podSelector) return;
    if (w.pods !== null) this.#retired.push(w.pods.stop());
    w.podSelector = selector;
    w.pods = null;
    if (selector === "") return;
    const namespace = w.src.namespace;
    w.pods = new ListWatch<V1Pod>({
      ...common,
      path: `/api/v1/namespaces/${namespace}/pods`,
      labelSelector: selector,
      list: () => core.listNamespacedPod({ namespace, labelSelector: selector }),
      onChange,
      onError: (err) =>
        this.opts.logger.warn({ pool: w.pool.name, err: String(err) }, "pod watch failed; relisting"),
    });
    w.pods.start();
  }

  async stop(): Promise<void> {
    await Promise.all([
      ...this.#watches.flatMap((w) => [w.pools.stop(), ...(w.pods === null ? [] : [w.pods.stop()])]),
      ...this.#retired,
    ]);
  }
}

function defaultKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}
