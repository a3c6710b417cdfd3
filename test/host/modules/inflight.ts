// Stress module: counts requests in flight across all worker threads in one shared-data key,
// updated with CAS retries (increment in on_request_headers, decrement in on_log), keeps the peak,
// and routes every request to the endpoint named in the plugin configuration ("dest=ip:port").

import { proxy_define_metric, proxy_increment_metric } from "./lib/env";
import { addHeader, getBuffer, lastCas, parseConfig, sharedGet, sharedSet } from "./lib/raw";

export { malloc } from "./lib/raw";

export function proxy_abi_version_0_2_1(): void {}

const ID: usize = memory.data(4);
let dest = "";
// "unsafe=1": write without CAS (cas 0) — a negative control that must lose updates under interleaving.
let unsafe = false;
let retries: u32 = 0;
let started: u32 = 0;
let finished: u32 = 0;

function metric(name: string): u32 {
  const n = String.UTF8.encode(name);
  if (proxy_define_metric(0, changetype<usize>(n), n.byteLength, ID) !== 0) unreachable();
  return load<u32>(ID);
}

/** Adds `delta` to the decimal counter under `key`; returns the new value. Traps on anything but Ok/CasMismatch. */
function casAdd(key: string, delta: i64): i64 {
  let written = false;
  let next: i64 = 0;
  while (!written) {
    const g = sharedGet(key);
    if (g.code !== 0) unreachable();
    const cas = lastCas();
    next = I64.parseInt(g.text) + delta;
    const r = sharedSet(key, next.toString(), unsafe ? 0 : cas);
    if (r === 0) written = true;
    else if (r === 8) proxy_increment_metric(retries, 1);
    else unreachable();
  }
  return next;
}

function casMax(key: string, v: i64): void {
  for (;;) {
    const g = sharedGet(key);
    if (g.code !== 0) unreachable();
    if (I64.parseInt(g.text) >= v) return;
    const r = sharedSet(key, v.toString(), lastCas());
    if (r === 0) return;
    if (r !== 8) unreachable();
    proxy_increment_metric(retries, 1);
  }
}

export function proxy_on_context_create(_id: u32, _root: u32): void {}

export function proxy_on_vm_start(_root: u32, _size: u32): u32 {
  return 1;
}

export function proxy_on_configure(_root: u32, size: u32): u32 {
  const cfg = parseConfig(getBuffer(7, 0, size).text);
  dest = cfg.has("dest") ? cfg.get("dest") : "";
  unsafe = cfg.has("unsafe") && cfg.get("unsafe") === "1";
  retries = metric("inflight_cas_retries");
  started = metric("inflight_started");
  finished = metric("inflight_finished");
  // All VMs start before any request, so initialising a missing key here cannot lose updates.
  if (sharedGet("inflight").code === 1) sharedSet("inflight", "0", 0);
  if (sharedGet("inflight_peak").code === 1) sharedSet("inflight_peak", "0", 0);
  return 1;
}

export function proxy_on_request_headers(_id: u32, _n: u32, _eos: u32): u32 {
  const now = casAdd("inflight", 1);
  casMax("inflight_peak", now);
  proxy_increment_metric(started, 1);
  if (dest.length > 0) {
    if (addHeader(0, "x-gateway-destination-endpoint", dest) !== 0) unreachable();
  }
  if (addHeader(0, "x-inflight-at-start", now.toString()) !== 0) unreachable();
  return 0;
}

export function proxy_on_log(_id: u32): void {
  casAdd("inflight", -1);
  proxy_increment_metric(finished, 1);
}

export function proxy_on_done(_id: u32): u32 {
  return 1;
}
export function proxy_on_delete(_id: u32): void {}
