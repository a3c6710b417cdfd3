// Lacks the proxy_abi_version_0_2_1 marker export: Envoy refuses it before linking.
export { malloc } from "./lib/raw";
export function proxy_on_request_headers(_id: u32, _n: u32, _eos: u32): u32 {
  return 0;
}
