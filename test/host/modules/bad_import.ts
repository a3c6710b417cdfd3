// Imports proxy_clear_route_cache, which Envoy registers only for ABI 0.1.0: a 0.2.1 module that
// imports it must be refused at load time.
import { proxy_clear_route_cache } from "./lib/refused/env";

export { malloc } from "./lib/raw";

export function proxy_abi_version_0_2_1(): void {}
export function proxy_on_request_headers(_id: u32, _n: u32, _eos: u32): u32 {
  return proxy_clear_route_cache();
}
