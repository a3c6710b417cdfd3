// deploy/gaie/: kvroute as a GAIE endpoint picker. Every manifest parses and the kustomization
// lists them all; the InferencePool and HTTPRoute pass structural schemas written from GAIE's
// and Gateway API's types (test/deploy/schemas/inference-pool.ts); and the pieces line up the
// way a gateway and the API server will use them: the pool's endpointPickerRef names the
// picker's Service and port in the pool's own namespace, that port reaches the container port the
// picker's configuration listens on (the control plane's own parser reads it), the picker
// discovers that very InferencePool, its gRPC probes ask the health services it serves, and its
// RBAC covers exactly the lists and watches its discovery makes.
import { describe, expect, it } from "vitest";
import { parseConfigYaml } from "../../control-plane/src/config/load-config.ts";
import { LIVENESS, READINESS } from "../../control-plane/src/epp/health.ts";
import { loadYamlFiles } from "./artifacts.ts";
import { schemaProblems } from "./crd-schema.ts";
import { httpRouteSpec } from "./schemas/http-route.ts";
import { inferencePoolSpec } from "./schemas/inference-pool.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests walk parsed YAML whose shape they assert
type Obj = Record<string, any>;

const files = loadYamlFiles("deploy/gaie");
const docs = files.flatMap((f) => f.docs.map((doc) => ({ file: f.file, doc: doc as Obj })));
const one = (k: string): Obj => {
  const found = docs.filter((d) => d.doc.kind === k);
  expect(found.length, k).toBe(1);
  return (found[0] as { doc: Obj }).doc;
};

const pool = one("InferencePool");
const route = one("HTTPRoute");
const service = one("Service");
const deployment = one("Deployment");
const configMap = one("ConfigMap");
const container = deployment.spec.template.spec.containers[0];
const cfg = parseConfigYaml(configMap.data["config.yaml"], "deploy/gaie/configmap.yaml", {});

describe("deploy/gaie (kvroute as a GAIE endpoint picker)", () => {
  it("every manifest parses, sits in the pool's namespace, and the kustomization lists them all", () => {
    const kustomization = one("Kustomization");
    const listed = [...kustomization.resources].map((r: string) => `deploy/gaie/${r}`).sort();
    expect(listed).toEqual(files.map((f) => f.file).filter((f) => f !== "deploy/gaie/kustomization.yaml"));
    for (const { file, doc } of docs)
      if (doc.kind !== "Kustomization") expect(doc.metadata.namespace, file).toBe("llm");
  });

  it("the InferencePool and the HTTPRoute pass schemas written from GAIE's and Gateway API's types", () => {
    expect(pool.apiVersion).toBe("inference.networking.k8s.io/v1");
    expect(schemaProblems(inferencePoolSpec, pool.spec, "spec")).toEqual([]);
    expect(route.apiVersion).toBe("gateway.networking.k8s.io/v1");
    expect(schemaProblems(httpRouteSpec, route.spec, "spec")).toEqual([]);
  });

  it("the schema refuses near misses: 9 target ports, port 0, a misspelt field, an unknown failure mode", () => {
    const bad = (patch: (s: Obj) => void) => {
      const s = structuredClone(pool.spec);
      patch(s);
      return schemaProblems(inferencePoolSpec, s, "spec");
    };
    expect(
      bad((s) => (s.targetPorts = Array.from({ length: 9 }, (_, i) => ({ number: 8000 + i })))),
    ).not.toEqual([]);
    expect(bad((s) => (s.targetPorts = [{ number: 0 }]))).not.toEqual([]);
    expect(bad((s) => (s.targetPorts = [{ port: 8000 }]))).not.toEqual([]);
    expect(bad((s) => (s.endpointPickerRef.failureMode = "failClose"))).not.toEqual([]);
    expect(bad((s) => (s.endpointPickerRef.portNumber = 9002))).not.toEqual([]);
    expect(bad((s) => (s.selector.matchLabels = {}))).not.toEqual([]);
  });

  it("the HTTPRoute sends the model's requests to the InferencePool", () => {
    const backends = route.spec.rules.flatMap((r: Obj) => r.backendRefs);
    expect(backends).toEqual([
      { group: "inference.networking.k8s.io", kind: "InferencePool", name: pool.metadata.name },
    ]);
  });

  it("endpointPickerRef → the picker's Service (same namespace, the port GAIE gateways dial) → the container port the picker listens on", () => {
    const ref = pool.spec.endpointPickerRef;
    expect(ref.kind ?? "Service").toBe("Service");
    expect(ref.group ?? "").toBe("");
    // A CEL rule of the CRD: a Service reference needs its port.
    expect(ref.port?.number).toBeDefined();
    expect(ref.name).toBe(service.metadata.name);
    expect(service.metadata.namespace).toBe(pool.metadata.namespace);
    const port = service.spec.ports.find((p: Obj) => p.port === ref.port.number);
    expect(port.appProtocol).toBe("http2");
    const target = container.ports.find((p: Obj) => p.name === port.targetPort);
    expect(target.containerPort).toBe(Number(cfg.epp?.listen.split(":").at(-1)));
    expect(cfg.epp?.listen.split(":").at(-1)).toBe("9002");
    for (const [k, v] of Object.entries(service.spec.selector))
      expect(deployment.spec.template.metadata.labels[k]).toBe(v);
  });

  it("the picker's pool is that InferencePool; its probes ask the health services the picker serves", () => {
    const src = cfg.pools[0]?.discovery?.inferencePool;
    expect(src).toMatchObject({ namespace: pool.metadata.namespace, name: pool.metadata.name });
    // One target port: ranks behind it are addressed by the rank header, any dpMode but external.
    expect(pool.spec.targetPorts.length === 1 || cfg.pools[0]?.dpMode === "external").toBe(true);
    expect(container.readinessProbe.grpc).toEqual({ port: 9002, service: READINESS });
    expect(container.livenessProbe.grpc).toEqual({ port: 9002, service: LIVENESS });
    expect(cfg.routing.failMode).toBe("closed");
  });

  it("RBAC: list and watch of InferencePools, pods and the picker's watched resources in the pool's namespace, for the picker's ServiceAccount", () => {
    const role = one("Role");
    const binding = one("RoleBinding");
    expect(role.metadata.namespace).toBe(pool.metadata.namespace);
    // The picker watches objectives and rewrites of this pool, in the group its config names.
    const watched = cfg.epp?.resources;
    expect(watched).toMatchObject({ namespace: pool.metadata.namespace, inferencePool: pool.metadata.name });
    expect(role.rules).toEqual([
      { apiGroups: ["inference.networking.k8s.io"], resources: ["inferencepools"], verbs: ["list", "watch"] },
      { apiGroups: [""], resources: ["pods"], verbs: ["list", "watch"] },
      {
        apiGroups: [watched?.group],
        resources: ["inferenceobjectives", "inferencemodelrewrites"],
        verbs: ["list", "watch"],
      },
    ]);
    expect(binding.roleRef.name).toBe(role.metadata.name);
    expect(binding.subjects).toEqual([
      { kind: "ServiceAccount", name: deployment.spec.template.spec.serviceAccountName, namespace: "llm" },
    ]);
  });
});
