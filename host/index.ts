// Public entry of the Node Proxy-Wasm host (see docs/host.md).
export type { Pairs } from "./abi/constants.ts";
export { WasmResult } from "./abi/constants.ts";
export type {
  ClusterAddress,
  ClusterHandler,
  FailurePolicy,
  HostOptions,
  InProcessAnswer,
  InProcessCall,
  LogRecord,
  NodeInfo,
} from "./core.ts";
export {
  type ConnectionManagerAddressing,
  ENVOY_DEFAULT_ADDRESSING,
  lastAddressFromXff,
} from "./forwarded-for.ts";
export { type AccessLogEntry, type Gateway, type GatewayOptions, startGateway } from "./gateway.ts";
export { HeaderMap } from "./header-map.ts";
export { createHost, Host, headers, type StreamEndpoints } from "./host.ts";
export { WasmLoadError } from "./loader.ts";
export type { FilterChainSink, HttpStream, StreamInfo } from "./stream.ts";
export { VmFailedError, type WasmThread } from "./thread.ts";
export {
  type ClusterEndpoint,
  type ClusterSpec,
  type HealthCheckConfig,
  UpstreamCluster,
} from "./upstream-cluster.ts";
