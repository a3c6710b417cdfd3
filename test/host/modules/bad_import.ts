// Imports proxy_clear_route_cache, which Envoy registers only for ABI 0.1.0: a 0.2.1 module that
// imports it must be refused at load time.
export { malloc } from "./lib/raw";

// @ts-ignore: decorator
@external("env", "proxy_clear_route_cache") declare function proxy_clear_route_cache(): u32;

export function proxy_abi_version_0_2_1(): void {}
export function proxy_on_request_headers(id: u32, n: u32, eos: u32): u32 {
  return proxy_clear_route_cache();
}
