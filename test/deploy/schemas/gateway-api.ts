// Gateway API target and secret references, checked against kubernetes-sigs/gateway-api v1.6.1 apis/v1/shared_types.go, policy_types.go and object_reference_types.go.
// (v1.6.1 is the version Envoy Gateway v1.9.0's go.mod names.) Also Envoy Gateway v1.9.0
// api/v1alpha1/policy_helpers.go: PolicyTargetReferences and TargetSelector.
import { list, object, string, stringMap, unmodeled } from "./build.ts";

const DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/** An API group: empty (core) or an RFC 1123 subdomain. */
export const group = string({ maxLength: 253, pattern: `^$|${DNS_SUBDOMAIN}` });
export const kind = string({ minLength: 1, maxLength: 63, pattern: "^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$" });
export const objectName = string({ minLength: 1, maxLength: 253 });
export const namespace = string({ minLength: 1, maxLength: 63, pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" });
export const sectionName = string({ minLength: 1, maxLength: 253, pattern: DNS_SUBDOMAIN });

/** LocalPolicyTargetReference: group, kind and name, all three required; no sectionName. */
export const localPolicyTargetReference = object({ group, kind, name: objectName }, [
  "group",
  "kind",
  "name",
]);

/** LocalPolicyTargetReferenceWithSectionName. */
export const localPolicyTargetReferenceWithSectionName = object(
  { group, kind, name: objectName, sectionName },
  ["group", "kind", "name"],
);

/** SecretObjectReference: group and kind default to "" and Secret; name is required. */
export const secretObjectReference = object({ group, kind, name: objectName, namespace }, ["name"]);

/** Envoy Gateway's TargetSelector (label-selected targets). */
const targetSelector = object(
  {
    group,
    kind,
    namespaces: unmodeled("object"),
    matchLabels: stringMap,
    matchExpressions: unmodeled("array"),
  },
  ["kind"],
);

/**
 * The fields Envoy Gateway's PolicyTargetReferences inlines into EnvoyExtensionPolicy and
 * ClientTrafficPolicy specs (not into EnvoyPatchPolicy, which has its own single targetRef).
 * Which combination is allowed is a CEL rule, not checked here.
 */
export const policyTargetReferences = {
  targetRef: localPolicyTargetReferenceWithSectionName,
  targetRefs: list(localPolicyTargetReferenceWithSectionName),
  targetSelectors: list(targetSelector),
};
