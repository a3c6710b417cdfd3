// Lacks the proxy_abi_version_0_2_1 marker export: Envoy refuses it before linking.
export { malloc } from "./lib/raw";
export function proxy_on_request_headers(id: u32, n: u32, eos: u32): u32 {
  return 0;
}
