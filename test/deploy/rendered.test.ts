// `kubectl kustomize deploy/` and `kubectl kustomize deploy/gaie`, rendered as an operator's
// `kubectl apply -k` would, then validated: every resource the kustomization lists comes out once,
// with the image tags the kustomization sets; core kinds pass kubernetes-models (Kubernetes'
// OpenAPI types), the InferencePool and HTTPRoute our structural schemas (crd-problems.ts), and
// the ConfigMap's config passes the control plane's own parser.
import { describe, expect, it } from "vitest";
import { parseConfigYaml } from "../../control-plane/src/config/load-config.ts";
import { type Doc, loadYamlFiles, parseYaml } from "./artifacts.ts";
import { coreModelProblems } from "./core-models.ts";
import { crdProblems } from "./crd-problems.ts";
import { kubectlSkipReason, kustomize } from "./kubectl.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests walk parsed YAML whose shape they assert
type Obj = Record<string, any>;

const skipReason = kubectlSkipReason();
if (skipReason !== null) console.warn(skipReason);

const identity = (d: Obj) => `${d.apiVersion} ${d.kind} ${d.metadata?.namespace ?? "-"}/${d.metadata?.name}`;

/** Problems of one rendered document: every kind must have a validator. */
function problems(doc: Obj, where: string): string[] {
  const core = coreModelProblems(doc);
  if (core !== undefined) return core.map((p) => `${where}: ${p}`);
  const known = crdProblems(doc, where);
  if (known.length === 0 && !["InferencePool", "HTTPRoute"].includes(doc.kind))
    return [`${where}: no schema for ${doc.apiVersion} ${doc.kind}`];
  return known;
}

describe.skipIf(skipReason !== null).each(["deploy", "deploy/gaie"])("kubectl kustomize %s", (dir) => {
  const sources = loadYamlFiles(dir)
    .filter((f) => dir === "deploy/gaie" || !f.file.startsWith("deploy/gaie/"))
    .flatMap((f) => f.docs as Obj[]);
  const kustomization = sources.find((d) => d.kind === "Kustomization") as Obj;
  const rendered = (): Obj[] => parseYaml(`kubectl kustomize ${dir}`, kustomize(dir)) as Obj[];

  it("renders every resource the kustomization lists, once", () => {
    const expected = sources
      .filter((d) => d.kind !== "Kustomization")
      .map(identity)
      .sort();
    expect(rendered().map(identity).sort()).toEqual(expected);
  });

  it("every rendered resource passes its schema; the config passes the control plane's parser", () => {
    const docs = rendered();
    expect(docs.flatMap((d, i) => problems(d, `${dir}[${i}] ${d.kind}`))).toEqual([]);
    // The control plane's configuration (NATS's own, deploy/nats.yaml, is run by test/replicas/shipped-nats.test.ts).
    const configs = docs.filter((d) => d.kind === "ConfigMap" && d.data["config.yaml"] !== undefined);
    expect(configs.length).toBe(1);
    for (const cm of configs)
      expect(() => parseConfigYaml(cm.data["config.yaml"], `${dir} ${cm.metadata.name}`, {})).not.toThrow();
  });

  it("a configuration with nats dials a NATS Service the render holds, on its client port", () => {
    const docs = rendered();
    const cm = docs.find((d) => d.kind === "ConfigMap" && d.data["config.yaml"] !== undefined) as Obj;
    const cfg = parseConfigYaml(cm.data["config.yaml"], `${dir} ${cm.metadata.name}`, {});
    if (cfg.nats === undefined) return;
    for (const server of cfg.nats.servers) {
      const { hostname, port } = new URL(server);
      const [name, namespace] = hostname.split(".");
      const service = docs.find(
        (d) => d.kind === "Service" && d.metadata.name === name && d.metadata.namespace === namespace,
      );
      expect(service, server).toBeDefined();
      expect(service?.spec.ports.map((p: Obj) => p.port)).toContain(Number(port));
      // The Service selects the pods of a rendered Deployment that listens there.
      const target = service?.spec.ports.find((p: Obj) => p.port === Number(port)).targetPort;
      const pods = docs
        .filter((d) => d.kind === "Deployment")
        .filter((d) =>
          Object.entries(service?.spec.selector).every(([k, v]) => d.spec.template.metadata.labels[k] === v),
        );
      expect(pods.length, server).toBe(1);
      const ports = pods[0]?.spec.template.spec.containers.flatMap((c: Obj) => c.ports);
      expect(ports.some((p: Obj) => p.name === target || p.containerPort === target)).toBe(true);
    }
  });

  it("every container image carries the tag the kustomization sets", () => {
    const tags = new Map<string, string>(kustomization.images.map((i: Obj) => [i.name, i.newTag]));
    const pods = rendered()
      .filter((d) => d.kind === "Deployment")
      .map((d) => d.spec.template.spec);
    const images = pods.flatMap((p) =>
      [...(p.initContainers ?? []), ...p.containers].map((c: Obj) => c.image),
    );
    expect(images.length).toBeGreaterThan(0);
    for (const image of images) {
      const [name, tag] = image.split(":");
      expect(tags.has(name), image).toBe(true);
      expect(tag, image).toBe(tags.get(name));
    }
  });

  it("the validators refuse a broken render: a named port as containerPort, a pool without a selector", () => {
    const docs = rendered();
    const deployment = structuredClone(docs.find((d) => d.kind === "Deployment")) as Obj;
    deployment.spec.template.spec.containers[0].ports[0].containerPort = "http";
    expect(problems(deployment, "d")).not.toEqual([]);
    const pool = docs.find((d) => d.kind === "InferencePool");
    if (pool !== undefined) {
      const broken = structuredClone(pool) as Doc & Obj;
      delete broken.spec.selector;
      expect(problems(broken, "p")).not.toEqual([]);
    }
  });
});
