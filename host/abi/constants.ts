// Numeric values of the Proxy-Wasm 0.2.1 ABI as proxy-wasm-cpp-host and Envoy use them
// (include/proxy-wasm/context_interface.h, src/exports.cc). Kept in one place so every host
// module and every test names the same numbers.

export const WasmResult = {
  Ok: 0,
  NotFound: 1,
  BadArgument: 2,
  SerializationFailure: 3,
  ParseFailure: 4,
  BadExpression: 5,
  InvalidMemoryAccess: 6,
  Empty: 7,
  CasMismatch: 8,
  ResultMismatch: 9,
  InternalFailure: 10,
  BrokenConnection: 11,
  Unimplemented: 12,
} as const;

export const HeaderMapType = {
  RequestHeaders: 0,
  RequestTrailers: 1,
  ResponseHeaders: 2,
  ResponseTrailers: 3,
  GrpcReceiveInitialMetadata: 4,
  GrpcReceiveTrailingMetadata: 5,
  HttpCallResponseHeaders: 6,
  HttpCallResponseTrailers: 7,
} as const;
export const HEADER_MAP_MAX = 7;

export const BufferType = {
  HttpRequestBody: 0,
  HttpResponseBody: 1,
  NetworkDownstreamData: 2,
  NetworkUpstreamData: 3,
  HttpCallResponseBody: 4,
  GrpcReceiveBuffer: 5,
  VmConfiguration: 6,
  PluginConfiguration: 7,
  CallData: 8,
} as const;
export const BUFFER_TYPE_MAX = 8;

export const StreamType = { Request: 0, Response: 1, Downstream: 2, Upstream: 3 } as const;
export const STREAM_TYPE_MAX = 3;

export const MetricType = { Counter: 0, Gauge: 1, Histogram: 2 } as const;

/** spdlog levels, which Envoy maps 1:1 onto proxy_log levels (context.cc Context::log). */
export const LogLevel = { trace: 0, debug: 1, info: 2, warn: 3, error: 4, critical: 5 } as const;
export const LOG_LEVEL_NAMES = ["trace", "debug", "info", "warn", "error", "critical"] as const;

/** proxy_wasm::FilterHeadersStatus after convertVmCallResultToFilterHeadersStatus. */
export const HeadersStatus = {
  Continue: 0,
  StopIteration: 1,
  ContinueAndEndStream: 2,
  StopAllIterationAndBuffer: 3,
  StopAllIterationAndWatermark: 4,
} as const;

/** proxy_wasm::FilterDataStatus after convertVmCallResultToFilterDataStatus. */
export const DataStatus = {
  Continue: 0,
  StopIterationAndBuffer: 1,
  StopIterationAndWatermark: 2,
  StopIterationNoBuffer: 3,
} as const;

export const TrailersStatus = { Continue: 0, StopIteration: 1 } as const;

/** WASI errno values the host returns (proxy-wasm-cpp-host src/exports.cc). */
export const Errno = { SUCCESS: 0, BADF: 8, FAULT: 21, INVAL: 28, NOENT: 44, NOSYS: 52, NOTSUP: 58 } as const;

export type Pairs = Array<[string, string]>;
