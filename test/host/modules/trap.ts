// Traps (unreachable) in proxy_on_request_headers when the request carries "x-trap: 1";
// otherwise continues and marks the response so tests see the filter ran. Logs its start-up
// (_start, on_vm_start, on_configure) so tests see what a reloaded VM runs again.
import { addHeader, getHeader, log } from "./lib/raw";

export { malloc } from "./lib/raw";

// Top-level code runs in _start (restricted: proxy_log is allowed there).
log("trap: _start");

export function proxy_abi_version_0_2_1(): void {}
export function proxy_on_context_create(_id: u32, _root: u32): void {}
export function proxy_on_vm_start(root: u32, _size: u32): u32 {
  log(`trap: on_vm_start root=${root.toString()}`);
  return 1;
}
export function proxy_on_configure(root: u32, _size: u32): u32 {
  log(`trap: on_configure root=${root.toString()}`);
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
