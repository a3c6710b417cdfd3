// What Envoy Gateway makes of the kvroute resources, modelled closely enough to check the JSON
// patches that target its output. From envoyproxy/gateway v1.9.0:
//   - internal/xds/translator/wasm.go: every EnvoyExtensionPolicy wasm entry becomes an HTTP filter
//     named envoy.filters.http.wasm/<IR name>, disabled (routes enable it), with a Wasm config
//     {name, root_id, vm_config {vm_id = IR name, runtime v8, code.remote}, configuration as a
//     StringValue holding the JSON of `config`, fail_open = failOpen}; the IR name is
//     envoyextensionpolicy/<namespace>/<name>/wasm/<index>.
//   - internal/xds/translator/listener.go: the listener (and its route configuration) is named
//     <gateway namespace>/<gateway>/<listener> under the default xDS name scheme; the HTTP
//     connection manager sits in the default filter chain of an HTTP listener and in a
//     server_names-matched entry of filter_chains of an HTTPS one; a ClientTrafficPolicy's
//     earlyRequestHeaders become the HCM's early header mutation.
//   - internal/utils/jsonpatch: a jsonPath is resolved to JSON pointers, `path` is appended to
//     each, and the operation is applied at every one; no match is an error.
// Only the jsonPath form kvroute uses is understood: $..<field>[?(@.name=='<value>')].<a>.<b>…

type Obj = Record<string, unknown>;

export function wasmIrName(policy: Obj, index: number): string {
  const meta = policy.metadata as { namespace: string; name: string };
  return `envoyextensionpolicy/${meta.namespace}/${meta.name}/wasm/${index}`;
}

/** The HTTP filter Envoy Gateway generates for wasm entry `index` of an EnvoyExtensionPolicy. */
export function generatedWasmFilter(policy: Obj, index: number): Obj {
  const wasm = ((policy.spec as Obj).wasm as Obj[])[index] as Obj;
  const name = wasmIrName(policy, index);
  const config: Obj = {
    name: wasm.name,
    vm_config: {
      vm_id: name,
      runtime: "envoy.wasm.runtime.v8",
      code: {
        remote: {
          http_uri: { uri: "https://envoy-gateway:18002/wasm.wasm", cluster: "wasm_cluster", timeout: "10s" },
          sha256: "0".repeat(64),
        },
      },
    },
    configuration: {
      "@type": "type.googleapis.com/google.protobuf.StringValue",
      value: JSON.stringify(wasm.config ?? {}),
    },
  };
  if (wasm.failOpen === true) config.fail_open = true;
  if (wasm.rootID !== undefined) config.root_id = wasm.rootID;
  return {
    name: `envoy.filters.http.wasm/${name}`,
    disabled: true,
    typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm", config },
  };
}

export interface ListenerOptions {
  /**
   * An HTTPS Gateway listener (TLS terminated) with these hostnames: Envoy Gateway puts its HTTP
   * connection manager in `filter_chains`, matched by server_names, with a TLS inspector
   * (listener.go addXdsHTTPFilterChain, addServerNamesMatch), not in `default_filter_chain`.
   */
  https?: { hostnames: string[] };
  /** HCM early_header_mutation_extensions (a ClientTrafficPolicy's earlyRequestHeaders). */
  earlyHeaderMutation?: Obj[];
  /** HTTP filters after the Wasm filters, before the router (e.g. RBAC: order 301 > Wasm's 200+). */
  policyFilters?: Obj[];
}

/** A Gateway listener as Envoy Gateway builds it, with the policy's Wasm filters before the router. */
export function generatedListener(name: string, wasmFilters: Obj[], options: ListenerOptions = {}): Obj {
  const https = options.https;
  const port = https === undefined ? 10080 : 10443;
  const hcm: Obj = {
    "@type":
      "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
    stat_prefix: `${https === undefined ? "http" : "https"}-${port}`,
    rds: { route_config_name: name, config_source: { ads: {}, resource_api_version: "V3" } },
    http_filters: [
      ...wasmFilters,
      ...(options.policyFilters ?? []),
      {
        name: "envoy.filters.http.router",
        typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" },
      },
    ],
  };
  if (options.earlyHeaderMutation !== undefined)
    hcm.early_header_mutation_extensions = options.earlyHeaderMutation;
  const chain: Obj = {
    name,
    filters: [{ name: "envoy.filters.network.http_connection_manager", typed_config: hcm }],
  };
  const listener: Obj = {
    name,
    address: { socket_address: { address: "0.0.0.0", port_value: port } },
    per_connection_buffer_limit_bytes: 32768,
  };
  if (https === undefined) return { ...listener, default_filter_chain: chain };
  return {
    ...listener,
    listener_filters: [
      {
        name: "envoy.filters.listener.tls_inspector",
        typed_config: {
          "@type": "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector",
        },
      },
    ],
    filter_chains: [
      {
        ...chain,
        filter_chain_match: { server_names: https.hostnames },
        transport_socket: {
          name: "envoy.transport_sockets.tls",
          typed_config: {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
            common_tls_context: {
              alpn_protocols: ["h2", "http/1.1"],
              tls_certificate_sds_secret_configs: [{ name: `${name}/cert`, sds_config: { ads: {} } }],
            },
          },
        },
      },
    ],
  };
}

/**
 * A ClientTrafficPolicy's headers.earlyRequestHeaders as the HCM's early header mutation
 * (listener.go buildEarlyHeaderMutation, header_mutation.go buildHeaderMutationRules: the set and
 * add rules, then one remove per name). addIfAbsent and removeOnMatch are not modelled.
 */
export function earlyHeaderMutation(ctp: Obj): Obj[] | undefined {
  const early = ((ctp.spec as Obj).headers as Obj | undefined)?.earlyRequestHeaders as Obj | undefined;
  if (early === undefined) return undefined;
  for (const unmodelled of ["addIfAbsent", "removeOnMatch"])
    if (early[unmodelled] !== undefined) throw new Error(`earlyRequestHeaders.${unmodelled} is not modelled`);
  const append = (list: unknown, action: string) =>
    ((list as Array<{ name: string; value: string }> | undefined) ?? []).map((h) => ({
      append: { header: { key: h.name, value: h.value }, append_action: action },
    }));
  const mutations = [
    ...append(early.set, "OVERWRITE_IF_EXISTS_OR_ADD"),
    ...append(early.add, "APPEND_IF_EXISTS_OR_ADD"),
    ...((early.remove as string[] | undefined) ?? []).map((name) => ({ remove: name })),
  ];
  return [
    {
      name: "envoy.http.early_header_mutation.header_mutation",
      typed_config: {
        "@type":
          "type.googleapis.com/envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation",
        mutations,
      },
    },
  ];
}

const JSON_PATH = /^\$\.\.(\w+)\[\?\(@\.name\s*==\s*'([^']*)'\)\]((?:\.\w+)*)$/;

/** JSON pointers (RFC 6901) of every match of a `$..field[?(@.name=='x')].a.b` expression. */
export function jsonPathPointers(doc: unknown, jsonPath: string): string[] {
  const m = JSON_PATH.exec(jsonPath);
  if (m === null) throw new Error(`jsonPath form not modelled: ${jsonPath}`);
  const [, field, name, rest] = m as unknown as [string, string, string, string];
  const tail = rest.split(".").filter((s) => s !== "");
  const out: string[] = [];
  const walk = (node: unknown, pointer: string): void => {
    if (Array.isArray(node)) {
      node.forEach((n, i) => {
        walk(n, `${pointer}/${i}`);
      });
      return;
    }
    if (node === null || typeof node !== "object") return;
    for (const [k, v] of Object.entries(node as Obj)) {
      const here = `${pointer}/${k.replace(/~/g, "~0").replace(/\//g, "~1")}`;
      if (k === field && Array.isArray(v))
        v.forEach((item, i) => {
          if ((item as Obj | null)?.name !== name) return;
          let target: unknown = item;
          for (const t of tail) target = (target as Obj | undefined)?.[t];
          if (target !== undefined) out.push(`${here}/${i}/${tail.join("/")}`.replace(/\/$/, ""));
        });
      walk(v, here);
    }
  };
  walk(doc, "");
  return out;
}

/** Applies an `add` operation at a JSON pointer (creating nothing: the parent must exist). */
export function addAt(doc: unknown, pointer: string, value: unknown): void {
  const parts = pointer
    .split("/")
    .slice(1)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  const last = parts.pop() as string;
  let node = doc as Obj;
  for (const p of parts) node = node[p] as Obj;
  if (node === undefined || node === null || typeof node !== "object")
    throw new Error(`no parent for ${pointer}`);
  node[last] = value;
}

/**
 * Applies an EnvoyPatchPolicy's Listener patches that name `listener` (the `add` with jsonPath
 * form kvroute uses), as Envoy Gateway does; a jsonPath that matches nothing throws, since Envoy
 * Gateway refuses the patch. Returns how many patches applied.
 */
export function applyListenerPatches(listener: Obj, policy: Obj): number {
  const patches = ((policy.spec as Obj).jsonPatches as Obj[]).filter(
    (p) => p.type === "type.googleapis.com/envoy.config.listener.v3.Listener" && p.name === listener.name,
  );
  for (const p of patches) {
    const op = p.operation as { op: string; jsonPath?: string; path: string; value: unknown };
    if (op.op !== "add" || op.jsonPath === undefined) throw new Error(`patch form not modelled: ${op.op}`);
    const pointers = jsonPathPointers(listener, op.jsonPath);
    if (pointers.length === 0)
      throw new Error(`jsonPath matches nothing in ${String(listener.name)}: ${op.jsonPath}`);
    for (const at of pointers) addAt(listener, `${at}${op.path}`, structuredClone(op.value));
  }
  return patches.length;
}
