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

describe("Envoy Gateway schemas", () => {
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
    expect(kindFiles.length).toBe(KIND_SCHEMAS.size + 1); // + the shared Gateway API references
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
