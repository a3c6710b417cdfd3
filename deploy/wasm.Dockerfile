# The kvroute filter as an OCI image for Istio's WasmPlugin and Envoy Gateway's
# EnvoyExtensionPolicy (code.type: Image). Both accept a single-layer image holding one file
# named plugin.wasm (Istio's "compat" layout, which Envoy Gateway reads too). Build after
# `npm run build`, from the repository root:
#   docker build -f deploy/wasm.Dockerfile -t ghcr.io/kvroute/kvroute-wasm:0.1.0 .
FROM scratch
COPY build/kvroute.wasm ./plugin.wasm
