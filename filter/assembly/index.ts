// The kvroute Proxy-Wasm filter entry point. Envoy needs these exports from the SDK.
export * from "@gcoredev/proxy-wasm-sdk-as/assembly/proxy";
import {
  Context,
  FilterHeadersStatusValues,
  RootContext,
  registerRootContext,
} from "@gcoredev/proxy-wasm-sdk-as/assembly";

class KvrouteRoot extends RootContext {
  createContext(context_id: u32): Context {
    return new KvrouteStream(context_id, this);
  }
}

class KvrouteStream extends Context {
  onRequestHeaders(_headers: u32, _endOfStream: bool): FilterHeadersStatusValues {
    return FilterHeadersStatusValues.Continue;
  }
}

registerRootContext((context_id: u32) => new KvrouteRoot(context_id), "kvroute");
