// The kvroute Proxy-Wasm filter: the ABI entry points Envoy calls. The dispatch is ours rather
// than the SDK's: the SDK builds debug strings on every context creation and its context lookups
// abort on an unknown id, and on the request path neither cost nor trap is acceptable. The SDK
// still provides the imports; malloc is ours (host.ts: the host's copies stay out of the GC heap).
//
// A VM has one root context per plugin configuration: Envoy adds a second one to the running VM
// when the configuration changes (same vm_id and code), and calls on_done/on_delete on the old one
// once its streams are gone. Ticks and http-call answers name their root context; streams run
// with the configuration of the root they were created under.
export { hostMalloc as malloc } from "./host";

import { KvrouteRoot } from "./root";
import { vm } from "./state";
import { KvrouteStream } from "./stream";
import { streams } from "./streams";

const roots = new Map<u32, KvrouteRoot>();
/** The newest configured root context: it does the VM's chores and is the one that may lead. */
let primary: KvrouteRoot | null = null;
const configs = vm.streamConfigs;

export function proxy_abi_version_0_2_1(): void {}

export function proxy_on_context_create(id: u32, parent: u32): void {
  if (parent === 0) {
    roots.set(id, new KvrouteRoot(id));
    return;
  }
  streams.set(id, new KvrouteStream(id));
  if (roots.has(parent)) configs.set(id, roots.get(parent).config);
}

export function proxy_on_vm_start(_root: u32, _size: u32): u32 {
  return 1;
}

export function proxy_on_configure(id: u32, size: u32): u32 {
  if (!roots.has(id)) return 0;
  const r = roots.get(id);
  if (!r.configure(size)) {
    // The configuration is refused; the VM keeps serving with the previous one.
    const p = primary;
    if (p !== null) vm.config = p.config;
    return 0;
  }
  r.configured = true;
  primary = r;
  return 1;
}

export function proxy_on_tick(id: u32): void {
  if (roots.has(id)) roots.get(id).tick(roots.get(id) === primary);
}

export function proxy_on_http_call_response(
  id: u32,
  token: u32,
  _headers: u32,
  bodySize: u32,
  _trailers: u32,
): void {
  if (!roots.has(id)) return;
  const r = roots.get(id);
  vm.config = r.config;
  r.httpResponse(token, bodySize);
  const p = primary;
  if (p !== null) vm.config = p.config;
}

/** With several roots in the VM, the stream's callbacks run with its own root's configuration. */
function enter(id: u32): void {
  if (roots.size > 1 && configs.has(id)) vm.config = configs.get(id);
}

export function proxy_on_request_headers(id: u32, _headers: u32, endOfStream: u32): u32 {
  if (!streams.has(id)) return 0;
  enter(id);
  return streams.get(id).onRequestHeaders(endOfStream !== 0);
}

export function proxy_on_request_body(id: u32, size: u32, endOfStream: u32): u32 {
  if (!streams.has(id)) return 0;
  enter(id);
  return streams.get(id).onRequestBody(size, endOfStream !== 0);
}

export function proxy_on_request_trailers(id: u32, _trailers: u32): u32 {
  if (!streams.has(id)) return 0;
  enter(id);
  return streams.get(id).onRequestTrailers();
}

export function proxy_on_response_headers(id: u32, _headers: u32, _endOfStream: u32): u32 {
  if (!streams.has(id)) return 0;
  enter(id);
  return streams.get(id).onResponseHeaders();
}

export function proxy_on_response_body(id: u32, size: u32, endOfStream: u32): u32 {
  if (!streams.has(id)) return 0;
  enter(id);
  return streams.get(id).onResponseBody(size, endOfStream !== 0);
}

export function proxy_on_log(id: u32): void {
  if (!streams.has(id)) return;
  enter(id);
  streams.get(id).onLog();
}

export function proxy_on_done(id: u32): u32 {
  if (roots.has(id)) roots.get(id).done();
  return 1;
}

export function proxy_on_delete(id: u32): void {
  if (roots.has(id)) {
    const r = roots.get(id);
    roots.delete(id);
    if (primary === r) primary = newestConfigured();
    const p = primary;
    if (p !== null) vm.config = p.config;
    return;
  }
  if (streams.has(id)) streams.get(id).release();
  streams.delete(id);
  configs.delete(id);
  vm.waiting.delete(id);
}

function newestConfigured(): KvrouteRoot | null {
  const all = roots.values();
  for (let i = all.length - 1; i >= 0; i--) if (all[i].configured) return all[i];
  return null;
}
