// The kvroute Proxy-Wasm filter: the ABI entry points Envoy calls. The dispatch is ours rather
// than the SDK's: the SDK builds debug strings on every context creation and its context lookups
// abort on an unknown id, and on the request path neither cost nor trap is acceptable. The SDK
// still provides the imports, malloc and the buffer plumbing.
export { malloc } from "@gcoredev/proxy-wasm-sdk-as/assembly/malloc";

import { KvrouteRoot } from "./root";
import { vm } from "./state";
import { KvrouteStream } from "./stream";

let root: KvrouteRoot | null = null;
const streams = vm.streams;

export function proxy_abi_version_0_2_1(): void {}

export function proxy_on_context_create(id: u32, parent: u32): void {
  if (parent === 0) root = new KvrouteRoot(id);
  else streams.set(id, new KvrouteStream(id));
}

export function proxy_on_vm_start(_root: u32, _size: u32): u32 {
  return 1;
}

export function proxy_on_configure(_root: u32, size: u32): u32 {
  const r = root;
  return r !== null && r.configure(size) ? 1 : 0;
}

export function proxy_on_tick(_root: u32): void {
  const r = root;
  if (r !== null) r.tick();
}

export function proxy_on_http_call_response(
  _root: u32,
  token: u32,
  _headers: u32,
  bodySize: u32,
  _trailers: u32,
): void {
  const r = root;
  if (r !== null) r.httpResponse(token, bodySize);
}

export function proxy_on_request_headers(id: u32, _headers: u32, endOfStream: u32): u32 {
  return streams.has(id) ? streams.get(id).onRequestHeaders(endOfStream !== 0) : 0;
}

export function proxy_on_request_body(id: u32, size: u32, endOfStream: u32): u32 {
  return streams.has(id) ? streams.get(id).onRequestBody(size, endOfStream !== 0) : 0;
}

export function proxy_on_response_headers(id: u32, _headers: u32, _endOfStream: u32): u32 {
  return streams.has(id) ? streams.get(id).onResponseHeaders() : 0;
}

export function proxy_on_response_body(id: u32, _size: u32, _endOfStream: u32): u32 {
  return streams.has(id) ? streams.get(id).onResponseBody() : 0;
}

export function proxy_on_log(id: u32): void {
  if (streams.has(id)) streams.get(id).onLog();
}

export function proxy_on_done(_id: u32): u32 {
  return 1;
}

export function proxy_on_delete(id: u32): void {
  streams.delete(id);
  vm.waiting.delete(id);
}
