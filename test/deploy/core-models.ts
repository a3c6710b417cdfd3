// Validates the core Kubernetes kinds our manifests ship (Deployment, Service, RBAC, …) with
// kubernetes-models, whose validators are generated from Kubernetes' own OpenAPI schema: types,
// enums and required fields. Unknown fields are not refused by it (the API server's strict field
// validation is not modelled); the hand-written checks in manifests.test.ts cover the fields the
// control plane depends on.
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicy";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { Role } from "kubernetes-models/rbac.authorization.k8s.io/v1/Role";
import { RoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";
import { Namespace } from "kubernetes-models/v1/Namespace";
import { Service } from "kubernetes-models/v1/Service";
import { ServiceAccount } from "kubernetes-models/v1/ServiceAccount";

interface Validatable {
  validate(): void;
}
// biome-ignore lint/suspicious/noExplicitAny: each model's constructor takes its own typed shape
type Model = new (doc: any) => Validatable;

const MODELS: Record<string, Model> = {
  "apps/v1/Deployment": Deployment,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "rbac.authorization.k8s.io/v1/Role": Role,
  "rbac.authorization.k8s.io/v1/RoleBinding": RoleBinding,
  "v1/ConfigMap": ConfigMap,
  "v1/Namespace": Namespace,
  "v1/Service": Service,
  "v1/ServiceAccount": ServiceAccount,
};

/**
 * Problems of a core-kind document by its generated model; undefined for a kind without one here
 * (custom resources: test/deploy/crd-problems.ts).
 */
export function coreModelProblems(doc: Record<string, unknown>): string[] | undefined {
  const model = MODELS[`${String(doc.apiVersion)}/${String(doc.kind)}`];
  if (model === undefined) return undefined;
  try {
    new model(doc).validate();
    return [];
  } catch (err) {
    return [(err as Error).message];
  }
}
