// Every Envoy artifact — envoy/envoy.yaml, the Envoy pieces inside the Istio EnvoyFilters and
// Envoy Gateway's EnvoyPatchPolicy — against Envoy's own API protos, plus the wiring kvroute
// depends on (filter order, clusters, destination route) and the embedded plugin
// configuration. A broken field fails with the file and the path of the field.
import { describe, expect, it } from "vitest";
import { BODY_HEADROOM_BYTES, bufferLimitProblem } from "../../control-plane/src/cli/envoy-config.ts";
import {
  type Doc,
  envoyPieces,
  envoyProblems,
  loadYamlFiles,
  parseYaml,
  pluginConfigs,
  readRepoFile,
  type YamlFile,
} from "./artifacts.ts";
import { crdProblems } from "./crd-problems.ts";
import {
  addAt,
  generatedListener,
  generatedWasmFilter,
  jsonPathPointers,
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
const byName = (file: string) => files.find((f) => f.file === file) as YamlFile;
// biome-ignore lint/suspicious/noExplicitAny: tests walk parsed YAML whose shape they assert
type Obj = Record<string, any>;

const ORIGINAL_DST = {
  name: "kvroute_original_dst",
  type: "ORIGINAL_DST",
  lb_policy: "CLUSTER_PROVIDED",
  original_dst_lb_config: { use_http_header: true, http_header_name: "x-gateway-destination-endpoint" },
};

/** Every cluster a file defines, by name (Bootstrap static clusters, patch-added clusters). */
function clustersOf(file: YamlFile): Map<string, Obj> {
  const out = new Map<string, Obj>();
  for (const piece of envoyPieces(file)) {
    if (piece.typeName === "envoy.config.bootstrap.v3.Bootstrap")
      for (const c of (piece.value as Obj).static_resources.clusters as Obj[]) out.set(c.name, c);
    if (piece.typeName === "envoy.config.cluster.v3.Cluster")
      out.set((piece.value as Obj).name, piece.value as Obj);
  }
  return out;
}

function destinationRoutes(file: YamlFile): Obj[] {
  return envoyPieces(file)
    .filter((p) => p.typeName === "envoy.config.route.v3.Route")
    .map((p) => p.value as Obj);
}

describe("Envoy artifacts", () => {
  it("finds the artifacts", () => {
    expect(files.map((f) => f.file)).toEqual([
      "envoy/envoy-gateway/client-traffic-policy.yaml",
      "envoy/envoy-gateway/extension-policy.yaml",
      "envoy/envoy-gateway/patch-policy.yaml",
      "envoy/envoy.yaml",
      "envoy/istio/envoyfilter.yaml",
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
    "%s: Istio / Envoy Gateway resources have known fields only",
    (_name, file) => {
      expect(file.docs.flatMap((doc, i) => crdProblems(doc, `${file.file}: [${i}]`))).toEqual([]);
      const kinds = file.docs.map((d) => d.kind ?? "Bootstrap");
      expect(
        kinds.every((k) =>
          [
            "Bootstrap",
            "EnvoyFilter",
            "WasmPlugin",
            "EnvoyExtensionPolicy",
            "EnvoyPatchPolicy",
            "ClientTrafficPolicy",
          ].includes(String(k)),
        ),
      ).toBe(true);
    },
  );

  it("every artifact that loads the filter names clusters it defines (or its companion resources define)", () => {
    const groups: Array<[string[], string]> = [
      [["envoy/envoy.yaml"], "envoy/envoy.yaml"],
      [["envoy/istio/envoyfilter.yaml"], "envoy/istio/envoyfilter.yaml"],
      [["envoy/istio/wasmplugin.yaml"], "envoy/istio/wasmplugin.yaml"],
      [
        ["envoy/envoy-gateway/extension-policy.yaml", "envoy/envoy-gateway/patch-policy.yaml"],
        "envoy/envoy-gateway/extension-policy.yaml",
      ],
    ];
    for (const [group, withFilter] of groups) {
      const clusters = new Map(group.flatMap((f) => [...clustersOf(byName(f))]));
      const sites = pluginConfigs(byName(withFilter));
      expect(sites.length, withFilter).toBe(1);
      const cfg = sites[0]?.config as Obj;
      expect(
        clusters.has(cfg.controlPlane.cluster),
        `${withFilter}: cluster ${cfg.controlPlane.cluster}`,
      ).toBe(true);
      expect(clusters.get("kvroute_original_dst"), withFilter).toMatchObject(ORIGINAL_DST);
      // Every destination route sends a request that carries the header to the ORIGINAL_DST cluster.
      for (const route of [
        ...destinationRoutes(byName(group.at(-1) as string)),
        ...destinationRoutes(byName(withFilter)),
      ]) {
        expect(route.match.headers).toEqual([
          { name: "x-gateway-destination-endpoint", present_match: true },
        ]);
        expect(route.route.cluster).toBe("kvroute_original_dst");
      }
    }
  });

  it("envoy.yaml: header guard, then the Wasm filter, then the router; admin on loopback; routes and buffers fit", () => {
    const bootstrap = byName("envoy/envoy.yaml").docs[0] as Obj;
    expect(bootstrap.admin.address.socket_address.address).toBe("127.0.0.1");
    const listener = bootstrap.static_resources.listeners[0];
    const hcm = listener.filter_chains[0].filters[0].typed_config;
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
    expect(hcm.http_filters[0].typed_config.mutations.request_mutations).toEqual([
      { remove: "x-gateway-destination-endpoint" },
    ]);
    const routes = hcm.route_config.virtual_hosts[0].routes;
    expect(routes.map((r: Obj) => r.route.cluster)).toEqual(["kvroute_original_dst", "kvroute_fallback"]);
    expect([...clustersOf(byName("envoy/envoy.yaml")).keys()].sort()).toEqual([
      "kvroute_control_plane",
      "kvroute_fallback",
      "kvroute_original_dst",
    ]);
    // Envoy answers 413 before the filter sees a body larger than its buffer limit.
    const cfg = JSON.parse(wasm.configuration.value);
    expect(listener.per_connection_buffer_limit_bytes).toBeGreaterThan(cfg.maxBodyBytes);
    expect(cfg.controlPlane.authority).toBe("127.0.0.1:9090");
  });

  it("Istio: the filters go before the router, clusters are added, the destination route comes first", () => {
    const filter = byName("envoy/istio/envoyfilter.yaml").docs[0] as Obj;
    const patches = filter.spec.configPatches as Obj[];
    for (const p of patches.filter((p) => p.applyTo === "HTTP_FILTER")) {
      expect(p.patch.operation).toBe("INSERT_BEFORE");
      expect(p.match.listener.filterChain.filter.subFilter.name).toBe("envoy.filters.http.router");
    }
    // Inserted before the router in this order: the header guard runs ahead of the Wasm filter.
    expect(patches.filter((p) => p.applyTo === "HTTP_FILTER").map((p) => p.patch.value.name)).toEqual([
      "envoy.filters.http.header_mutation",
      "envoy.filters.http.wasm",
    ]);
    for (const file of ["envoy/istio/envoyfilter.yaml", "envoy/istio/wasmplugin.yaml"]) {
      const ef = byName(file).docs.find((d) => d.kind === "EnvoyFilter") as Obj;
      const ops = (ef.spec.configPatches as Obj[]).map((p) => `${p.applyTo}:${p.patch.operation}`);
      expect(ops.filter((o) => o.startsWith("CLUSTER"))).toEqual(["CLUSTER:ADD", "CLUSTER:ADD"]);
      expect(ops).toContain("HTTP_ROUTE:INSERT_FIRST");
      expect((ef.spec.configPatches as Obj[]).every((p) => p.match.context === "GATEWAY")).toBe(true);
    }
    // Operations Istio applies for each applyTo (istioctl analyze IST0152/IST0153: REPLACE on
    // filters and ADD on routes are silently ignored).
    const allowed: Record<string, string[]> = {
      LISTENER: ["ADD", "MERGE", "REMOVE", "REPLACE"],
      CLUSTER: ["ADD", "MERGE", "REMOVE", "REPLACE"],
      HTTP_FILTER: ["ADD", "INSERT_BEFORE", "INSERT_AFTER", "INSERT_FIRST", "MERGE", "REMOVE"],
      HTTP_ROUTE: ["INSERT_BEFORE", "INSERT_AFTER", "INSERT_FIRST", "MERGE", "REMOVE"],
    };
    for (const file of ["envoy/istio/envoyfilter.yaml", "envoy/istio/wasmplugin.yaml"])
      for (const d of byName(file).docs.filter((d) => d.kind === "EnvoyFilter"))
        for (const p of (d as Obj).spec.configPatches as Obj[])
          expect(allowed[p.applyTo], `${file}: ${p.applyTo}`).toContain(p.patch.operation);
    const plugin = byName("envoy/istio/wasmplugin.yaml").docs[0] as Obj;
    expect(plugin.spec).toMatchObject({ pluginName: "kvroute", type: "HTTP", failStrategy: "FAIL_RELOAD" });
    expect(plugin.spec.url).toMatch(/^oci:\/\//);
  });

  it("Envoy Gateway: the Wasm entry, whole clusters added, the destination route enables the filter", () => {
    const policy = byName("envoy/envoy-gateway/extension-policy.yaml").docs[0] as Obj;
    const wasm = policy.spec.wasm[0];
    expect(wasm).toMatchObject({
      name: "kvroute",
      rootID: "kvroute",
      failOpen: false,
      code: { type: "Image" },
    });
    const patch = byName("envoy/envoy-gateway/patch-policy.yaml").docs[0] as Obj;
    expect(patch.spec.type).toBe("JSONPatch");
    const adds = (patch.spec.jsonPatches as Obj[]).filter((p) => p.operation.path === "");
    expect(adds.map((p) => [p.name, p.operation.value.name])).toEqual([
      ["kvroute_original_dst", "kvroute_original_dst"],
      ["kvroute_control_plane", "kvroute_control_plane"],
    ]);
    // Envoy Gateway's per-route filter name: envoy.filters.http.wasm/<policy IR name>/wasm/<index>.
    const route = destinationRoutes(byName("envoy/envoy-gateway/patch-policy.yaml"))[0] as Obj;
    const name = `envoy.filters.http.wasm/envoyextensionpolicy/${policy.metadata.namespace}/${policy.metadata.name}/wasm/0`;
    expect(Object.keys(route.typed_per_filter_config)).toEqual([name]);
  });

  it("the ORIGINAL_DST and control-plane clusters are the same in every Kubernetes artifact", () => {
    const k8s = [
      "envoy/istio/envoyfilter.yaml",
      "envoy/istio/wasmplugin.yaml",
      "envoy/envoy-gateway/patch-policy.yaml",
    ];
    const [first, ...rest] = k8s.map((f) => {
      const c = clustersOf(byName(f));
      return { original: c.get("kvroute_original_dst"), control: c.get("kvroute_control_plane") };
    });
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

/** Names of the HTTP filters in the order Envoy runs them, for envoy.yaml and the Istio EnvoyFilter. */
function guardRunsFirst(file: YamlFile): boolean {
  if (file.file === "envoy/envoy.yaml") {
    const hcm = (file.docs[0] as Obj).static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
    const names = hcm.http_filters.map((f: Obj) => f.name);
    const guard = hcm.http_filters[names.indexOf("envoy.filters.http.header_mutation")];
    return (
      names.indexOf("envoy.filters.http.header_mutation") === names.indexOf("envoy.filters.http.wasm") - 1 &&
      JSON.stringify(guard.typed_config.mutations.request_mutations) ===
        JSON.stringify([{ remove: "x-gateway-destination-endpoint" }])
    );
  }
  const patches = (file.docs[0] as Obj).spec.configPatches as Obj[];
  const filters = patches.filter((p) => p.applyTo === "HTTP_FILTER" && p.patch.operation === "INSERT_BEFORE");
  const names = filters.map((p) => p.patch.value.name);
  const guard = filters[names.indexOf("envoy.filters.http.header_mutation")];
  return (
    guard !== undefined &&
    names.indexOf("envoy.filters.http.header_mutation") < names.indexOf("envoy.filters.http.wasm") &&
    JSON.stringify(guard.patch.value.typed_config.mutations.request_mutations) ===
      JSON.stringify([{ remove: "x-gateway-destination-endpoint" }])
  );
}

/** Envoy Gateway's listener after patch-policy.yaml's Listener patches, as Envoy Gateway applies them. */
function patchedEnvoyGatewayListener(
  policyDoc: Obj = byName("envoy/envoy-gateway/extension-policy.yaml").docs[0] as Obj,
): Obj {
  const patch = byName("envoy/envoy-gateway/patch-policy.yaml").docs[0] as Obj;
  const listenerPatches = (patch.spec.jsonPatches as Obj[]).filter(
    (p) => p.type === "type.googleapis.com/envoy.config.listener.v3.Listener",
  );
  const listener = generatedListener(listenerPatches[0]?.name, [generatedWasmFilter(policyDoc, 0)]);
  for (const p of listenerPatches) {
    expect(p.name).toBe(listener.name);
    expect(p.operation.op).toBe("add");
    const pointers = jsonPathPointers(listener, p.operation.jsonPath);
    // Envoy Gateway rejects a patch whose jsonPath matches nothing.
    if (pointers.length === 0) throw new Error(`jsonPath matches nothing: ${p.operation.jsonPath}`);
    for (const at of pointers) addAt(listener, `${at}${p.operation.path}`, p.operation.value);
  }
  return listener;
}

describe("what each gateway does with the artifacts", () => {
  it("every Wasm filter sets failure_policy explicitly (never the deprecated fail_open); FAIL_OPEN only behind the header guard", () => {
    for (const file of ["envoy/envoy.yaml", "envoy/istio/envoyfilter.yaml"]) {
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
      mutate(
        (docs[0] as Obj).static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters,
      );
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
    for (const file of ["envoy/envoy.yaml", "envoy/istio/envoyfilter.yaml"])
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
    const envoy = (byName("envoy/envoy.yaml").docs[0] as Obj).static_resources.listeners[0];
    expect(
      bufferLimitProblem(envoy.per_connection_buffer_limit_bytes, maxBody("envoy/envoy.yaml")),
    ).toBeNull();
    const istio = ((byName("envoy/istio/envoyfilter.yaml").docs[0] as Obj).spec.configPatches as Obj[]).find(
      (p) => p.applyTo === "LISTENER",
    ) as Obj;
    expect(istio.match.context).toBe("GATEWAY");
    expect(istio.patch.operation).toBe("MERGE");
    expect(
      bufferLimitProblem(
        istio.patch.value.per_connection_buffer_limit_bytes,
        maxBody("envoy/istio/envoyfilter.yaml"),
      ),
    ).toBeNull();
    const ctp = byName("envoy/envoy-gateway/client-traffic-policy.yaml").docs[0] as Obj;
    const gatewayRef = (byName("envoy/envoy-gateway/patch-policy.yaml").docs[0] as Obj).spec.targetRef;
    expect(ctp.spec.targetRefs).toEqual([gatewayRef]);
    expect(
      bufferLimitProblem(
        quantityBytes(ctp.spec.connection.bufferLimit),
        maxBody("envoy/envoy-gateway/extension-policy.yaml"),
      ),
    ).toBeNull();
    // The WasmPlugin variant buffers nothing (watermark mode: backpressure, no 413), so it needs no patch.
    const companion = byName("envoy/istio/wasmplugin.yaml").docs.find((d) => d.kind === "EnvoyFilter") as Obj;
    expect((companion.spec.configPatches as Obj[]).some((p) => p.applyTo === "LISTENER")).toBe(false);
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
  const envoyYaml = readRepoFile("envoy/envoy.yaml");
  const broken = (mutate: (docs: Doc[]) => void, file = "envoy/envoy.yaml", text = envoyYaml): string[] => {
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
      const routes = (d[0] as Obj).static_resources.listeners[0].filter_chains[0].filters[0].typed_config
        .route_config.virtual_hosts[0].routes;
      delete routes[1].match;
      routes[0].match.path = "/v1";
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
    const istio = broken(
      (d) => {
        (d[0] as Obj).spec.configPatches[1].patch.value.original_dst_lb_config.use_http_header = "yes";
      },
      "envoy/istio/envoyfilter.yaml",
      readRepoFile("envoy/istio/envoyfilter.yaml"),
    );
    expect(istio).toEqual([
      "envoy/istio/envoyfilter.yaml: [0].spec.configPatches[1].patch.value.original_dst_lb_config.use_http_header: expected true or false, got string",
    ]);
    const eg = broken(
      (d) => {
        (d[0] as Obj).spec.jsonPatches[2].operation.value.route.clusterr = "x";
      },
      "envoy/envoy-gateway/patch-policy.yaml",
      readRepoFile("envoy/envoy-gateway/patch-policy.yaml"),
    );
    expect(eg).toEqual([
      "envoy/envoy-gateway/patch-policy.yaml: [0].spec.jsonPatches[2].operation.value.route.clusterr: unknown field in envoy.config.route.v3.RouteAction",
    ]);
  });

  it("a plugin configuration with a renamed, a missing and a mistyped field", () => {
    const cfg = JSON.parse(
      (parseYaml("envoy/envoy.yaml", envoyYaml)[0] as Obj).static_resources.listeners[0].filter_chains[0]
        .filters[0].typed_config.http_filters[1].typed_config.config.configuration.value,
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
