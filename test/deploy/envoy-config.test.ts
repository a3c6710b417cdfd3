// The runnable Envoy config derived from envoy/envoy.yaml stays valid against Envoy's protos
// and carries the requested ports, token and Wasm path.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  bufferLimitProblem,
  ENVOY_DEFAULT_BUFFER_LIMIT_BYTES,
  shippedGatewayOptions,
  writeEnvoyConfig,
} from "../../control-plane/src/cli/envoy-config.ts";
import { validateEnvoy } from "./envoy-proto.ts";

describe("envoy config for the demo and the real-Envoy suite", () => {
  it("patches ports, clusters, token and Wasm path and stays a valid bootstrap", () => {
    const path = writeEnvoyConfig({
      listenPort: 11000,
      adminPort: 11001,
      controlPlane: "127.0.0.1:11002",
      engines: ["127.0.0.1:11003", "127.0.0.1:11004"],
      token: "t-0123456789abcdef",
      wasm: "/abs/kvroute.wasm",
    });
    const cfg = JSON.parse(readFileSync(path, "utf8"));
    expect(validateEnvoy("envoy.config.bootstrap.v3.Bootstrap", cfg)).toEqual([]);
    const text = JSON.stringify(cfg);
    for (const piece of [
      "11000",
      "11001",
      "11003",
      "/abs/kvroute.wasm",
      "t-0123456789abcdef",
      "allow_on_headers_stop_iteration",
    ])
      expect(text).toContain(piece);
    expect(text).not.toContain("local-demo-token-change-me");
    // The listener still holds the plugin's maxBodyBytes with room to spare.
    const listener = cfg.static_resources.listeners[0];
    const wasm = listener.filter_chains[0].filters[0].typed_config.http_filters.find(
      (f: { name: string }) => f.name === "envoy.filters.http.wasm",
    ).typed_config.config;
    const plugin = JSON.parse(wasm.configuration.value);
    expect(bufferLimitProblem(listener.per_connection_buffer_limit_bytes, plugin.maxBodyBytes)).toBeNull();
  });

  it("gives the Node gateway envoy.yaml's listener limit, PluginConfig flags and header guard", () => {
    expect(shippedGatewayOptions()).toEqual({
      bufferLimitBytes: 8 * 1024 * 1024,
      allowOnHeadersStopIteration: true,
      failurePolicy: "FAIL_OPEN",
      removeRequestHeaders: ["x-gateway-destination-endpoint"],
      maxBodyBytes: 4 * 1024 * 1024,
      // kvroute is the edge: the client is the TCP peer, not what X-Forwarded-For claims.
      useRemoteAddress: true,
      xffNumTrustedHops: 0,
    });
  });

  it("reads Envoy's defaults where envoy.yaml would leave them out", () => {
    const bare = join(mkdtempSync(join(tmpdir(), "kvroute-envoy-yaml-")), "envoy.yaml");
    const doc = parse(readFileSync(new URL("../../envoy/envoy.yaml", import.meta.url), "utf8"));
    const listener = doc.static_resources.listeners[0];
    delete listener.per_connection_buffer_limit_bytes;
    const filters = listener.filter_chains[0].filters[0].typed_config.http_filters;
    const wasm = filters[1].typed_config.config;
    delete wasm.allow_on_headers_stop_iteration;
    delete wasm.failure_policy;
    const hcm = listener.filter_chains[0].filters[0].typed_config;
    delete hcm.use_remote_address;
    filters.shift();
    writeFileSync(bare, JSON.stringify(doc));
    expect(shippedGatewayOptions(bare)).toMatchObject({
      bufferLimitBytes: ENVOY_DEFAULT_BUFFER_LIMIT_BYTES,
      allowOnHeadersStopIteration: false,
      // Envoy >= 1.33 with no policy and fail_open unset.
      failurePolicy: "FAIL_RELOAD",
      removeRequestHeaders: [],
      // Envoy's default: source.address follows X-Forwarded-For.
      useRemoteAddress: false,
      xffNumTrustedHops: 0,
    });
  });
});
