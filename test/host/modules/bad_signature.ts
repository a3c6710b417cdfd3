// Imports proxy_grpc_call with the 10 parameters the AssemblyScript SDK declares; Envoy's host
// function takes 12, so linking fails with an import type mismatch.
import { proxy_grpc_call } from "./lib/refused/env";

export { malloc } from "./lib/raw";

export function proxy_abi_version_0_2_1(): void {}
export function proxy_on_request_headers(_id: u32, _n: u32, _eos: u32): u32 {
  return proxy_grpc_call(0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
}
