// What istiod does with kvroute's EnvoyFilters (istio-xds-model.ts, from Istio 1.29.2): which
// generated cluster the CLUSTER MERGE lands on and what it leaves there, which listener each
// listener-bound patch touches, and how the HTTPS example relates to the HTTP artifacts.
import { describe, expect, it } from "vitest";
import { loadYamlFiles, overrideHostPolicy as overrideHost, type YamlFile } from "./artifacts.ts";
import { validateEnvoy } from "./envoy-proto.ts";
import {
  clusterMatch,
  gatewayListener,
  generatedServiceCluster,
  listenerMatch,
  outboundClusterName,
  patchedClusters,
  patchedListener,
  protoMerge,
} from "./istio-xds-model.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests walk parsed YAML whose shape they assert
type Obj = Record<string, any>;

const files = loadYamlFiles("envoy");
const byName = (file: string) => files.find((f) => f.file === file) as YamlFile;
const docsOf = (file: string, kind: string) => byName(file).docs.filter((d) => d.kind === kind) as Obj[];
const envoyFilter = (file: string, name: string) =>
  docsOf(file, "EnvoyFilter").find((d) => d.metadata.name === name) as Obj;

const ENVOYFILTER = "envoy/istio/envoyfilter.yaml";
const HTTPS = "envoy/istio/examples/https.yaml";
const WASMPLUGIN = "envoy/istio/wasmplugin.yaml";

/** The VirtualService's (only) destination, and the cluster istiod generates for it. */
function destination(): { host: string; port: number; cluster: string } {
  const vs = docsOf(HTTPS, "VirtualService")[0] as Obj;
  const routes = vs.spec.http.flatMap((h: Obj) => h.route);
  expect(routes).toHaveLength(1);
  const { host, port } = routes[0].destination;
  return { host, port: port.number, cluster: outboundClusterName(host, port.number) };
}

/** The CLUSTER MERGE patches of a file. */
const clusterMerges = (file: string): Obj[] =>
  docsOf(file, "EnvoyFilter")
    .flatMap((d) => d.spec.configPatches)
    .filter((p: Obj) => p.applyTo === "CLUSTER" && p.patch.operation === "MERGE");

describe("Istio: the engines' cluster follows the filter's choice", () => {
  it("the CLUSTER MERGE matches the VirtualService's destination by service and port, and nothing else", () => {
    for (const file of [ENVOYFILTER, WASMPLUGIN]) {
      const merge = clusterMerges(file)[0] as Obj;
      expect(clusterMerges(file), file).toHaveLength(1);
      expect(Object.keys(merge.match.cluster).sort(), file).toEqual(["portNumber", "service"]);
      const dest = destination();
      expect(clusterMatch({ name: dest.cluster }, merge.match), file).toBe(true);
      // Near misses: another port, another service, the short service name, the control plane's
      // cluster, an inbound cluster. (A subset's cluster of the same service and port does match:
      // the patch names no subset.)
      const misses = [
        outboundClusterName(dest.host, dest.port + 1),
        outboundClusterName(`x${dest.host}`, dest.port),
        outboundClusterName(dest.host.replace(/\.svc\.cluster\.local$/, ""), dest.port),
        "kvroute_control_plane",
        `inbound|${dest.port}||`,
      ];
      for (const name of misses) expect(clusterMatch({ name }, merge.match), `${file}: ${name}`).toBe(false);
      expect(clusterMatch({ name: outboundClusterName(dest.host, dest.port, "v1") }, merge.match)).toBe(true);
    }
  });

  it("after the MERGE, the generated cluster carries envoy.yaml's override_host policy and stays valid", () => {
    const envoyYaml = byName("envoy/envoy.yaml").docs[0] as Obj;
    const engines = envoyYaml.static_resources.clusters.find(
      (c: Obj) =>
        c.name ===
        envoyYaml.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config
          .virtual_hosts[0].routes[0].route.cluster,
    );
    const dest = destination();
    for (const file of [ENVOYFILTER, WASMPLUGIN]) {
      const before = generatedServiceCluster(dest.host, dest.port);
      expect(overrideHost(before)).toBeNull();
      const clusters = patchedClusters([before], docsOf(file, "EnvoyFilter"));
      const after = clusters.find((c) => c.name === dest.cluster) as Obj;
      expect(validateEnvoy("envoy.config.cluster.v3.Cluster", after), file).toEqual([]);
      expect(after.load_balancing_policy, file).toEqual(engines.load_balancing_policy);
      expect(overrideHost(after), file).toEqual(overrideHost(engines));
      // As Istio does for an InferencePool's cluster (cluster_builder.go applyOverrideHostPolicy).
      expect(after.lb_policy, file).toBe("CLUSTER_PROVIDED");
      // What the MERGE must not disturb: the cluster's discovery and name.
      expect({ ...after, lb_policy: before.lb_policy, load_balancing_policy: undefined }).toEqual({
        ...before,
        load_balancing_policy: undefined,
      });
      expect(
        clusters.map((c) => c.name),
        file,
      ).toEqual([dest.cluster, "kvroute_control_plane"]);
    }
  });

  it("the MERGE model: lists append (so a cluster that already had a policy keeps it first), zero values never overwrite", () => {
    const merged = protoMerge(
      { lb_policy: "LEAST_REQUEST", load_balancing_policy: { policies: [{ a: 1 }] }, keep: true },
      { lb_policy: "CLUSTER_PROVIDED", load_balancing_policy: { policies: [{ b: 2 }] }, keep: false },
    );
    expect(merged).toEqual({
      lb_policy: "CLUSTER_PROVIDED",
      load_balancing_policy: { policies: [{ a: 1 }, { b: 2 }] },
      keep: true,
    });
    // Envoy uses the first policy it supports: override_host merged behind another one is ignored.
    expect(overrideHost({ load_balancing_policy: merged.load_balancing_policy })).toBeNull();
  });
});

describe("Istio: listener-bound patches touch one listener", () => {
  const listenerPatches = (file: string): Obj[] =>
    docsOf(file, "EnvoyFilter")
      .flatMap((d) => d.spec.configPatches)
      .filter((p: Obj) => ["LISTENER", "HTTP_FILTER", "FILTER_CHAIN", "NETWORK_FILTER"].includes(p.applyTo));

  it("every LISTENER and HTTP_FILTER patch names a listener port", () => {
    for (const file of [ENVOYFILTER, HTTPS, WASMPLUGIN])
      for (const p of listenerPatches(file)) {
        expect(p.match.context, file).toBe("GATEWAY");
        expect(Number.isInteger(p.match.listener?.portNumber), `${file}: ${p.applyTo}`).toBe(true);
      }
    expect(listenerPatches(ENVOYFILTER).length).toBeGreaterThan(0);
  });

  it("applied to a gateway with several listeners, the patches change only the named one", () => {
    for (const file of [ENVOYFILTER, HTTPS]) {
      const filter = envoyFilter(file, "kvroute-listener");
      const ports = [...new Set(listenerPatches(file).map((p) => p.match.listener.portNumber))];
      expect(ports, file).toHaveLength(1);
      const port = ports[0] as number;
      // The gateway's other listeners: the other HTTP(S) port, the status port.
      for (const other of [8080, 8443, 15021].filter((p) => p !== port)) {
        const listener = gatewayListener(other);
        expect(patchedListener(listener, [filter]), `${file}: ${other}`).toEqual(listener);
      }
      const target: Obj = patchedListener(gatewayListener(port), [filter]);
      expect(validateEnvoy("envoy.config.listener.v3.Listener", target), file).toEqual([]);
      const filters = target.filter_chains[0].filters[0].typed_config.http_filters.map((f: Obj) => f.name);
      expect(filters, file).toEqual([
        "envoy.filters.http.header_mutation",
        "envoy.filters.http.wasm",
        "envoy.filters.http.router",
      ]);
      const merge = listenerPatches(file).find((p) => p.applyTo === "LISTENER") as Obj;
      expect(target.per_connection_buffer_limit_bytes).toBe(
        merge.patch.value.per_connection_buffer_limit_bytes,
      );
    }
    // The model's match: the port, not the listener's name or address.
    expect(listenerMatch(gatewayListener(8080), { listener: { portNumber: 8080 } })).toBe(true);
    expect(listenerMatch(gatewayListener(18080), { listener: { portNumber: 8080 } })).toBe(false);
  });

  it("the HTTPS example's listener EnvoyFilter is envoyfilter.yaml's with port 8443 instead of 8080", () => {
    const http = structuredClone(envoyFilter(ENVOYFILTER, "kvroute-listener"));
    const https = envoyFilter(HTTPS, "kvroute-listener");
    const ports = (f: Obj) => [...new Set(f.spec.configPatches.map((p: Obj) => p.match.listener.portNumber))];
    expect(ports(http)).toEqual([8080]);
    expect(ports(https)).toEqual([8443]);
    for (const p of http.spec.configPatches) p.match.listener.portNumber = 8443;
    // Same name and namespace: applying the example replaces the HTTP listener's EnvoyFilter.
    expect(https).toEqual(http);
    // The example does not repeat the cluster patches: envoyfilter.yaml's kvroute-clusters stay.
    expect(docsOf(HTTPS, "EnvoyFilter")).toHaveLength(1);
  });

  it("the HTTPS example's Gateway runs on the pods the EnvoyFilters select and serves the VirtualService's host", () => {
    const [gateway] = docsOf(HTTPS, "Gateway");
    const [vs] = docsOf(HTTPS, "VirtualService");
    for (const file of [ENVOYFILTER, HTTPS])
      for (const f of docsOf(file, "EnvoyFilter")) {
        expect(f.spec.workloadSelector.labels, `${file}: ${f.metadata.name}`).toEqual(gateway?.spec.selector);
        expect(f.metadata.namespace).toBe(gateway?.metadata.namespace);
      }
    expect(vs?.spec.gateways).toEqual([gateway?.metadata.name]);
    expect(gateway?.spec.servers.flatMap((s: Obj) => s.hosts)).toEqual(vs?.spec.hosts);
    expect(gateway?.spec.servers.map((s: Obj) => s.port.protocol)).toEqual(["HTTPS"]);
  });
});
