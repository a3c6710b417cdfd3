// What Envoy Gateway does with kvroute's resources (envoy-gateway-model.ts and
// envoy-gateway-route.ts, from Envoy Gateway v1.9.0): which route the policies attach to, what the
// BackendTrafficPolicy becomes on the route's cluster, where the HTTPS example's patches land, and
// what the ClientTrafficPolicy does to a client's destination header.
import { describe, expect, it } from "vitest";
import { HeaderMap } from "../../host/header-map.ts";
import { loadYamlFiles, overrideHostPolicy, type YamlFile } from "./artifacts.ts";
import {
  applyListenerPatches,
  earlyHeaderMutation,
  generatedListener,
  generatedWasmFilter,
  jsonPathPointers,
} from "./envoy-gateway-model.ts";
import { endpointOverridePolicy, generatedRuleCluster, ruleClusterName } from "./envoy-gateway-route.ts";
import { validateEnvoy } from "./envoy-proto.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests walk parsed YAML whose shape they assert
type Obj = Record<string, any>;

const DESTINATION = "x-gateway-destination-endpoint";
const files = loadYamlFiles("envoy");
const byName = (file: string) => files.find((f) => f.file === file) as YamlFile;
const one = (file: string, kind: string) => byName(file).docs.find((d) => d.kind === kind) as Obj;

const eep = () => one("envoy/envoy-gateway/extension-policy.yaml", "EnvoyExtensionPolicy");
const btp = () => one("envoy/envoy-gateway/backend-traffic-policy.yaml", "BackendTrafficPolicy");
const ctp = () => one("envoy/envoy-gateway/client-traffic-policy.yaml", "ClientTrafficPolicy");
const patchPolicy = () => one("envoy/envoy-gateway/patch-policy.yaml", "EnvoyPatchPolicy");
const EXAMPLE = "envoy/envoy-gateway/examples/https.yaml";

/** The Envoy listener name Envoy Gateway gives a Gateway listener: <namespace>/<gateway>/<listener>. */
const envoyListenerName = (gateway: Obj, listener: Obj) =>
  `${gateway.metadata.namespace}/${gateway.metadata.name}/${listener.name}`;

/** Does a policy's target reference name this object (same namespace: policies target locally)? */
const targets = (policy: Obj, object: Obj) =>
  policy.metadata.namespace === object.metadata.namespace &&
  [...(policy.spec.targetRefs ?? []), ...(policy.spec.targetRef ? [policy.spec.targetRef] : [])].some(
    (r: Obj) =>
      r.group === object.apiVersion.split("/")[0] &&
      r.kind === object.kind &&
      r.name === object.metadata.name,
  );

describe("Envoy Gateway: the route's own cluster follows the filter's choice", () => {
  it("the BackendTrafficPolicy targets the HTTPRoute the Wasm filter is on", () => {
    const route = one(EXAMPLE, "HTTPRoute");
    expect(targets(eep(), route)).toBe(true);
    expect(targets(btp(), route)).toBe(true);
    expect(btp().spec.targetRefs).toEqual(eep().spec.targetRefs);
    // Near miss: a policy in another namespace does not attach to the route.
    expect(targets({ ...btp(), metadata: { ...btp().metadata, namespace: "llm" } }, route)).toBe(false);
  });

  it("translated, endpointOverride is envoy.yaml's override_host policy on the rule's cluster", () => {
    const envoyYaml = byName("envoy/envoy.yaml").docs[0] as Obj;
    const engines = envoyYaml.static_resources.clusters.find((c: Obj) => overrideHostPolicy(c) !== null);
    const cluster = generatedRuleCluster(one(EXAMPLE, "HTTPRoute"), 0, btp());
    expect(cluster.name).toBe("httproute/default/llm/rule/0");
    expect(validateEnvoy("envoy.config.cluster.v3.Cluster", cluster)).toEqual([]);
    expect(cluster.load_balancing_policy).toEqual(engines.load_balancing_policy);
    expect(overrideHostPolicy(cluster)).toEqual({
      headers: [DESTINATION],
      fallback: "envoy.load_balancing_policies.least_request",
    });
    // The translation follows the BTP: another header, another type.
    const lb = structuredClone(btp().spec.loadBalancer);
    lb.type = "RoundRobin";
    lb.endpointOverride.extractFrom = [{ header: "x-other" }];
    expect(overrideHostPolicy({ load_balancing_policy: endpointOverridePolicy(lb) })).toEqual({
      headers: ["x-other"],
      fallback: "envoy.load_balancing_policies.round_robin",
    });
  });

  it("the example's HTTPRoute has one rule, so every backend the filter may name is in that one cluster", () => {
    const route = one(EXAMPLE, "HTTPRoute");
    expect(route.spec.rules).toHaveLength(1);
    expect(ruleClusterName(route, 0)).toBe(generatedRuleCluster(route, 0, btp()).name);
  });
});

describe("Envoy Gateway: the HTTPS example", () => {
  const gateway = () => one(EXAMPLE, "Gateway");
  const example = () => one(EXAMPLE, "EnvoyPatchPolicy");
  const httpsListener = (): Obj => {
    const [l] = gateway().spec.listeners;
    return generatedListener(envoyListenerName(gateway(), l), [generatedWasmFilter(eep(), 0)], {
      https: { hostnames: [l.hostname] },
    });
  };

  it("its Gateway, HTTPRoute and policies are the ones parts 1, 2 and 4 attach to", () => {
    const route = one(EXAMPLE, "HTTPRoute");
    const [listener] = gateway().spec.listeners;
    expect(listener.protocol).toBe("HTTPS");
    expect(route.spec.parentRefs).toEqual([{ name: gateway().metadata.name, sectionName: listener.name }]);
    expect(route.spec.hostnames).toEqual([listener.hostname]);
    expect(targets(example(), gateway())).toBe(true);
    expect(targets(ctp(), gateway())).toBe(true);
    expect(targets(patchPolicy(), gateway())).toBe(true);
  });

  it("its Listener patches name the HTTPS listener, and their jsonPath finds the Wasm filter in its server_names filter chain", () => {
    const listener = httpsListener();
    const names = new Set(
      example()
        .spec.jsonPatches.filter((p: Obj) => p.type.endsWith("envoy.config.listener.v3.Listener"))
        .map((p: Obj) => p.name),
    );
    expect([...names]).toEqual([listener.name]);
    expect(listener.name).toBe("default/eg/https");
    for (const p of example().spec.jsonPatches.filter((p: Obj) => p.operation.jsonPath !== undefined))
      for (const at of jsonPathPointers(listener, p.operation.jsonPath))
        expect(at.startsWith("/filter_chains/0/filters/0/typed_config/http_filters/0")).toBe(true);
    expect(applyListenerPatches(listener, example())).toBe(2);
    expect(validateEnvoy("envoy.config.listener.v3.Listener", listener)).toEqual([]);
    expect(listener.default_filter_chain).toBeUndefined();
    const wasm = listener.filter_chains[0].filters[0].typed_config.http_filters[0].typed_config.config;
    expect(wasm.allow_on_headers_stop_iteration).toBe(true);
    expect(wasm.failure_policy).toBe("FAIL_RELOAD");
  });

  it("the HTTP patch policy does not reach the HTTPS listener, nor the example's the HTTP one", () => {
    const https = httpsListener();
    expect(applyListenerPatches(https, patchPolicy())).toBe(0);
    const http = generatedListener("default/eg/http", [generatedWasmFilter(eep(), 0)]);
    expect(applyListenerPatches(http, example())).toBe(0);
    // An HTTP-shaped listener of the HTTPS name still takes the patches: jsonPath searches anywhere.
    const renamed = generatedListener(https.name, [generatedWasmFilter(eep(), 0)]);
    expect(applyListenerPatches(renamed, example())).toBe(2);
  });

  it("its control-plane cluster is patch-policy.yaml's", () => {
    const added = (p: Obj) =>
      p.spec.jsonPatches.filter((j: Obj) => j.operation.path === "").map((j: Obj) => j.operation.value);
    expect(added(example())).toEqual(added(patchPolicy()));
  });
});

/** What Envoy's header_mutation early extension does to the request headers (remove only). */
function applyEarlyMutation(extensions: Obj[], h: HeaderMap): void {
  for (const ext of extensions)
    for (const m of ext.typed_config.mutations) {
      if (m.remove === undefined) throw new Error(`mutation not modelled: ${JSON.stringify(m)}`);
      h.remove(m.remove);
    }
}

describe("Envoy Gateway: a client never chooses the endpoint", () => {
  it("the ClientTrafficPolicy is on the Gateway the patch policy targets", () => {
    expect(ctp().spec.targetRefs).toEqual([patchPolicy().spec.targetRef]);
    expect(ctp().metadata.namespace).toBe(patchPolicy().metadata.namespace);
  });

  it("earlyRequestHeaders becomes the HCM's early header mutation, which drops a client's destination header before routing", () => {
    const ext = earlyHeaderMutation(ctp()) as Obj[];
    const listener = generatedListener("default/eg/http", [generatedWasmFilter(eep(), 0)], {
      earlyHeaderMutation: ext,
    });
    expect(validateEnvoy("envoy.config.listener.v3.Listener", listener)).toEqual([]);
    const client = new HeaderMap([
      [":path", "/v1/chat/completions"],
      ["X-Gateway-Destination-Endpoint", "10.0.1.11:8000"],
      [DESTINATION, "10.0.1.12:8000"],
      ["x-gateway-destination-endpoints", "kept"],
    ]);
    applyEarlyMutation(ext, client);
    expect(client.getAll(DESTINATION)).toEqual([]);
    expect(client.get("x-gateway-destination-endpoints")).toBe("kept");
    expect(client.get(":path")).toBe("/v1/chat/completions");
  });
});
