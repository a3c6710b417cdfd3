// A runnable copy of envoy/envoy.yaml for given ports, token and Wasm path: what `kvroute demo`
// and the real-Envoy test suite hand to an `envoy` binary. The shipped file stays the single
// source; only addresses, ports and the plugin configuration's token change. The same file also
// gives the Node gateway its Envoy-side options (listener buffer limit, Wasm PluginConfig flags,
// the header guard ahead of the filter), so the demo's gateway without Envoy behaves like it.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseDocument } from "yaml";
import { connectionManagerOf } from "../../../host/envoy-listener.ts";

const TEMPLATE = new URL("../../../envoy/envoy.yaml", import.meta.url).pathname;

export interface EnvoyConfigOptions {
  listenPort: number;
  adminPort: number;
  controlPlane: string;
  /** The engines' endpoints (ip:port): the kvroute_engines cluster the one route balances over. */
  engines: string[];
  token: string;
  wasm: string;
}

type Json = Record<string, unknown>;

function hostPort(address: string): { address: string; port_value: number } {
  const colon = address.lastIndexOf(":");
  return { address: address.slice(0, colon), port_value: Number(address.slice(colon + 1)) };
}

/** Envoy's per_connection_buffer_limit_bytes when a listener sets none. */
export const ENVOY_DEFAULT_BUFFER_LIMIT_BYTES = 1024 * 1024;
/** The filter's maxBodyBytes when the plugin configuration sets none (filter/core/plugin-config.ts). */
export const FILTER_DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;
/**
 * Room the listener's buffer limit needs above maxBodyBytes. The filter buffers the body until it
 * passes maxBodyBytes, and the chunk that takes it past is buffered (and checked against the
 * limit) before the filter sees it; 1 MiB covers any chunk Envoy reads in one go.
 */
export const BODY_HEADROOM_BYTES = 1024 * 1024;

/**
 * The invariant between the filter and the listener: while the filter buffers a body, Envoy
 * answers 413 once the buffered data passes the listener's limit, so the limit must exceed
 * maxBodyBytes by BODY_HEADROOM_BYTES. Null when it holds.
 */
export function bufferLimitProblem(
  listenerLimit: number | undefined,
  maxBodyBytes: number | undefined,
): string | null {
  const limit = listenerLimit ?? ENVOY_DEFAULT_BUFFER_LIMIT_BYTES;
  const body = maxBodyBytes ?? FILTER_DEFAULT_MAX_BODY_BYTES;
  if (limit >= body + BODY_HEADROOM_BYTES) return null;
  return `listener buffer limit ${limit} < maxBodyBytes ${body} + ${BODY_HEADROOM_BYTES}: prompts near maxBodyBytes get 413 before the filter can route them`;
}

export type WasmFailurePolicy = "FAIL_OPEN" | "FAIL_CLOSED" | "FAIL_RELOAD";

/** What envoy/envoy.yaml configures around the filter, as Node gateway options (host/gateway.ts). */
export interface ShippedGatewayOptions {
  /** The listener's per_connection_buffer_limit_bytes. */
  bufferLimitBytes: number;
  /** PluginConfig.allow_on_headers_stop_iteration. */
  allowOnHeadersStopIteration: boolean;
  /** PluginConfig.failure_policy (UNSPECIFIED is FAIL_RELOAD from Envoy 1.33). */
  failurePolicy: WasmFailurePolicy;
  /** Headers the header_mutation filter ahead of the Wasm filter removes. */
  removeRequestHeaders: string[];
  /** The plugin configuration's maxBodyBytes. */
  maxBodyBytes: number;
  /**
   * How the connection manager decides who the client is (`source.address`, which the
   * rank-header policy's trustedCidrs check): `use_remote_address` and `xff_num_trusted_hops`,
   * Envoy's defaults where absent.
   */
  useRemoteAddress: boolean;
  xffNumTrustedHops: number;
}

export function shippedGatewayOptions(path = TEMPLATE): ShippedGatewayOptions {
  const cfg = parseDocument(readFileSync(path, "utf8")).toJS() as Json;
  const { listener, hcm } = connectionManagerOf(cfg);
  const filters = hcm.http_filters as Json[];
  const wasmAt = filters.findIndex((f) => f.name === "envoy.filters.http.wasm");
  const wasmFilter = filters[wasmAt];
  if (wasmFilter === undefined) throw new Error(`${path}: no envoy.filters.http.wasm filter`);
  const wasm = (wasmFilter.typed_config as Json).config as Json;
  const removeRequestHeaders = filters
    .slice(0, wasmAt)
    .filter((f) => f.name === "envoy.filters.http.header_mutation")
    .flatMap(
      (f) =>
        ((f.typed_config as Json).mutations as { request_mutations?: Array<{ remove?: string }> })
          .request_mutations ?? [],
    )
    .flatMap((m) => (m.remove === undefined ? [] : [m.remove]));
  const plugin = JSON.parse((wasm.configuration as Json).value as string) as { maxBodyBytes?: number };
  const policy = (wasm.failure_policy as WasmFailurePolicy | "UNSPECIFIED" | undefined) ?? "UNSPECIFIED";
  return {
    bufferLimitBytes:
      (listener.per_connection_buffer_limit_bytes as number | undefined) ?? ENVOY_DEFAULT_BUFFER_LIMIT_BYTES,
    allowOnHeadersStopIteration: wasm.allow_on_headers_stop_iteration === true,
    failurePolicy: wasm.fail_open === true ? "FAIL_OPEN" : policy === "UNSPECIFIED" ? "FAIL_RELOAD" : policy,
    removeRequestHeaders,
    maxBodyBytes: plugin.maxBodyBytes ?? FILTER_DEFAULT_MAX_BODY_BYTES,
    useRemoteAddress: hcm.use_remote_address === true,
    xffNumTrustedHops: typeof hcm.xff_num_trusted_hops === "number" ? hcm.xff_num_trusted_hops : 0,
  };
}

/**
 * The shipped envoy/envoy.yaml's client addressing, for gateways that stand for that file (the
 * demo's Node host, the end-to-end tests), so they cannot drift from it.
 */
export function shippedClientAddressing(path = TEMPLATE): {
  useRemoteAddress: boolean;
  xffNumTrustedHops: number;
} {
  const { useRemoteAddress, xffNumTrustedHops } = shippedGatewayOptions(path);
  return { useRemoteAddress, xffNumTrustedHops };
}

/** envoy/envoy.yaml for these ports, token, engines and module, as Envoy's JSON. */
export function envoyConfigFor(o: EnvoyConfigOptions): Json {
  const cfg = parseDocument(readFileSync(TEMPLATE, "utf8")).toJS() as Json;
  const shipped = shippedGatewayOptions();
  const problem = bufferLimitProblem(shipped.bufferLimitBytes, shipped.maxBodyBytes);
  if (problem !== null) throw new Error(`envoy/envoy.yaml: ${problem}`);
  const admin = cfg.admin as Json;
  (admin.address as Json).socket_address = { address: "127.0.0.1", port_value: o.adminPort };
  const resources = cfg.static_resources as { listeners: Json[]; clusters: Json[] };
  const { listener, hcm } = connectionManagerOf(cfg);
  listener.address = { socket_address: { address: "127.0.0.1", port_value: o.listenPort } };
  for (const filter of hcm.http_filters as Json[]) {
    if (filter.name !== "envoy.filters.http.wasm") continue;
    const config = (filter.typed_config as Json).config as Json;
    ((config.vm_config as Json).code as Json).local = { filename: o.wasm };
    const plugin = config.configuration as Json;
    const parsed = JSON.parse(plugin.value as string) as { controlPlane: Json };
    parsed.controlPlane.token = o.token;
    parsed.controlPlane.authority = o.controlPlane;
    plugin.value = JSON.stringify(parsed);
  }
  for (const cluster of resources.clusters) {
    const targets =
      cluster.name === "kvroute_control_plane"
        ? [o.controlPlane]
        : cluster.name === "kvroute_engines"
          ? o.engines
          : null;
    if (targets === null) continue;
    const locality = ((cluster.load_assignment as Json).endpoints as Json[])[0] as Json;
    locality.lb_endpoints = targets.map((t) => ({ endpoint: { address: { socket_address: hostPort(t) } } }));
  }
  return cfg;
}

/** Writes envoyConfigFor(o) to a temporary file and returns its path. */
export function writeEnvoyConfig(o: EnvoyConfigOptions): string {
  const cfg = envoyConfigFor(o);
  const dir = mkdtempSync(join(tmpdir(), "kvroute-envoy-"));
  const path = join(dir, "envoy.yaml");
  writeFileSync(path, JSON.stringify(cfg, null, 2));
  return path;
}
