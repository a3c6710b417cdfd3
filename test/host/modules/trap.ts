// Traps (unreachable) in proxy_on_request_headers when the request carries "x-trap: 1";
// otherwise continues and marks the response so tests see the filter ran.
import { addHeader, getHeader } from "./lib/raw";

export { malloc } from "./lib/raw";

export function proxy_abi_version_0_2_1(): void {}
export function proxy_on_context_create(_id: u32, _root: u32): void {}
export function proxy_on_vm_start(_root: u32, _size: u32): u32 {
  return 1;
}
export function proxy_on_configure(_root: u32, _size: u32): u32 {
  return 1;
}
export function proxy_on_request_headers(_id: u32, _n: u32, _eos: u32): u32 {
  if (getHeader(0, "x-trap").text === "1") unreachable();
  return 0;
}
export function proxy_on_response_headers(_id: u32, _n: u32, _eos: u32): u32 {
  addHeader(2, "x-filter-ran", "1");
  return 0;
}
