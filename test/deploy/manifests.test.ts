// The Kubernetes base (deploy/) and the container build files: every manifest parses, the
// kustomization lists them all, and the fields the control plane depends on line up — the
// config in the ConfigMap passes the control plane's own parser, the Deployment runs it with
// that file, probes, token Secret and a non-root read-only container, the Service is the
// authority every gateway artifact dials, and RBAC covers every namespace discovery watches.
import { describe, expect, it } from "vitest";
import { parseConfigYaml } from "../../control-plane/src/config/load-config.ts";
import { envoyPieces, loadYamlFiles, pluginConfigs, readRepoFile } from "./artifacts.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests walk parsed YAML whose shape they assert
type Obj = Record<string, any>;

const files = loadYamlFiles("deploy");
const docs = files.flatMap((f) => f.docs.map((doc) => ({ file: f.file, doc: doc as Obj })));
const one = (kind: string, name?: string): Obj => {
  const found = docs.filter(
    (d) => d.doc.kind === kind && (name === undefined || d.doc.metadata?.name === name),
  );
  expect(found.length, `${kind} ${name ?? ""}`).toBe(1);
  return (found[0] as { doc: Obj }).doc;
};

const configMap = one("ConfigMap", "kvroute-config");
const deployment = one("Deployment", "kvroute-control-plane");
const pod = deployment.spec.template.spec;
const container = pod.containers[0];
const cfg = parseConfigYaml(configMap.data["config.yaml"], "deploy/configmap.yaml: data.config.yaml", {});

describe("deploy/ (kustomize base)", () => {
  it("every manifest parses and names its apiVersion, kind and name; the kustomization lists them all", () => {
    for (const { file, doc } of docs) {
      if (doc.kind === "Kustomization") continue;
      expect([typeof doc.apiVersion, typeof doc.kind, typeof doc.metadata?.name], file).toEqual([
        "string",
        "string",
        "string",
      ]);
    }
    const kustomization = one("Kustomization");
    const listed = [...kustomization.resources].map((r: string) => `deploy/${r}`).sort();
    expect(listed).toEqual(files.map((f) => f.file).filter((f) => f !== "deploy/kustomization.yaml"));
    expect(kustomization.images.map((i: Obj) => i.name)).toContain(container.image.split(":")[0]);
  });

  it("the ConfigMap holds a configuration the control plane accepts, with Kubernetes discovery", () => {
    expect(cfg.pools.length).toBeGreaterThan(0);
    expect(cfg.pools.every((p) => p.discovery?.kubernetes !== undefined)).toBe(true);
    expect(cfg.authToken).toBeUndefined(); // the token comes from the Secret, never the ConfigMap
  });

  it("the Deployment runs that file, with probes, the token from a Secret, non-root and a read-only root", () => {
    const mount = container.volumeMounts.find((m: Obj) => m.name === "config");
    const volume = pod.volumes.find((v: Obj) => v.name === "config");
    expect(volume.configMap.name).toBe(configMap.metadata.name);
    expect(container.args).toEqual(["control-plane", "--config", `${mount.mountPath}/config.yaml`]);
    const port = Number(cfg.listen.split(":").at(-1));
    expect(container.ports).toEqual([{ name: "http", containerPort: port, protocol: "TCP" }]);
    expect(container.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "http" });
    expect(container.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "http" });
    expect(container.startupProbe.httpGet).toEqual({ path: "/healthz", port: "http" });
    const token = container.env.find((e: Obj) => e.name === "KVROUTE_AUTH_TOKEN");
    expect(token.valueFrom.secretKeyRef).toEqual({ name: "kvroute-auth", key: "token" });
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(container.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
    });
    expect(Object.keys(container.resources.requests).sort()).toEqual(["cpu", "memory"]);
    expect(container.resources.limits.memory).toBeDefined();
    // tsx writes its compile cache to TMPDIR: the read-only root needs a writable /tmp.
    const tmp = container.volumeMounts.find((m: Obj) => m.mountPath === "/tmp");
    expect(pod.volumes.find((v: Obj) => v.name === tmp?.name)?.emptyDir).toBeDefined();
    expect(container.env.find((e: Obj) => e.name === "TMPDIR")?.value).toBe("/tmp");
    // Every pool's tokenizer lies on a mounted volume.
    for (const p of cfg.pools.filter((p) => p.tokenizer !== undefined))
      expect(
        container.volumeMounts.some((m: Obj) => (p.tokenizer as string).startsWith(`${m.mountPath}/`)),
        p.name,
      ).toBe(true);
    expect(pod.serviceAccountName).toBe(one("ServiceAccount").metadata.name);
  });

  it("the Service selects the pods, pins each gateway to one replica, and is what every gateway dials", () => {
    const service = one("Service", "kvroute-control-plane");
    expect(deployment.spec.template.metadata.labels).toMatchObject(service.spec.selector);
    expect(deployment.spec.selector.matchLabels).toEqual(service.spec.selector);
    expect(service.spec.ports).toEqual([{ name: "http", port: 9090, targetPort: "http", protocol: "TCP" }]);
    expect(service.spec.sessionAffinity).toBe("ClientIP");
    const authority = `${service.metadata.name}.${service.metadata.namespace}.svc:${service.spec.ports[0].port}`;
    const fqdn = `${service.metadata.name}.${service.metadata.namespace}.svc.cluster.local`;
    const gatewayArtifacts = loadYamlFiles("envoy").filter((f) => f.file !== "envoy/envoy.yaml");
    let dialed = 0;
    for (const f of gatewayArtifacts) {
      for (const site of pluginConfigs(f))
        expect((site.config as Obj).controlPlane.authority, `${f.file}: ${site.path}`).toBe(authority);
      for (const piece of envoyPieces(f).filter((p) => (p.value as Obj).name === "kvroute_control_plane")) {
        const endpoint = (piece.value as Obj).load_assignment.endpoints[0].lb_endpoints[0].endpoint;
        expect(endpoint.address.socket_address, `${f.file}: ${piece.path}`).toEqual({
          address: fqdn,
          port_value: 9090,
        });
        dialed++;
      }
    }
    expect(dialed).toBe(3); // Istio EnvoyFilter, Istio WasmPlugin companion, Envoy Gateway patch
  });

  it("RBAC lets the ServiceAccount get, list and watch EndpointSlices and Pods in every namespace discovery watches", () => {
    const sa = one("ServiceAccount");
    const namespaces = new Set(
      cfg.pools.map((p) => p.discovery?.kubernetes?.namespace).filter((n) => n !== undefined),
    );
    expect(namespaces.size).toBeGreaterThan(0);
    for (const ns of namespaces) {
      const bindings = docs
        .map((d) => d.doc)
        .filter((d) => d.kind === "RoleBinding" && d.metadata.namespace === ns)
        .filter((b) =>
          b.subjects.some(
            (s: Obj) =>
              s.kind === "ServiceAccount" &&
              s.name === sa.metadata.name &&
              s.namespace === sa.metadata.namespace,
          ),
        );
      expect(bindings.length, ns).toBeGreaterThan(0);
      const role = docs
        .map((d) => d.doc)
        .find(
          (d) =>
            d.kind === "Role" && d.metadata.namespace === ns && d.metadata.name === bindings[0]?.roleRef.name,
        ) as Obj;
      const grants = (group: string, resource: string) =>
        role.rules.some(
          (r: Obj) =>
            r.apiGroups.includes(group) &&
            r.resources.includes(resource) &&
            ["get", "list", "watch"].every((v) => r.verbs.includes(v)),
        );
      expect(grants("discovery.k8s.io", "endpointslices"), ns).toBe(true);
      expect(grants("", "pods"), ns).toBe(true);
      // Read-only: discovery never writes.
      expect(role.rules.flatMap((r: Obj) => r.verbs).sort()).toEqual([
        "get",
        "get",
        "list",
        "list",
        "watch",
        "watch",
      ]);
    }
  });

  it("the NetworkPolicy admits the control plane's port", () => {
    const policy = one("NetworkPolicy");
    expect(policy.spec.podSelector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    expect(policy.spec.ingress.flatMap((r: Obj) => r.ports.map((p: Obj) => p.port))).toEqual([9090]);
  });
});

describe("container build files", () => {
  it("the control plane image: node:20-slim, production dependencies, non-root, the port, the config path", () => {
    const text = readRepoFile("deploy/Dockerfile");
    const froms = [...text.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
    expect(froms.every((f) => f === "node:20-slim")).toBe(true);
    expect(text).toMatch(/npm ci --omit=dev/);
    expect(text).toMatch(/^USER 10001:10001$/m);
    expect(text).toMatch(/^EXPOSE 9090$/m);
    expect(text).toContain(`"--config", "${container.args[2]}"`);
    // tsx runs the TypeScript; it is a devDependency, so the image installs that exact version globally.
    const pkg = JSON.parse(readRepoFile("package.json"));
    const tsx = pkg.dependencies?.tsx ?? pkg.devDependencies?.tsx;
    expect(text).toContain(`npm install --global --no-audit --no-fund tsx@${tsx}`);
    expect(text).toMatch(/^ENTRYPOINT \["tsx", "control-plane\/bin\/kvroute\.ts"\]$/m);
    // The Node routing core the control plane loads at start.
    expect(text).toMatch(/build\/kvroute-core\.wasm/);
    expect(pod.securityContext.runAsUser).toBe(10001);
  });

  it("the Wasm image: FROM scratch with a single plugin.wasm, as Istio and Envoy Gateway expect", () => {
    const lines = readRepoFile("deploy/wasm.Dockerfile")
      .split("\n")
      .filter((l) => l.trim() !== "" && !l.startsWith("#"));
    expect(lines).toEqual(["FROM scratch", "COPY build/kvroute.wasm ./plugin.wasm"]);
  });
});
