// Every Envoy artifact — envoy/envoy.yaml, the Envoy pieces inside the Istio EnvoyFilters and
// Envoy Gateway's EnvoyPatchPolicy — against Envoy's own API protos, plus the wiring kvroute
// depends on (filter order, clusters, one route whose cluster follows the filter's choice) and the
// embedded plugin configuration. A broken field fails with the file and the path of the field.
// Istio and Envoy Gateway each have their own file for what their translators do with these
// (istio-artifacts.test.ts, envoy-gateway-artifacts.test.ts); route-policies.test.ts runs the
// translated routes through the Node host.
import { describe, expect, it } from "vitest";
import { BODY_HEADROOM_BYTES, bufferLimitProblem } from "../../control-plane/src/cli/envoy-config.ts";
import {
  type Doc,
  definedClusters,
  envoyPieces,
  envoyProblems,
  loadYamlFiles,
  originalDstSites,
  overrideHostPolicy,
  parseYaml,
  pluginConfigs,
  readRepoFile,
  routeEdits,
  type YamlFile,
} from "./artifacts.ts";
import { crdProblems } from "./crd-problems.ts";
import {
  applyListenerPatches,
  generatedListener,
  generatedWasmFilter,
  wasmIrName,
} from "./envoy-gateway-model.ts";
import { validateEnvoy } from "./envoy-proto.ts";
import { pluginConfigProblems } from "./plugin-config.ts";

const files = loadYamlFiles("envoy");

/** A Kubernetes quantity as Envoy Gateway's bufferLimit pattern allows it, in bytes. */
function quantityBytes(q: string | number): number {
  if (typeof q === "number") return q;
  const m = /^([1-9][0-9]*)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$/.exec(q);
  if (m === null) throw new Error(`not a quantity: ${q}`);
  const binary = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
  const decimal = ["k", "M", "G", "T", "P", "E"];
  const unit = m[2] ?? "";
  const scale =
    unit === ""
      ? 1
      : binary.includes(unit)
        ? 1024 ** (binary.indexOf(unit) + 1)
        : 1000 ** (decimal.indexOf(unit) + 1);
  return Number(m[1]) * scale;
}
const byName = (file: string) => {
  const found = files.find((f) => f.file === file);
  if (found === undefined) throw new Error(`no artifact ${file}`);
  return found;
};
// biome-ignore lint/suspicious/noExplicitAny: tests walk parsed YAML whose shape they assert
type Obj = Record<string, any>;

const DESTINATION = "x-gateway-destination-endpoint";
const envoyYaml = () => byName("envoy/envoy.yaml").docs[0] as Obj;
const hcmOfEnvoyYaml = (bootstrap: Obj = envoyYaml()) =>
  bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
/** Every configPatch of every EnvoyFilter in a file. */
const istioPatches = (file: string): Obj[] =>
  byName(file)
    .docs.filter((d) => d.kind === "EnvoyFilter")
    .flatMap((d) => (d as Obj).spec.configPatches as Obj[]);

describe("Envoy artifacts", () => {
  it("finds the artifacts, the worked examples included", () => {
    expect(files.map((f) => f.file)).toEqual([
      "envoy/envoy-gateway/backend-traffic-policy.yaml",
      "envoy/envoy-gateway/client-traffic-policy.yaml",
      "envoy/envoy-gateway/examples/https.yaml",
      "envoy/envoy-gateway/extension-policy.yaml",
      "envoy/envoy-gateway/patch-policy.yaml",
      "envoy/envoy.yaml",
      "envoy/istio/envoyfilter.yaml",
      "envoy/istio/examples/https.yaml",
      "envoy/istio/wasmplugin.yaml",
    ]);
  });

  it.each(files.map((f) => [f.file, f] as const))("%s is valid against Envoy's API protos", (_name, file) => {
    expect(envoyProblems(file)).toEqual([]);
  });

  it.each(files.map((f) => [f.file, f] as const))(
    "%s embeds exactly the protocol-1 plugin configuration",
    (_name, file) => {
      for (const site of pluginConfigs(file))
        expect(pluginConfigProblems(site.config, `${file.file}: ${site.path}`)).toEqual([]);
    },
  );

  it.each(files.map((f) => [f.file, f] as const))(
    "%s: Istio / Envoy Gateway / Gateway API resources have known fields only",
    (_name, file) => {
      expect(file.docs.flatMap((doc, i) => crdProblems(doc, `${file.file}: [${i}]`))).toEqual([]);
      // crdProblems passes kinds it does not know: every kind shipped must be one it checks.
      const kinds = file.docs.map((d) => `${d.apiVersion ?? ""} ${d.kind ?? "Bootstrap"}`);
      for (const k of kinds)
        expect(
          [
            " Bootstrap",
            "networking.istio.io/v1alpha3 EnvoyFilter",
            "extensions.istio.io/v1alpha1 WasmPlugin",
            "networking.istio.io/v1 Gateway",
            "networking.istio.io/v1 VirtualService",
            "gateway.envoyproxy.io/v1alpha1 EnvoyExtensionPolicy",
            "gateway.envoyproxy.io/v1alpha1 EnvoyPatchPolicy",
            "gateway.envoyproxy.io/v1alpha1 ClientTrafficPolicy",
            "gateway.envoyproxy.io/v1alpha1 BackendTrafficPolicy",
            "gateway.networking.k8s.io/v1 Gateway",
            "gateway.networking.k8s.io/v1 HTTPRoute",
          ],
          file.file,
        ).toContain(k);
    },
  );

  it("every artifact that loads the filter names a control-plane cluster it (or its companion resources) defines", () => {
    const groups: Array<[string[], string]> = [
      [["envoy/envoy.yaml"], "envoy/envoy.yaml"],
      [["envoy/istio/envoyfilter.yaml"], "envoy/istio/envoyfilter.yaml"],
      // The HTTPS example replaces the listener EnvoyFilter only: the clusters stay envoyfilter.yaml's.
      [["envoy/istio/envoyfilter.yaml"], "envoy/istio/examples/https.yaml"],
      [["envoy/istio/wasmplugin.yaml"], "envoy/istio/wasmplugin.yaml"],
      [["envoy/envoy-gateway/patch-policy.yaml"], "envoy/envoy-gateway/extension-policy.yaml"],
      [["envoy/envoy-gateway/examples/https.yaml"], "envoy/envoy-gateway/extension-policy.yaml"],
    ];
    for (const [group, withFilter] of groups) {
      const clusters = new Map(group.flatMap((f) => [...definedClusters(byName(f))]));
      const sites = pluginConfigs(byName(withFilter));
      expect(sites.length, withFilter).toBe(1);
      const cfg = sites[0]?.config as Obj;
      expect(clusters.has(cfg.controlPlane.cluster), `${group}: cluster ${cfg.controlPlane.cluster}`).toBe(
        true,
      );
    }
  });

  it("no artifact adds a route or an ORIGINAL_DST cluster: routed requests keep the user's route", () => {
    for (const file of files) {
      expect(routeEdits(file), file.file).toEqual([]);
      expect(originalDstSites(file), file.file).toEqual([]);
    }
    // The checks find what the artifacts had before: a header-matched route, an ORIGINAL_DST cluster.
    const old: YamlFile = {
      file: "old.yaml",
      docs: [
        {
          kind: "EnvoyFilter",
          spec: {
            configPatches: [
              {
                applyTo: "HTTP_ROUTE",
                patch: { operation: "INSERT_FIRST", value: { name: "r", route: {} } },
              },
              { applyTo: "CLUSTER", patch: { operation: "ADD", value: { name: "o", type: "ORIGINAL_DST" } } },
            ],
          },
        },
        {
          kind: "EnvoyPatchPolicy",
          spec: {
            jsonPatches: [
              {
                type: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
                name: "default/eg/http",
                operation: { op: "add", path: "/virtual_hosts/0/routes/0", value: { name: "r" } },
              },
            ],
          },
        },
      ],
    };
    expect(routeEdits(old)).toEqual([
      "old.yaml: [0].spec.configPatches[0] (HTTP_ROUTE)",
      "old.yaml: [1].spec.jsonPatches[0] (RouteConfiguration)",
      "old.yaml: [0].spec.configPatches[0].patch.value (envoy.config.route.v3.Route)",
      "old.yaml: [1].spec.jsonPatches[0].operation.value (envoy.config.route.v3.Route)",
    ]);
    expect(originalDstSites(old)).toEqual(["old.yaml: [0].spec.configPatches[1].patch.value.type"]);
  });

  it("envoy.yaml: header guard, then the Wasm filter, then the router; one route; admin on loopback", () => {
    const bootstrap = envoyYaml();
    expect(bootstrap.admin.address.socket_address.address).toBe("127.0.0.1");
    const listener = bootstrap.static_resources.listeners[0];
    const hcm = hcmOfEnvoyYaml();
    expect(hcm.http_filters.map((f: Obj) => f.name)).toEqual([
      "envoy.filters.http.header_mutation",
      "envoy.filters.http.wasm",
      "envoy.filters.http.router",
    ]);
    const wasm = hcm.http_filters[1].typed_config.config;
    expect([wasm.root_id, wasm.vm_config.vm_id, wasm.vm_config.runtime]).toEqual([
      "kvroute",
      "kvroute",
      "envoy.wasm.runtime.v8",
    ]);
    expect(wasm.vm_config.code.local.filename).toBe("build/kvroute.wasm");
    expect(hcm.http_filters[0].typed_config.mutations.request_mutations).toEqual([{ remove: DESTINATION }]);
    // One virtual host, one route: the filter's header write re-picks the route and finds this one.
    expect(hcm.route_config.virtual_hosts).toHaveLength(1);
    const routes = hcm.route_config.virtual_hosts[0].routes;
    expect(routes).toHaveLength(1);
    expect(routes[0].match).toEqual({ prefix: "/" });
    expect([...definedClusters(byName("envoy/envoy.yaml")).keys()].sort()).toEqual(
      [routes[0].route.cluster, JSON.parse(wasm.configuration.value).controlPlane.cluster].sort(),
    );
    // Envoy answers 413 before the filter sees a body larger than its buffer limit.
    const cfg = JSON.parse(wasm.configuration.value);
    expect(listener.per_connection_buffer_limit_bytes).toBeGreaterThan(cfg.maxBodyBytes);
    expect(cfg.controlPlane.authority).toBe("127.0.0.1:9090");
  });

  it("envoy.yaml: the route's cluster follows the destination header with override_host and balances without it", () => {
    const hcm = hcmOfEnvoyYaml();
    const name = hcm.route_config.virtual_hosts[0].routes[0].route.cluster;
    const cluster = definedClusters(byName("envoy/envoy.yaml")).get(name) as Obj;
    expect(overrideHostPolicy(cluster)).toEqual({
      headers: [DESTINATION],
      fallback: "envoy.load_balancing_policies.least_request",
    });
    expect(cluster.load_assignment.endpoints.flatMap((l: Obj) => l.lb_endpoints).length).toBeGreaterThan(0);
  });

  it("the control-plane cluster is the same in every Kubernetes artifact", () => {
    const k8s = files.filter(
      (f) => f.file !== "envoy/envoy.yaml" && definedClusters(f).has("kvroute_control_plane"),
    );
    expect(k8s.map((f) => f.file)).toEqual([
      "envoy/envoy-gateway/examples/https.yaml",
      "envoy/envoy-gateway/patch-policy.yaml",
      "envoy/istio/envoyfilter.yaml",
      "envoy/istio/wasmplugin.yaml",
    ]);
    const [first, ...rest] = k8s.map((f) => definedClusters(f).get("kvroute_control_plane"));
    for (const other of rest) expect(other).toEqual(first);
  });
});

/** The Wasm PluginConfig of a Bootstrap or an Istio EnvoyFilter (the one HTTP filter of that type). */
function wasmPluginConfig(file: string): Obj {
  const configs: Obj[] = [];
  for (const piece of envoyPieces(byName(file))) {
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node !== null && typeof node === "object") {
        const o = node as Obj;
        if (o["@type"] === "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm")
          configs.push(o.config);
        else Object.values(o).forEach(walk);
      }
    };
    walk(piece.value);
  }
  expect(configs.length, file).toBe(1);
  return configs[0] as Obj;
}

/** Does the header guard run right ahead of the Wasm filter (envoy.yaml), or get inserted before it (Istio)? */
function guardRunsFirst(file: YamlFile): boolean {
  const strips = (mutations: unknown) =>
    JSON.stringify(mutations) === JSON.stringify([{ remove: DESTINATION }]);
  if (file.file === "envoy/envoy.yaml") {
    const hcm = hcmOfEnvoyYaml(file.docs[0] as Obj);
    const names = hcm.http_filters.map((f: Obj) => f.name);
    const guard = hcm.http_filters[names.indexOf("envoy.filters.http.header_mutation")];
    return (
      names.indexOf("envoy.filters.http.header_mutation") === names.indexOf("envoy.filters.http.wasm") - 1 &&
      strips(guard.typed_config.mutations.request_mutations)
    );
  }
  const patches = file.docs
    .filter((d) => d.kind === "EnvoyFilter")
    .flatMap((d) => (d as Obj).spec.configPatches);
  const filters = patches.filter(
    (p: Obj) => p.applyTo === "HTTP_FILTER" && p.patch.operation === "INSERT_BEFORE",
  );
  const names = filters.map((p: Obj) => p.patch.value.name);
  const guard = filters[names.indexOf("envoy.filters.http.header_mutation")];
  return (
    guard !== undefined &&
    names.indexOf("envoy.filters.http.header_mutation") < names.indexOf("envoy.filters.http.wasm") &&
    strips(guard.patch.value.typed_config.mutations.request_mutations)
  );
}

/** Envoy Gateway's HTTP listener after patch-policy.yaml's Listener patches, as Envoy Gateway applies them. */
function patchedEnvoyGatewayListener(
  policyDoc: Obj = byName("envoy/envoy-gateway/extension-policy.yaml").docs[0] as Obj,
): Obj {
  const patch = byName("envoy/envoy-gateway/patch-policy.yaml").docs[0] as Obj;
  const names = new Set(
    (patch.spec.jsonPatches as Obj[])
      .filter((p) => p.type === "type.googleapis.com/envoy.config.listener.v3.Listener")
      .map((p) => p.name),
  );
  expect(names.size).toBe(1);
  const listener = generatedListener([...names][0], [generatedWasmFilter(policyDoc, 0)]);
  expect(applyListenerPatches(listener, patch)).toBe(2);
  return listener;
}

describe("what each gateway does with the artifacts", () => {
  it("every Wasm filter sets failure_policy explicitly (never the deprecated fail_open); FAIL_OPEN only behind the header guard", () => {
    for (const file of [
      "envoy/envoy.yaml",
      "envoy/istio/envoyfilter.yaml",
      "envoy/istio/examples/https.yaml",
    ]) {
      const cfg = wasmPluginConfig(file);
      expect(cfg.fail_open, file).toBeUndefined();
      expect(guardRunsFirst(byName(file)), file).toBe(true);
      expect(cfg.failure_policy, file).toBe("FAIL_OPEN");
    }
    // No guard runs ahead of a WasmPlugin or Envoy Gateway's filter: a failed VM must not be bypassed.
    const plugin = byName("envoy/istio/wasmplugin.yaml").docs[0] as Obj;
    expect(plugin.spec.failStrategy).toBe("FAIL_RELOAD");
    const policy = byName("envoy/envoy-gateway/extension-policy.yaml").docs[0] as Obj;
    expect(policy.spec.wasm[0].failOpen).toBe(false);
    const config = patchedEnvoyGatewayListener().default_filter_chain as Obj;
    const wasm = config.filters[0].typed_config.http_filters[0].typed_config.config;
    expect(wasm.failure_policy).toBe("FAIL_RELOAD");
    expect(wasm.fail_open).toBeUndefined();
  });

  it("a guard that strips another header, or runs after the Wasm filter, does not count", () => {
    const broken = (mutate: (filters: Obj[]) => void) => {
      const docs = parseYaml("envoy/envoy.yaml", readRepoFile("envoy/envoy.yaml")) as Obj[];
      mutate(hcmOfEnvoyYaml(docs[0]).http_filters);
      return guardRunsFirst({ file: "envoy/envoy.yaml", docs });
    };
    expect(broken(() => {})).toBe(true);
    expect(
      broken((f) => {
        (f[0] as Obj).typed_config.mutations.request_mutations = [{ remove: "x-gateway-destination" }];
      }),
    ).toBe(false);
    expect(broken((f) => f.splice(0, 2, f[1] as Obj, f[0] as Obj))).toBe(false);
  });

  it("allow_on_headers_stop_iteration is set wherever the gateway lets it be; the WasmPlugin says it routes by load", () => {
    for (const file of [
      "envoy/envoy.yaml",
      "envoy/istio/envoyfilter.yaml",
      "envoy/istio/examples/https.yaml",
    ])
      expect(wasmPluginConfig(file).allow_on_headers_stop_iteration, file).toBe(true);
    const listener = patchedEnvoyGatewayListener();
    expect(validateEnvoy("envoy.config.listener.v3.Listener", listener)).toEqual([]);
    const hcm = (listener.default_filter_chain as Obj).filters[0].typed_config;
    expect(hcm.http_filters[0].typed_config.config.allow_on_headers_stop_iteration).toBe(true);
    // Istio never sets the field for a WasmPlugin: its header must say so.
    const header = readRepoFile("envoy/istio/wasmplugin.yaml")
      .split("\n")
      .filter((l) => l.startsWith("#"));
    expect(header.join(" ")).toMatch(/ROUTES BY LOAD ONLY/);
    expect(header.join(" ")).toMatch(/allow_on_headers_stop_iteration/);
    for (const [file, floor] of [
      ["envoy/istio/envoyfilter.yaml", /Istio >= 1\.28/],
      ["envoy/envoy-gateway/patch-policy.yaml", /Envoy Gateway >= 1\.6/],
    ] as const)
      expect(readRepoFile(file), file).toMatch(floor);
  });

  it("Envoy Gateway's jsonPath finds the filter of this policy only", () => {
    const policy = structuredClone(byName("envoy/envoy-gateway/extension-policy.yaml").docs[0] as Obj);
    policy.metadata.name = "kvroute-canary";
    expect(() => patchedEnvoyGatewayListener(policy)).toThrow(/matches nothing/);
    expect(wasmIrName(byName("envoy/envoy-gateway/extension-policy.yaml").docs[0] as Obj, 0)).toBe(
      "envoyextensionpolicy/default/kvroute/wasm/0",
    );
  });

  it("every listener that buffers bodies for the filter holds maxBodyBytes + 1 MiB (else 413 before routing)", () => {
    const maxBody = (file: string) =>
      (pluginConfigs(byName(file))[0] as { config: Obj }).config.maxBodyBytes as number;
    const envoy = envoyYaml().static_resources.listeners[0];
    expect(
      bufferLimitProblem(envoy.per_connection_buffer_limit_bytes, maxBody("envoy/envoy.yaml")),
    ).toBeNull();
    for (const file of ["envoy/istio/envoyfilter.yaml", "envoy/istio/examples/https.yaml"]) {
      const istio = istioPatches(file).filter((p) => p.applyTo === "LISTENER");
      expect(istio, file).toHaveLength(1);
      expect(istio[0]?.match.context).toBe("GATEWAY");
      expect(istio[0]?.patch.operation).toBe("MERGE");
      expect(
        bufferLimitProblem(istio[0]?.patch.value.per_connection_buffer_limit_bytes, maxBody(file)),
        file,
      ).toBeNull();
    }
    const ctp = byName("envoy/envoy-gateway/client-traffic-policy.yaml").docs[0] as Obj;
    expect(
      bufferLimitProblem(
        quantityBytes(ctp.spec.connection.bufferLimit),
        maxBody("envoy/envoy-gateway/extension-policy.yaml"),
      ),
    ).toBeNull();
    // The WasmPlugin variant buffers nothing (watermark mode: backpressure, no 413), so it needs no patch.
    expect(istioPatches("envoy/istio/wasmplugin.yaml").some((p) => p.applyTo === "LISTENER")).toBe(false);
  });

  it("the invariant's near misses: 1 byte short fails, Envoy's and Envoy Gateway's defaults fail", () => {
    const body = 4 * 1024 * 1024;
    expect(bufferLimitProblem(body + BODY_HEADROOM_BYTES, body)).toBeNull();
    expect(bufferLimitProblem(body + BODY_HEADROOM_BYTES - 1, body)).toMatch(/413/);
    expect(bufferLimitProblem(undefined, body)).toMatch(/listener buffer limit 1048576/);
    expect(bufferLimitProblem(32768, undefined)).toMatch(/maxBodyBytes 4194304/);
    expect(quantityBytes("8Mi")).toBe(8 * 1024 * 1024);
    expect(quantityBytes("8M")).toBe(8_000_000);
    expect(quantityBytes("32768")).toBe(32768);
    expect(() => quantityBytes("8MB")).toThrow();
  });
});

describe("the validator fails broken artifacts with file and path", () => {
  const envoyYamlText = readRepoFile("envoy/envoy.yaml");
  const broken = (
    mutate: (docs: Doc[]) => void,
    file = "envoy/envoy.yaml",
    text = envoyYamlText,
  ): string[] => {
    const docs = parseYaml(file, text);
    mutate(docs);
    return envoyProblems({ file, docs });
  };

  it("an unknown field", () => {
    const problems = broken((d) => {
      (d[0] as Obj).static_resources.clusters[0].lb_polcy = "ROUND_ROBIN";
    });
    expect(problems).toEqual([
      "envoy/envoy.yaml: [0].static_resources.clusters[0].lb_polcy: unknown field in envoy.config.cluster.v3.Cluster",
    ]);
  });

  it("a wrong type and a bad enum value", () => {
    const problems = broken((d) => {
      const c = (d[0] as Obj).static_resources.clusters[0];
      c.connect_timeout = 2;
      c.type = "ORIGINAL_DESTINATION";
    });
    expect(problems).toEqual([
      'envoy/envoy.yaml: [0].static_resources.clusters[0].type: expected one of STATIC, STRICT_DNS, LOGICAL_DNS, EDS, ORIGINAL_DST, got "ORIGINAL_DESTINATION"',
      'envoy/envoy.yaml: [0].static_resources.clusters[0].connect_timeout: expected a duration such as "1.5s", got 2',
    ]);
  });

  it("inside an Any, resolved by its @type, two levels deep", () => {
    const problems = broken((d) => {
      const hcm = (d[0] as Obj).static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
      hcm.http_filters[1].typed_config.config.vm_config.runtim = "v8";
      hcm.http_filters[2].typed_config["@type"] =
        "type.googleapis.com/envoy.extensions.filters.http.router.v3.Routr";
    });
    const at = "[0].static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters";
    expect(problems).toEqual([
      `envoy/envoy.yaml: ${at}[1].typed_config.config.vm_config.runtim: unknown field in envoy.extensions.wasm.v3.VmConfig`,
      `envoy/envoy.yaml: ${at}[2].typed_config.@type: unknown type type.googleapis.com/envoy.extensions.filters.http.router.v3.Routr`,
    ]);
  });

  it("a required field and a oneof with two members", () => {
    const problems = broken((d) => {
      const routes = hcmOfEnvoyYaml(d[0] as Obj).route_config.virtual_hosts[0].routes;
      routes[0].match.path = "/v1";
      routes.push({ name: "second", route: { cluster: routes[0].route.cluster } });
    });
    const at =
      "[0].static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes";
    expect(problems).toEqual([
      `envoy/envoy.yaml: ${at}[0].match: oneof path_specifier has several members: prefix, path`,
      `envoy/envoy.yaml: ${at}[1].match: required field of Route is missing`,
    ]);
  });

  it("protoc-gen-validate rules: an empty name and a port out of range", () => {
    const problems = broken((d) => {
      const c = (d[0] as Obj).static_resources.clusters[1];
      c.name = "";
      c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = 70000;
    });
    expect(problems).toEqual([
      "envoy/envoy.yaml: [0].static_resources.clusters[1].name: at least 1 characters",
      "envoy/envoy.yaml: [0].static_resources.clusters[1].load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value: must be lte 65535, got 70000",
    ]);
  });

  it("a patch value in an Istio EnvoyFilter and in an Envoy Gateway JSON patch", () => {
    // Inside the override_host Any of the engines' cluster MERGE, resolved by its @type.
    const istio = broken(
      (d) => {
        const lb = (d[0] as Obj).spec.configPatches[0].patch.value.load_balancing_policy;
        lb.policies[0].typed_extension_config.typed_config.override_host_sources[0].headr = "x";
      },
      "envoy/istio/envoyfilter.yaml",
      readRepoFile("envoy/istio/envoyfilter.yaml"),
    );
    expect(istio).toEqual([
      "envoy/istio/envoyfilter.yaml: [0].spec.configPatches[0].patch.value.load_balancing_policy.policies[0].typed_extension_config.typed_config.override_host_sources[0].headr: unknown field in envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost.OverrideHostSource",
    ]);
    const eg = broken(
      (d) => {
        (d[0] as Obj).spec.jsonPatches[0].operation.value.load_assignment.cluster_nam = "x";
      },
      "envoy/envoy-gateway/patch-policy.yaml",
      readRepoFile("envoy/envoy-gateway/patch-policy.yaml"),
    );
    expect(eg).toEqual([
      "envoy/envoy-gateway/patch-policy.yaml: [0].spec.jsonPatches[0].operation.value.load_assignment.cluster_nam: unknown field in envoy.config.endpoint.v3.ClusterLoadAssignment",
    ]);
  });

  it("a plugin configuration with a renamed, a missing and a mistyped field", () => {
    const cfg = JSON.parse(
      hcmOfEnvoyYaml(parseYaml("envoy/envoy.yaml", envoyYamlText)[0] as Obj).http_filters[1].typed_config
        .config.configuration.value,
    );
    cfg.controlPlane.syncpath = cfg.controlPlane.syncPath;
    delete cfg.controlPlane.syncPath;
    delete cfg.tickMs;
    cfg.failMode = "fail-open";
    expect(pluginConfigProblems(cfg, "f: p")).toEqual([
      "f: p.tickMs: missing",
      'f: p.failMode: bad value "fail-open"',
      "f: p.controlPlane.syncpath: unknown field",
      "f: p.controlPlane.syncPath: missing",
    ]);
  });

  it("a misspelt Istio or Envoy Gateway field", () => {
    const docs = parseYaml(
      "envoy/istio/wasmplugin.yaml",
      readRepoFile("envoy/istio/wasmplugin.yaml"),
    ) as Obj[];
    (docs[0] as Obj).spec.failStratgy = "FAIL_OPEN";
    expect(crdProblems(docs[0] as Obj, "envoy/istio/wasmplugin.yaml: [0]")).toEqual([
      "envoy/istio/wasmplugin.yaml: [0].spec.failStratgy: unknown field",
    ]);
    const eg = parseYaml("x", readRepoFile("envoy/envoy-gateway/extension-policy.yaml")) as Obj[];
    (eg[0] as Obj).spec.wasm[0].rootId = "kvroute";
    expect(crdProblems(eg[0] as Obj, "x: [0]")).toEqual(["x: [0].spec.wasm[0].rootId: unknown field"]);
  });

  it("failure_policy uses Envoy's enum (field 7), not Istio's spellings", () => {
    const plugin = "envoy.extensions.wasm.v3.PluginConfig";
    for (const ok of ["FAIL_RELOAD", "FAIL_CLOSED", "FAIL_OPEN", 2])
      expect(validateEnvoy(plugin, { failure_policy: ok })).toEqual([]);
    expect(validateEnvoy(plugin, { failure_policy: "FAIL_CLOSE" })).toEqual([
      'failure_policy: expected one of UNSPECIFIED, FAIL_RELOAD, FAIL_CLOSED, FAIL_OPEN, got "FAIL_CLOSE"',
    ]);
    expect(validateEnvoy(plugin, { failure_policy: 4 })).toHaveLength(1);
    expect(validateEnvoy(plugin, { allow_on_headers_stop_iteration: "true" })).toEqual([
      "allow_on_headers_stop_iteration: expected true or false, got string",
    ]);
  });

  it("well-known types keep their JSON forms", () => {
    expect(validateEnvoy("google.protobuf.Duration", "1.5s")).toEqual([]);
    expect(
      validateEnvoy("envoy.config.cluster.v3.Cluster", { name: "c", per_connection_buffer_limit_bytes: -1 }),
    ).toEqual(["per_connection_buffer_limit_bytes: expected a non-negative integer (uint32)"]);
    expect(
      validateEnvoy("envoy.config.cluster.v3.Cluster", { name: "c", perConnectionBufferLimitBytes: 1024 }),
    ).toEqual([]);
  });
});
