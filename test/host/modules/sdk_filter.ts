// A filter written with @gcoredev/proxy-wasm-sdk-as the way the real filter is: it reads a request
// header in onRequestBody (after onRequestHeaders returned Continue). The SDK's
// get_header_map_value tolerates the BadArgument Envoy returns there, but replace() runs
// CHECK_RESULT, which throws — a trap, so the VM fails like it would in Envoy.
export * from "@gcoredev/proxy-wasm-sdk-as/assembly/proxy";

import {
  Context,
  FilterDataStatusValues,
  FilterHeadersStatusValues,
  RootContext,
  registerRootContext,
  stream_context,
} from "@gcoredev/proxy-wasm-sdk-as/assembly";

class Root extends RootContext {
  createContext(id: u32): Context {
    return new Stream(id, this);
  }
}

class Stream extends Context {
  onRequestHeaders(_n: u32, _eos: bool): FilterHeadersStatusValues {
    stream_context.headers.request.add("x-sdk-seen", "1");
    return FilterHeadersStatusValues.Continue;
  }
  onRequestBody(_size: usize, eos: bool): FilterDataStatusValues {
    if (eos) stream_context.headers.request.replace("x-too-late", "1");
    return FilterDataStatusValues.Continue;
  }
}

registerRootContext((id: u32) => new Root(id), "sdk_filter");
