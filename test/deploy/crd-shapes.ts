// The fields of the Istio and Envoy Gateway resources kvroute ships, as their API references
// define them (Istio networking/extensions v1alpha*, Envoy Gateway gateway.envoyproxy.io
// v1alpha1). No CRD schemas are available offline, so this is a list of known fields: a typo
// such as `failStratgy` or `rootId` fails the test with its path instead of being dropped by
// the API server's pruning.

type Shape = { fields: readonly string[]; children?: Record<string, Shape | { each: Shape }> };

const leaf = (...fields: string[]): Shape => ({ fields });

const SHAPES: Record<string, { apiVersion: string; spec: Shape }> = {
  EnvoyFilter: {
    apiVersion: "networking.istio.io/v1alpha3",
    spec: {
      fields: ["workloadSelector", "targetRefs", "configPatches", "priority"],
      children: {
        configPatches: {
          each: {
            fields: ["applyTo", "match", "patch"],
            children: {
              match: leaf("context", "proxy", "listener", "routeConfiguration", "cluster"),
              patch: leaf("operation", "value", "filterClass"),
            },
          },
        },
      },
    },
  },
  WasmPlugin: {
    apiVersion: "extensions.istio.io/v1alpha1",
    spec: leaf(
      "selector",
      "targetRef",
      "targetRefs",
      "url",
      "sha256",
      "imagePullPolicy",
      "imagePullSecret",
      "pluginConfig",
      "pluginName",
      "phase",
      "priority",
      "failStrategy",
      "vmConfig",
      "match",
      "type",
    ),
  },
  EnvoyExtensionPolicy: {
    apiVersion: "gateway.envoyproxy.io/v1alpha1",
    spec: {
      fields: ["targetRef", "targetRefs", "targetSelectors", "wasm", "extProc", "lua", "dynamicModule"],
      children: {
        wasm: {
          each: {
            fields: ["name", "rootID", "code", "config", "failOpen", "env"],
            children: {
              code: {
                fields: ["type", "http", "image", "pullPolicy"],
                children: { image: leaf("url", "sha256", "pullSecretRef") },
              },
            },
          },
        },
      },
    },
  },
  EnvoyPatchPolicy: {
    apiVersion: "gateway.envoyproxy.io/v1alpha1",
    spec: {
      fields: ["targetRef", "targetRefs", "type", "jsonPatches", "priority"],
      children: {
        jsonPatches: {
          each: {
            fields: ["type", "name", "operation"],
            children: { operation: leaf("op", "path", "jsonPath", "from", "value") },
          },
        },
      },
    },
  },
};

function check(value: unknown, shape: Shape, path: string, out: string[]): void {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    out.push(`${path}: expected an object`);
    return;
  }
  for (const [key, child] of Object.entries(value)) {
    if (!shape.fields.includes(key)) {
      out.push(`${path}.${key}: unknown field`);
      continue;
    }
    const sub = shape.children?.[key];
    if (sub === undefined) continue;
    if ("each" in sub) {
      if (!Array.isArray(child)) out.push(`${path}.${key}: expected a list`);
      else
        child.forEach((item, i) => {
          check(item, sub.each, `${path}.${key}[${i}]`, out);
        });
    } else check(child, sub, `${path}.${key}`, out);
  }
}

/** Problems of one Istio / Envoy Gateway document; other kinds are not checked here. */
export function crdProblems(doc: Record<string, unknown>, path: string): string[] {
  const known = SHAPES[String(doc.kind)];
  if (known === undefined) return [];
  const out: string[] = [];
  if (doc.apiVersion !== known.apiVersion) out.push(`${path}.apiVersion: expected ${known.apiVersion}`);
  const meta = doc.metadata as Record<string, unknown> | undefined;
  if (typeof meta?.name !== "string" || typeof meta?.namespace !== "string")
    out.push(`${path}.metadata: name and namespace are required`);
  check(doc.spec, known.spec, `${path}.spec`, out);
  return out;
}
