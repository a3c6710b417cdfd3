// The runnable Envoy config derived from envoy/envoy.yaml stays valid against Envoy's protos
// and carries the requested ports, token and Wasm path.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { writeEnvoyConfig } from "../../control-plane/src/cli/envoy-config.ts";
import { validateEnvoy } from "./envoy-proto.ts";

describe("envoy config for the demo and the real-Envoy suite", () => {
  it("patches ports, clusters, token and Wasm path and stays a valid bootstrap", () => {
    const path = writeEnvoyConfig({
      listenPort: 11000,
      adminPort: 11001,
      controlPlane: "127.0.0.1:11002",
      fallback: "127.0.0.1:11003",
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
  });
});
