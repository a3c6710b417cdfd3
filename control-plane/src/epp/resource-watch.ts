// Follows the InferenceObjective and InferenceModelRewrite resources of one namespace (llm-d.ai/
// v1alpha2 by default, the group llm-d-router serves them under: config/crd/bases/
// llm-d.ai_inferenceobjectives.yaml, llm-d.ai_inferencemodelrewrites.yaml) into the picker's
// EppResources, with the same list-then-watch loop as InferencePool discovery
// (discovery/kubernetes-watch.ts: relists after any failure, keeps the last copy in an outage).
// RBAC: list and watch of both resources in that namespace.
import { CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { ListWatch } from "../discovery/kubernetes-watch.ts";
import type { InferenceModelRewrite } from "./model-rewrite.ts";
import type { EppResources, InferenceObjective } from "./resources.ts";

export interface ResourceWatchOptions {
  namespace: string;
  group: string;
  version: string;
  kubeConfig?: KubeConfig;
  logger: Logger;
  retryMinMs?: number;
  retryMaxMs?: number;
}

type Named<T> = T & { metadata?: { name?: string } };

export interface ResourceWatch {
  /** Both lists answered at least once. */
  synced(): boolean;
  stop(): Promise<void>;
}

export function watchEppResources(store: EppResources, o: ResourceWatchOptions): ResourceWatch {
  const kc = o.kubeConfig ?? defaultKubeConfig();
  const custom = kc.makeApiClient(CustomObjectsApi);
  const { namespace, group, version } = o;
  const watch = <T>(plural: string, apply: (objects: Iterable<T>) => void) => {
    const lw: ListWatch<Named<T>> = new ListWatch<Named<T>>({
      kubeConfig: kc,
      path: `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
      labelSelector: "",
      list: async () =>
        (await custom.listNamespacedCustomObject({ group, version, namespace, plural })) as {
          items: Named<T>[];
          metadata?: { resourceVersion?: string };
        },
      onChange: () => apply(lw.objects.values()),
      onError: (err) => o.logger.warn({ plural, err: String(err) }, "epp: resource watch failed; relisting"),
      ...(o.retryMinMs === undefined ? {} : { retryMinMs: o.retryMinMs }),
      ...(o.retryMaxMs === undefined ? {} : { retryMaxMs: o.retryMaxMs }),
    });
    lw.start();
    return lw;
  };
  const objectives = watch<InferenceObjective>("inferenceobjectives", (x) => store.setObjectives(x));
  const rewrites = watch<InferenceModelRewrite>("inferencemodelrewrites", (x) => store.setRewrites(x));
  return {
    synced: () => objectives.synced && rewrites.synced,
    stop: async () => {
      await Promise.all([objectives.stop(), rewrites.stop()]);
    },
  };
}

function defaultKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}
