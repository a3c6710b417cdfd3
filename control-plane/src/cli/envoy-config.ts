// A runnable copy of envoy/envoy.yaml for given ports, token and Wasm path: what `kvroute demo`
// and the real-Envoy test suite hand to an `envoy` binary. The shipped file stays the single
// source; only addresses, ports and the plugin configuration's token change.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseDocument } from "yaml";

const TEMPLATE = new URL("../../../envoy/envoy.yaml", import.meta.url).pathname;

export interface EnvoyConfigOptions {
  listenPort: number;
  adminPort: number;
  controlPlane: string;
  fallback: string;
  token: string;
  wasm: string;
}

type Json = Record<string, unknown>;

function hostPort(address: string): { address: string; port_value: number } {
  const colon = address.lastIndexOf(":");
  return { address: address.slice(0, colon), port_value: Number(address.slice(colon + 1)) };
}

/** The first HTTP connection manager of the first listener: where the client address is decided. */
function connectionManager(cfg: Json): Json {
  const resources = cfg.static_resources as { listeners: Json[] };
  const chain = ((resources.listeners[0] as Json).filter_chains as Json[])[0] as Json;
  return ((chain.filters as Json[])[0] as Json).typed_config as Json;
}

/**
 * How the shipped envoy/envoy.yaml decides who the client is (`source.address`, which the
 * rank-header policy's trustedCidrs check): its connection manager's `use_remote_address` and
 * `xff_num_trusted_hops`, with Envoy's defaults where absent. A gateway that stands for that file
 * (the demo's Node host, the end-to-end tests) is configured from this, so it cannot drift.
 */
export function shippedClientAddressing(path = TEMPLATE): {
  useRemoteAddress: boolean;
  xffNumTrustedHops: number;
} {
  const hcm = connectionManager(parseDocument(readFileSync(path, "utf8")).toJS() as Json);
  return {
    useRemoteAddress: hcm.use_remote_address === true,
    xffNumTrustedHops: typeof hcm.xff_num_trusted_hops === "number" ? hcm.xff_num_trusted_hops : 0,
  };
}

/** Writes the config to a temporary file and returns its path. */
export function writeEnvoyConfig(o: EnvoyConfigOptions): string {
  const doc = parseDocument(readFileSync(TEMPLATE, "utf8"));
  const cfg = doc.toJS() as Json;
  const admin = cfg.admin as Json;
  (admin.address as Json).socket_address = { address: "127.0.0.1", port_value: o.adminPort };
  const resources = cfg.static_resources as { listeners: Json[]; clusters: Json[] };
  const listener = resources.listeners[0] as Json;
  listener.address = { socket_address: { address: "127.0.0.1", port_value: o.listenPort } };
  const hcm = connectionManager(cfg);
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
    const target =
      cluster.name === "kvroute_control_plane"
        ? o.controlPlane
        : cluster.name === "kvroute_fallback"
          ? o.fallback
          : null;
    if (target === null) continue;
    const locality = ((cluster.load_assignment as Json).endpoints as Json[])[0] as Json;
    const endpoint = ((locality.lb_endpoints as Json[])[0] as Json).endpoint as Json;
    (endpoint.address as Json).socket_address = hostPort(target);
  }
  const dir = mkdtempSync(join(tmpdir(), "kvroute-envoy-"));
  const path = join(dir, "envoy.yaml");
  writeFileSync(path, JSON.stringify(cfg, null, 2));
  return path;
}
