// The checks behind "Istio / Envoy Gateway resources have known fields only": our Envoy Gateway
// schemas and Istio field lists (test/deploy/schemas/) and @kubernetes-models/istio, each shown
// accepting a field upstream defines and refusing the near miss next to it.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseYaml, REPO, readRepoFile } from "./artifacts.ts";
import { crdProblems } from "./crd-problems.ts";
import { KIND_SCHEMAS } from "./schemas/index.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests edit parsed YAML whose shape they assert
type Obj = Record<string, any>;

/** A fresh copy of the first document of `kind` in a shipped artifact. */
const shipped = (file: string, kind: string): Obj =>
  structuredClone((parseYaml(file, readRepoFile(file)) as Obj[]).find((d) => d.kind === kind) as Obj);

const extensionPolicy = () => shipped("envoy/envoy-gateway/extension-policy.yaml", "EnvoyExtensionPolicy");
const patchPolicy = () => shipped("envoy/envoy-gateway/patch-policy.yaml", "EnvoyPatchPolicy");
const wasmPlugin = () => shipped("envoy/istio/wasmplugin.yaml", "WasmPlugin");
const envoyFilter = () => shipped("envoy/istio/envoyfilter.yaml", "EnvoyFilter");
const backendTrafficPolicy = () =>
  shipped("envoy/envoy-gateway/backend-traffic-policy.yaml", "BackendTrafficPolicy");
const clientTrafficPolicy = () =>
  shipped("envoy/envoy-gateway/client-traffic-policy.yaml", "ClientTrafficPolicy");
const gatewayApiGateway = () => shipped("envoy/envoy-gateway/examples/https.yaml", "Gateway");
const istioGateway = () => shipped("envoy/istio/examples/https.yaml", "Gateway");
const virtualService = () => shipped("envoy/istio/examples/https.yaml", "VirtualService");

describe("Envoy Gateway and Gateway API schemas", () => {
  it("EnvoyPatchPolicy takes one targetRef, never targetRefs", () => {
    const policy = patchPolicy();
    expect(crdProblems(policy, "p")).toEqual([]);
    const { targetRef, ...rest } = policy.spec;
    expect(crdProblems({ ...policy, spec: { ...rest, targetRefs: [targetRef] } }, "p")).toEqual([
      "p.spec.targetRef: required",
      "p.spec.targetRefs: unknown field",
    ]);
    expect(crdProblems({ ...policy, spec: { ...policy.spec, targetRefs: [targetRef] } }, "p")).toEqual([
      "p.spec.targetRefs: unknown field",
    ]);
  });

  it("EnvoyPatchPolicy's targetRef has no sectionName and needs all of group, kind and name", () => {
    const policy = patchPolicy();
    policy.spec.targetRef.sectionName = "http";
    expect(crdProblems(policy, "p")).toEqual(["p.spec.targetRef.sectionName: unknown field"]);
    const { group: _, ...noGroup } = patchPolicy().spec.targetRef;
    expect(crdProblems({ ...policy, spec: { ...policy.spec, targetRef: noGroup } }, "p")).toEqual([
      "p.spec.targetRef.group: required",
    ]);
    // The policies that inline Envoy Gateway's PolicyTargetReferences do take a sectionName.
    const eep = extensionPolicy();
    eep.spec.targetRefs[0].sectionName = "rule-0";
    expect(crdProblems(eep, "e")).toEqual([]);
  });

  it("EnvoyPatchPolicy operations: jsonPath and from exist, op is RFC 6902's lowercase", () => {
    const policy = patchPolicy();
    policy.spec.jsonPatches[0].operation = { op: "move", from: "/a", path: "/b" };
    expect(crdProblems(policy, "p")).toEqual([]);
    policy.spec.jsonPatches[0].operation = { op: "Add", path: "" };
    expect(crdProblems(policy, "p")).toEqual([
      'p.spec.jsonPatches[0].operation.op: expected one of add, remove, replace, move, copy, test, got "Add"',
    ]);
    policy.spec.jsonPatches[0].operation = { op: "add", jsonpath: "$..x", value: 1 };
    expect(crdProblems(policy, "p")).toEqual(["p.spec.jsonPatches[0].operation.jsonpath: unknown field"]);
    policy.spec.jsonPatches[0].type = "type.googleapis.com/envoy.config.listener.v3.Listeners";
    policy.spec.jsonPatches[0].operation = { op: "add", path: "" };
    expect(crdProblems(policy, "p")).toHaveLength(1);
  });

  it("EnvoyExtensionPolicy: mergeType and the image source's tls exist, and their values are checked", () => {
    const eep = extensionPolicy();
    eep.spec.mergeType = "StrategicMerge";
    eep.spec.wasm[0].code.image.tls = { caCertificateRef: { name: "ca" } };
    eep.spec.wasm[0].code.image.pullSecretRef = { name: "registry" };
    expect(crdProblems(eep, "e")).toEqual([]);
    eep.spec.mergeType = "Replace"; // refused by a CEL rule upstream
    eep.spec.wasm[0].code.image.tls.caCertificateRef = { nam: "ca" };
    expect(crdProblems(eep, "e")).toEqual([
      "e.spec.wasm[0].code.image.tls.caCertificateRef.name: required",
      "e.spec.wasm[0].code.image.tls.caCertificateRef.nam: unknown field",
      'e.spec.mergeType: expected one of StrategicMerge, JSONMerge, got "Replace"',
    ]);
  });

  it("EnvoyExtensionPolicy: the Wasm fields Envoy Gateway defines, and no others", () => {
    const eep = extensionPolicy();
    eep.spec.wasm[0].env = { hostKeys: ["KVROUTE_AUTH_TOKEN"] };
    eep.spec.wasm[0].code.pullPolicy = "Always";
    expect(crdProblems(eep, "e")).toEqual([]);
    eep.spec.wasm[0].rootId = "kvroute"; // Envoy Gateway spells it rootID
    eep.spec.wasm[0].failOpen = "false";
    eep.spec.wasm[0].code.type = "ConfigMap"; // listed by the field marker, not by the type's enum
    eep.spec.wasm[0].priority = 1; // commented out upstream
    expect(crdProblems(eep, "e")).toEqual([
      'e.spec.wasm[0].code.type: expected one of HTTP, Image, got "ConfigMap"',
      "e.spec.wasm[0].failOpen: expected boolean, got string",
      "e.spec.wasm[0].rootId: unknown field",
      "e.spec.wasm[0].priority: unknown field",
    ]);
  });

  it("ClientTrafficPolicy: connection.bufferLimit is a quantity in Envoy Gateway's own pattern", () => {
    const ctp = {
      apiVersion: "gateway.envoyproxy.io/v1alpha1",
      kind: "ClientTrafficPolicy",
      metadata: { name: "kvroute", namespace: "default" },
      spec: {
        targetRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "eg" }],
        connection: { bufferLimit: "8Mi" as unknown },
      },
    };
    for (const ok of ["8Mi", "8M", "8388608", 8388608, "1k"]) {
      ctp.spec.connection.bufferLimit = ok;
      expect(crdProblems(ctp, "c"), String(ok)).toEqual([]);
    }
    for (const bad of ["8MB", "8mi", "08Mi", "8 Mi", "1K", 8.5]) {
      ctp.spec.connection.bufferLimit = bad;
      expect(crdProblems(ctp, "c"), String(bad)).toHaveLength(1);
    }
    ctp.spec.connection = { bufferLimits: "8Mi" } as never;
    expect(crdProblems(ctp, "c")).toEqual(["c.spec.connection.bufferLimits: unknown field"]);
  });

  it("BackendTrafficPolicy: endpointOverride's fields are checked by name, count and type", () => {
    const btp = backendTrafficPolicy();
    expect(crdProblems(btp, "b")).toEqual([]);
    btp.spec.loadBalancer.endpointOverride.extractFrom[0].headr = "x-gateway-destination-endpoint";
    expect(crdProblems(btp, "b")).toEqual([
      "b.spec.loadBalancer.endpointOverride.extractFrom[0].headr: unknown field",
    ]);
    const lb = backendTrafficPolicy().spec.loadBalancer;
    lb.endpointOverride.extractFrom = [];
    lb.type = "leastRequest";
    lb.endpointOverrides = lb.endpointOverride;
    expect(crdProblems({ ...btp, spec: { ...btp.spec, loadBalancer: lb } }, "b")).toEqual([
      'b.spec.loadBalancer.type: expected one of ConsistentHash, LeastRequest, Random, RoundRobin, BackendUtilization, DynamicModule, got "leastRequest"',
      "b.spec.loadBalancer.endpointOverride.extractFrom: at least 1 item(s)",
      "b.spec.loadBalancer.endpointOverrides: unknown field",
    ]);
    const { type: _, ...noType } = backendTrafficPolicy().spec.loadBalancer;
    expect(crdProblems({ ...btp, spec: { ...btp.spec, loadBalancer: noType } }, "b")).toEqual([
      "b.spec.loadBalancer.type: required",
    ]);
  });

  it("BackendTrafficPolicy: the other loadBalancer fields and the spec's siblings exist; their near misses do not", () => {
    const btp = backendTrafficPolicy();
    Object.assign(btp.spec.loadBalancer, {
      slowStart: { window: "30s" },
      zoneAware: { weightedZones: [{ zone: "a", weight: 2 }] },
    });
    Object.assign(btp.spec, {
      retry: { numRetries: 3 },
      rateLimit: {},
      timeout: {},
      routingType: "Endpoint",
    });
    expect(crdProblems(btp, "b")).toEqual([]);
    btp.spec.loadBalancer.slowStart = { windw: "30s" };
    btp.spec.retries = btp.spec.retry;
    expect(crdProblems(btp, "b")).toEqual([
      "b.spec.loadBalancer.slowStart.window: required",
      "b.spec.loadBalancer.slowStart.windw: unknown field",
      "b.spec.retries: unknown field",
    ]);
  });

  it("ClientTrafficPolicy: earlyRequestHeaders is an HTTPHeaderFilter (set, add, remove…) with its bounds", () => {
    const ctp = clientTrafficPolicy();
    expect(crdProblems(ctp, "c")).toEqual([]);
    ctp.spec.headers.earlyRequestHeaders.set = [{ name: "x-a", value: "1" }];
    ctp.spec.headers.earlyRequestHeaders.add = [{ name: "x-b", value: "2" }];
    expect(crdProblems(ctp, "c")).toEqual([]);
    ctp.spec.headers.earlyRequestHeaders.removes = ["x-gateway-destination-endpoint"];
    ctp.spec.headers.earlyRequestHeaders.set = [{ name: "x a", value: "1" }];
    ctp.spec.headers.earlyRequestHeaders.remove = [
      "x-gateway-destination-endpoint",
      "x-gateway-destination-endpoint",
    ];
    ctp.spec.headers.earlyRequestHeader = {};
    expect(crdProblems(ctp, "c")).toEqual([
      "c.spec.headers.earlyRequestHeaders.remove[1]: duplicate in a list of type set",
      'c.spec.headers.earlyRequestHeaders.set[0].name: "x a" does not match ^[A-Za-z0-9!#$%&\'*+\\-.^_\\x60|~]+$',
      "c.spec.headers.earlyRequestHeaders.removes: unknown field",
      "c.spec.headers.earlyRequestHeader: unknown field",
    ]);
    ctp.spec.headers = { earlyRequestHeaders: { remove: [] } };
    expect(crdProblems(ctp, "c")).toEqual(["c.spec.headers.earlyRequestHeaders.remove: at least 1 item(s)"]);
  });

  it("Gateway API Gateway: listeners with their TLS; misspelt and out-of-range fields fail", () => {
    const gw = gatewayApiGateway();
    expect(crdProblems(gw, "g")).toEqual([]);
    gw.spec.listeners[0].tls.certificateRef = gw.spec.listeners[0].tls.certificateRefs;
    gw.spec.listeners[0].tls.mode = "terminate";
    gw.spec.listeners[0].port = 0;
    delete gw.spec.gatewayClassName;
    expect(crdProblems(gw, "g")).toEqual([
      "g.spec.gatewayClassName: required",
      "g.spec.listeners[0].port: must be >= 1, got 0",
      'g.spec.listeners[0].tls.mode: expected one of Terminate, Passthrough, got "terminate"',
      "g.spec.listeners[0].tls.certificateRef: unknown field",
    ]);
  });

  it("a Gateway is told apart by its apiVersion: Gateway API's or Istio's", () => {
    const gw = gatewayApiGateway();
    gw.apiVersion = "gateway.networking.k8s.io/v1beta2";
    expect(crdProblems(gw, "g")).toEqual([
      "g.apiVersion: expected networking.istio.io/v1 or gateway.networking.k8s.io/v1",
    ]);
    // Each apiVersion brings its own schema: Gateway API's fields are unknown to Istio's Gateway.
    gw.apiVersion = "networking.istio.io/v1";
    expect(crdProblems(gw, "g")).toContain("g.spec.listeners: unknown field");
  });
});

describe("Istio: @kubernetes-models/istio for values, our field lists for names", () => {
  it("WasmPlugin: verificationKey and match exist; the proto's snake_case names and Envoy's spellings do not", () => {
    const plugin = wasmPlugin();
    plugin.spec.verificationKey = "-----BEGIN PUBLIC KEY-----";
    plugin.spec.match = [{ mode: "SERVER", ports: [{ number: 8080 }] }];
    expect(crdProblems(plugin, "w")).toEqual([]);
    plugin.spec.verification_key = plugin.spec.verificationKey;
    plugin.spec.match = [{ mode: "server", ports: [{ port: 8080 }] }];
    plugin.spec.failStrategy = "FAIL_CLOSED"; // Envoy's spelling, not Istio's
    expect(crdProblems(plugin, "w")).toEqual([
      "w.spec.match[0].ports[0].port: unknown field",
      "w.spec.verification_key: unknown field",
      'w.spec.failStrategy: expected one of FAIL_CLOSE, FAIL_OPEN, FAIL_RELOAD, got "FAIL_CLOSED"',
      'w.spec.match[0].mode: expected one of UNDEFINED, CLIENT, SERVER, CLIENT_AND_SERVER, got "server"',
      "w.spec.match[0].ports[0].number: required",
    ]);
  });

  it("WasmPlugin: a required url and typed values", () => {
    const plugin = wasmPlugin();
    delete plugin.spec.url;
    plugin.spec.priority = "10";
    expect(crdProblems(plugin, "w")).toEqual([
      "w.spec.url: required",
      "w.spec.priority: expected integer, got string",
    ]);
  });

  it("EnvoyFilter: waypoint and proxy matches exist, with their own field names and types", () => {
    const filter = envoyFilter();
    filter.spec.configPatches[0].match = {
      context: "WAYPOINT",
      proxy: { proxyVersion: "^1\\.29.*" },
      waypoint: { portNumber: 8080, filter: { name: "envoy.filters.network.http_connection_manager" } },
    };
    expect(crdProblems(filter, "f")).toEqual([]);
    filter.spec.configPatches[0].match.waypoint.portNumber = "8080";
    filter.spec.configPatches[0].match.proxy = { version: "1.29" };
    filter.spec.configPatches[0].match.waypoint.filter.subfilter = { name: "x" };
    expect(crdProblems(filter, "f")).toEqual([
      "f.spec.configPatches[0].match.proxy.version: unknown field",
      "f.spec.configPatches[0].match.waypoint.filter.subfilter: unknown field",
      "f.spec.configPatches[0].match.waypoint.portNumber: expected integer, got string",
    ]);
  });

  it("EnvoyFilter: applyTo and operation are Istio's enums; a patch value is not this check's business", () => {
    const filter = envoyFilter();
    filter.spec.configPatches[0].patch.value.anything_envoy_takes = true;
    expect(crdProblems(filter, "f")).toEqual([]);
    filter.spec.configPatches[0].applyTo = "HTTP_FILTERS";
    filter.spec.configPatches[0].patch.operation = "insert_before";
    expect(crdProblems(filter, "f").map((p) => p.split(":")[0])).toEqual([
      "f.spec.configPatches[0].applyTo",
      "f.spec.configPatches[0].patch.operation",
    ]);
  });

  it("Istio Gateway: servers with TLS by name, values by Istio's model", () => {
    const gw = istioGateway();
    expect(crdProblems(gw, "g")).toEqual([]);
    gw.spec.servers[0].tls.credentialNam = "x";
    gw.spec.servers[0].port.numbr = 443;
    gw.spec.servers[0].tls.mode = "simple";
    expect(crdProblems(gw, "g")).toEqual([
      "g.spec.servers[0].port.numbr: unknown field",
      "g.spec.servers[0].tls.credentialNam: unknown field",
      'g.spec.servers[0].tls.mode: expected one of PASSTHROUGH, SIMPLE, MUTUAL, AUTO_PASSTHROUGH, ISTIO_MUTUAL, OPTIONAL_MUTUAL, got "simple"',
    ]);
  });

  it("VirtualService: the destination's fields by name, values by Istio's model", () => {
    const vs = virtualService();
    expect(crdProblems(vs, "v")).toEqual([]);
    vs.spec.http[0].route[0].destination.port.numbr = 8000;
    vs.spec.http[0].route[0].destination.hosts = ["x"];
    vs.spec.http[0].timeOut = "600s";
    vs.spec.http[0].route[0].weight = "100";
    expect(crdProblems(vs, "v")).toEqual([
      "v.spec.http[0].route[0].destination.port.numbr: unknown field",
      "v.spec.http[0].route[0].destination.hosts: unknown field",
      "v.spec.http[0].timeOut: unknown field",
      "v.spec.http[0].route[0].weight: expected integer, got string",
    ]);
  });

  it("apiVersion, name and namespace are checked for every kind", () => {
    const plugin = wasmPlugin();
    plugin.apiVersion = "extensions.istio.io/v1beta1";
    delete plugin.metadata.namespace;
    expect(crdProblems(plugin, "w")).toEqual([
      "w.apiVersion: expected extensions.istio.io/v1alpha1",
      "w.metadata: name and namespace are required",
    ]);
  });
});

describe("where the schemas come from", () => {
  const dir = join(REPO, "test/deploy/schemas");
  const kindFiles = readdirSync(dir).filter((f) => !["build.ts", "index.ts"].includes(f));
  const header = (f: string) => readFileSync(join(dir, f), "utf8").split("\n")[0] ?? "";

  it("each schema file names the upstream file and version it was checked against", () => {
    expect(kindFiles.length).toBe(KIND_SCHEMAS.length + 1); // + the shared Gateway API references
    for (const f of kindFiles)
      expect(header(f), f).toMatch(
        /checked against (envoyproxy\/gateway v\d+\.\d+\.\d+ api\/v1alpha1\/|istio\/api \d+\.\d+\.\d+ \w+\/v1(alpha|beta)\d\/|kubernetes-sigs\/gateway-api v\d+\.\d+\.\d+ apis\/v1\/|kubernetes-sigs\/gateway-api-inference-extension v\d+\.\d+\.\d+ api\/v1\/)\w+\.(go|proto)/,
      );
  });

  it("the Istio field lists were checked against the Istio version @kubernetes-models/istio was generated from", () => {
    const pkg = JSON.parse(
      readFileSync(join(REPO, "node_modules/@kubernetes-models/istio/package.json"), "utf8"),
    );
    const inputs = (pkg["crd-generate"].input as string[]).filter((u) => u.endsWith("crd-all.gen.yaml"));
    const generatedFrom = /\/istio\/istio\/([\d.]+)\//.exec(inputs[0] ?? "")?.[1];
    expect(generatedFrom).toMatch(/^\d+\.\d+\.\d+$/);
    for (const f of kindFiles.filter((f) => header(f).includes("istio/api")))
      expect(header(f), f).toContain(`istio/api ${generatedFrom} `);
  });
});
