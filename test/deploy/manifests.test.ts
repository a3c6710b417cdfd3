// The Kubernetes base (deploy/) and the container build files: every manifest parses, the
// kustomization lists them all, and the fields the control plane depends on line up — the
// config in the ConfigMap passes the control plane's own parser, the Deployment runs it with
// that file, probes, token Secret and a non-root read-only container, the Service is the
// authority every gateway artifact dials, and RBAC covers every namespace discovery watches.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseConfigYaml } from "../../control-plane/src/config/load-config.ts";
import { envoyPieces, loadYamlFiles, pluginConfigs, REPO, readRepoFile } from "./artifacts.ts";
import { parseDockerfile, type Stage } from "./dockerfile.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests walk parsed YAML whose shape they assert
type Obj = Record<string, any>;

// The base only: deploy/gaie/ is its own kustomization (test/deploy/gaie.test.ts).
const files = loadYamlFiles("deploy").filter((f) => !f.file.startsWith("deploy/gaie/"));
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
    const dialing = new Set<string>();
    for (const f of gatewayArtifacts) {
      for (const site of pluginConfigs(f))
        expect((site.config as Obj).controlPlane.authority, `${f.file}: ${site.path}`).toBe(authority);
      for (const piece of envoyPieces(f).filter((p) => (p.value as Obj).name === "kvroute_control_plane")) {
        const endpoint = (piece.value as Obj).load_assignment.endpoints[0].lb_endpoints[0].endpoint;
        expect(endpoint.address.socket_address, `${f.file}: ${piece.path}`).toEqual({
          address: fqdn,
          port_value: 9090,
        });
        dialing.add(f.file);
      }
    }
    // Every gateway artifact that defines the control plane's cluster was checked.
    expect([...dialing]).toEqual([
      "envoy/envoy-gateway/examples/https.yaml",
      "envoy/envoy-gateway/patch-policy.yaml",
      "envoy/istio/envoyfilter.yaml",
      "envoy/istio/wasmplugin.yaml",
    ]);
  });

  it("RBAC lets the ServiceAccount list and watch EndpointSlices and Pods in every namespace discovery watches", () => {
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
      const rule = (group: string, resource: string) =>
        role.rules.find((r: Obj) => r.apiGroups.includes(group) && r.resources.includes(resource));
      // Exactly what discovery calls: a list, then a watch; nothing is read by name, nothing written.
      expect(rule("discovery.k8s.io", "endpointslices")?.verbs, ns).toEqual(["list", "watch"]);
      expect(rule("", "pods")?.verbs, ns).toEqual(["list", "watch"]);
      expect(role.rules.flatMap((r: Obj) => r.verbs).sort()).toEqual(["list", "list", "watch", "watch"]);
    }
  });

  it("the RBAC verbs match the Kubernetes calls discovery makes", () => {
    const dir = "control-plane/src/discovery";
    const code = readdirSync(join(REPO, dir))
      .filter((f) => f.startsWith("kubernetes") && f.endsWith(".ts"))
      .map((f) => readRepoFile(`${dir}/${f}`))
      .join("\n");
    // @kubernetes/client-node: list* needs `list`, Watch needs `watch`, read* would need `get`.
    expect(code).toMatch(/\.listNamespacedEndpointSlice\(/);
    expect(code).toMatch(/\.listNamespacedPod\(/);
    expect(code).toMatch(/new Watch\(/);
    expect(code).not.toMatch(/\.read(Namespaced)?[A-Z]\w*\(/);
    expect(code).not.toMatch(/\.(create|replace|patch|delete)(Namespaced)?[A-Z]\w*\(/);
  });

  it("every replica gets the tokenizer files from its own init container, not a shared ReadWriteOnce claim", () => {
    const volume = pod.volumes.find((v: Obj) => v.name === "tokenizers");
    expect(volume.emptyDir).toBeDefined();
    expect(volume.persistentVolumeClaim).toBeUndefined();
    const init = pod.initContainers.find((c: Obj) =>
      c.volumeMounts.some((m: Obj) => m.name === "tokenizers"),
    );
    const target = init.volumeMounts.find((m: Obj) => m.name === "tokenizers").mountPath;
    expect(init.command).toEqual(["cp", "-R", "/models/.", `${target}/`]);
    // The image the init container copies from puts the files where it reads them.
    const image = parseDockerfile(readRepoFile("deploy/tokenizers.Dockerfile")).at(-1) as Stage;
    expect(image.copies).toEqual([{ from: null, sources: ["."], dest: "/models/" }]);
    expect(init.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
    });
    expect(one("Kustomization").images.map((i: Obj) => i.name)).toContain(init.image.split(":")[0]);
    // The control plane reads the same volume, read-only.
    expect(container.volumeMounts.find((m: Obj) => m.name === "tokenizers")?.readOnly).toBe(true);
    // A claim shared by several replicas must be ReadOnlyMany (none is shipped today).
    for (const claim of docs.filter((d) => d.doc.kind === "PersistentVolumeClaim"))
      expect(claim.doc.spec.accessModes).toEqual(["ReadOnlyMany"]);
  });

  it("the PodDisruptionBudget lets one replica go at a time and never blocks a drain on unready pods", () => {
    const pdb = one("PodDisruptionBudget");
    expect(pdb.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    // Unready replicas (no engine up yet: /readyz 503) may always be evicted.
    expect(pdb.spec.unhealthyPodEvictionPolicy).toBe("AlwaysAllow");
    const allowed =
      pdb.spec.maxUnavailable ??
      deployment.spec.replicas - (pdb.spec.minAvailable ?? deployment.spec.replicas);
    expect(allowed).toBeGreaterThanOrEqual(1);
    expect(allowed).toBeLessThan(deployment.spec.replicas);
  });

  it("the NetworkPolicy admits the control plane's port", () => {
    const policy = one("NetworkPolicy", "kvroute-control-plane");
    expect(policy.spec.podSelector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    expect(policy.spec.ingress.flatMap((r: Obj) => r.ports.map((p: Obj) => p.port))).toEqual([9090]);
  });

  it("NATS (no credentials of its own) takes clients only from the control plane's pods, its monitoring port only from the monitoring namespace", () => {
    const policy = one("NetworkPolicy", "kvroute-nats");
    const nats = one("Deployment", "kvroute-nats");
    expect(policy.spec.podSelector.matchLabels).toEqual(nats.spec.selector.matchLabels);
    expect(policy.spec.policyTypes).toEqual(["Ingress"]);
    /** Whether the policy admits a pod with these labels in this namespace on this port (Kubernetes' rule: any rule whose peers and ports both match). */
    const admits = (labels: Record<string, string>, namespace: string, port: number): boolean =>
      policy.spec.ingress.some(
        (rule: Obj) =>
          rule.ports.some((p: Obj) => p.port === port && (p.protocol ?? "TCP") === "TCP") &&
          rule.from.some((peer: Obj) => {
            const podOk =
              peer.podSelector === undefined ||
              Object.entries(peer.podSelector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
            // A podSelector alone selects pods of the policy's own namespace.
            const nsOk =
              peer.namespaceSelector === undefined
                ? namespace === policy.metadata.namespace
                : Object.entries(peer.namespaceSelector.matchLabels ?? {}).every(
                    ([k, v]) => k === "kubernetes.io/metadata.name" && v === namespace,
                  );
            return podOk && nsOk;
          }),
      );
    const controlPlane = deployment.spec.template.metadata.labels as Record<string, string>;
    const ns = policy.metadata.namespace as string;
    expect(admits(controlPlane, ns, 4222)).toBe(true);
    // Near misses: the same app label on another component, the control plane's labels in another
    // namespace, the control plane on the monitoring port, the monitoring namespace on the client port.
    expect(admits({ ...controlPlane, "app.kubernetes.io/component": "gateway" }, ns, 4222)).toBe(false);
    expect(admits({ "app.kubernetes.io/name": "kvroute" }, ns, 4222)).toBe(false);
    expect(admits(controlPlane, "default", 4222)).toBe(false);
    expect(admits(controlPlane, ns, 8222)).toBe(false);
    expect(admits({}, "monitoring", 8222)).toBe(true);
    expect(admits({}, "monitoring", 4222)).toBe(false);
  });
});

describe("container build files", () => {
  it("the control plane image: a supported Node LTS, production dependencies, tsx from them, non-root, the port, the config path", () => {
    const stages = parseDockerfile(readRepoFile("deploy/Dockerfile"));
    const runtime = stages.at(-1) as Stage;
    // Node 20 is end-of-life (2026-04-30); 22 and 24 are the supported LTS lines. Every stage
    // uses the same one, so the core is built by the Node that runs it.
    const images = new Set(stages.map((s) => s.image));
    expect(images.size).toBe(1);
    expect([...images][0]).toMatch(/^node:(22|24)-slim$/);
    expect(runtime.runs.join(" ")).toMatch(/npm ci --omit=dev/);
    // No global install: tsx is a production dependency and comes with `npm ci --omit=dev`.
    expect(readRepoFile("deploy/Dockerfile")).not.toMatch(/npm (install|i) (-g|--global)/);
    const pkg = JSON.parse(readRepoFile("package.json"));
    expect(pkg.dependencies.tsx).toBeDefined();
    expect(pkg.devDependencies?.tsx).toBeUndefined();
    expect(runtime.entrypoint).toEqual(["node", "--import", "tsx", "control-plane/bin/kvroute.ts"]);
    expect(runtime.cmd).toEqual(container.args);
    expect(runtime.user).toBe("10001:10001");
    expect(runtime.expose).toEqual([String(container.ports[0].containerPort)]);
    expect(pod.securityContext.runAsUser).toBe(10001);
    // The Node routing core the control plane loads at start.
    expect(runtime.copies.flatMap((c) => c.sources)).toContain("/src/build/kvroute-core.wasm");
  });

  it("the build stage copies every file the build script reads", () => {
    const build = parseDockerfile(readRepoFile("deploy/Dockerfile")).find((s) => s.name === "build") as Stage;
    const copied = build.copies.flatMap((c) => c.sources);
    for (const needed of ["package.json", "package-lock.json", "asconfig.json", "scripts", "filter"])
      expect(copied, needed).toContain(needed);
    expect(build.runs.some((r) => r.startsWith("node scripts/build.mjs"))).toBe(true);
  });

  it("the Wasm image: FROM scratch with a single plugin.wasm, as Istio and Envoy Gateway expect", () => {
    const lines = readRepoFile("deploy/wasm.Dockerfile")
      .split("\n")
      .filter((l) => l.trim() !== "" && !l.startsWith("#"));
    expect(lines).toEqual(["FROM scratch", "COPY build/kvroute.wasm ./plugin.wasm"]);
  });
});
