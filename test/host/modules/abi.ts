// Exercises the rest of the ABI on demand: a request with header "x-probe: <name>" runs that probe
// in proxy_on_request_headers and logs "probe:<name> <results>" with the exact result codes.

import {
  proxy_call_foreign_function,
  proxy_close_stream,
  proxy_define_metric,
  proxy_dequeue_shared_queue,
  proxy_done,
  proxy_enqueue_shared_queue,
  proxy_get_buffer_status,
  proxy_get_current_time_nanoseconds,
  proxy_get_header_map_size,
  proxy_get_log_level,
  proxy_get_metric,
  proxy_get_property,
  proxy_get_status,
  proxy_increment_metric,
  proxy_log,
  proxy_record_metric,
  proxy_register_shared_queue,
  proxy_resolve_shared_queue,
  proxy_set_property,
} from "./lib/env";
import {
  addHeader,
  getBuffer,
  getHeader,
  httpCall,
  lastCas,
  log,
  OUT_PTR,
  OUT_SIZE,
  OUT_U32,
  proxy_continue_stream,
  proxy_set_effective_context,
  sharedGet,
  sharedSet,
  takeOut,
  takeOutString,
  utf8,
} from "./lib/raw";
import { clock_time_get, fd_write, random_get } from "./lib/wasi_snapshot_preview1";

export { malloc } from "./lib/raw";

export function proxy_abi_version_0_2_1(): void {}

const U64: usize = memory.data(8);
let queueToken: u32 = 0;
let _rootId: u32 = 0;
const pendingCall = new Map<u32, u32>(); // http-call token → stream id

function c(v: u32): string {
  return v.toString();
}

function prop(path: string): string {
  const p = utf8(path.replaceAll("/", "\0"));
  const r = proxy_get_property(changetype<usize>(p), p.byteLength, OUT_PTR, OUT_SIZE);
  if (r !== 0) return `E${r.toString()}`;
  const b = takeOut();
  if (
    b.byteLength === 8 &&
    (path.endsWith("port") || path.endsWith("code") || path.endsWith("/id") || path.endsWith("size"))
  ) {
    return `i${load<i64>(changetype<usize>(b)).toString()}`;
  }
  return String.UTF8.decode(b);
}

function defineMetric(t: u32, name: string): u32 {
  const n = utf8(name);
  const r = proxy_define_metric(t, changetype<usize>(n), n.byteLength, OUT_U32);
  return r === 0 ? load<u32>(OUT_U32) : 1000 + r;
}

function getMetric(id: u32): string {
  const r = proxy_get_metric(id, U64);
  return r === 0 ? load<u64>(U64).toString() : `E${r.toString()}`;
}

export function proxy_on_context_create(id: u32, root: u32): void {
  if (root === 0) _rootId = id;
}

export function proxy_on_vm_start(_root: u32, _size: u32): u32 {
  return 1;
}

export function proxy_on_configure(root: u32, _size: u32): u32 {
  // Every thread registers the same queue: the last registrant receives on_queue_ready.
  const q = utf8("probe-queue");
  const r = proxy_register_shared_queue(changetype<usize>(q), q.byteLength, OUT_U32);
  queueToken = load<u32>(OUT_U32);
  log(`cfg:queue ${c(r)} ${c(queueToken)} root=${c(root)}`);
  return 1;
}

export function proxy_on_queue_ready(root: u32, token: u32): void {
  const r = proxy_dequeue_shared_queue(token, OUT_PTR, OUT_SIZE);
  const data = r === 0 ? takeOutString() : "";
  const again = proxy_dequeue_shared_queue(token, OUT_PTR, OUT_SIZE);
  log(`queue_ready root=${c(root)} token=${c(token)} deq=${c(r)}:${data} again=${c(again)}`);
}

export function proxy_on_http_call_response(root: u32, token: u32, nh: u32, bs: u32, nt: u32): void {
  const st = getHeader(6, ":status");
  const body = getBuffer(4, 0, bs);
  const sc = proxy_get_status(OUT_U32, OUT_PTR, OUT_SIZE);
  const code = load<u32>(OUT_U32);
  const msg = takeOutString();
  let extra = "";
  if (pendingCall.has(token)) {
    const sid = pendingCall.get(token);
    pendingCall.delete(token);
    const e = proxy_set_effective_context(sid);
    const a = addHeader(0, "x-call-status", st.text);
    const cont = proxy_continue_stream(0);
    extra = ` eff=${c(e)} add=${c(a)} cont=${c(cont)}`;
  }
  log(
    `call_response root=${c(root)} token=${c(token)} nh=${c(nh)} bs=${c(bs)} nt=${c(nt)} status=${c(st.code)}:${st.text} body=${c(body.code)}:${body.text} get_status=${c(sc)}:${c(code)}:${msg}${extra}`,
  );
}

export function proxy_on_request_headers(id: u32, _n: u32, _eos: u32): u32 {
  const probe = getHeader(0, "x-probe").text;
  let out = "";
  if (probe === "shared") {
    out = probeSharedData();
  } else if (probe === "queue") {
    out = probeQueues();
  } else if (probe === "props") {
    out = probeProperties();
  } else if (probe === "metrics") {
    out = probeMetrics();
  } else if (probe === "misc") {
    out = probeMisc();
  } else if (probe === "httpcall") {
    const cluster = getHeader(0, "x-cluster").text;
    const timeout = <u32>(
      I32.parseInt(getHeader(0, "x-timeout").code === 0 ? getHeader(0, "x-timeout").text : "0")
    );
    const r = httpCall(
      cluster,
      [":method", ":path", ":authority", "x-from"],
      ["POST", "/side?x=1", "side.local", "wasm"],
      "ping",
      timeout,
    );
    const token = load<u32>(OUT_U32);
    const missing = httpCall(cluster, [":method", ":path"], ["GET", "/"], "", 0);
    const unknown = httpCall("no-such-cluster", [":method", ":path", ":authority"], ["GET", "/", "x"], "", 0);
    out = `call=${c(r)} token=${c(token)} missing=${c(missing)} unknown=${c(unknown)}`;
    if (r === 0) {
      pendingCall.set(token, id);
      log(`probe:${probe} ${out}`);
      return 1; // wait for the answer; on_http_call_response continues the stream
    }
  } else if (probe === "qreg") {
    out = probeQueueRegistration();
  } else if (probe === "close") {
    out = `close=${c(proxy_close_stream(0))}`;
  }
  if (probe.length > 0) log(`probe:${probe} ${out}`);
  return 0;
}

/** Shared data: miss, set, CAS mismatch, CAS hit, stale CAS, unconditional set. */
function probeSharedData(): string {
  let out = "";
  const key = `k-${getHeader(0, "x-key").text}`;
  const miss = sharedGet(key);
  const s0 = sharedSet(key, "v1", 0);
  const g1 = sharedGet(key);
  const cas1 = lastCas();
  const bad = sharedSet(key, "v2", cas1 + 1000);
  const ok = sharedSet(key, "v2", cas1);
  const g2 = sharedGet(key);
  const cas2 = lastCas();
  const stale = sharedSet(key, "v3", cas1);
  const uncond = sharedSet(key, "v4", 0);
  const g3 = sharedGet(key);
  out = `miss=${c(miss.code)} set0=${c(s0)} get=${c(g1.code)}:${g1.text} bad=${c(bad)} ok=${c(ok)} get2=${g2.text} casgrew=${cas2 > cas1 ? "1" : "0"} stale=${c(stale)} uncond=${c(uncond)} final=${g3.text}`;
  return out;
}
/** Shared queues: resolve (own vm_id, missing), enqueue and dequeue on bad tokens. */
function probeQueues(): string {
  let out = "";
  const vm = utf8("");
  const q = utf8("probe-queue");
  const r = proxy_resolve_shared_queue(changetype<usize>(vm), 0, changetype<usize>(q), q.byteLength, OUT_U32);
  const t = load<u32>(OUT_U32);
  const nq = utf8("no-such-queue");
  const r2 = proxy_resolve_shared_queue(
    changetype<usize>(vm),
    0,
    changetype<usize>(nq),
    nq.byteLength,
    OUT_U32,
  );
  const data = utf8(`item-${getHeader(0, "x-item").text}`);
  const e = proxy_enqueue_shared_queue(t, changetype<usize>(data), data.byteLength);
  const e2 = proxy_enqueue_shared_queue(999999, changetype<usize>(data), data.byteLength);
  const d2 = proxy_dequeue_shared_queue(999999, OUT_PTR, OUT_SIZE);
  out = `resolve=${c(r)} same=${t === queueToken ? "1" : "0"} missing=${c(r2)} enq=${c(e)} enq_bad=${c(e2)} deq_bad=${c(d2)}`;
  return out;
}
/** Properties: request, connection, plugin and node paths; set then get. */
function probeProperties(): string {
  let out = "";
  const name = utf8("my_prop");
  const val = utf8("my-value");
  const sp = proxy_set_property(
    changetype<usize>(name),
    name.byteLength,
    changetype<usize>(val),
    val.byteLength,
  );
  out = `path=${prop("request/path")} method=${prop("request/method")} hdr=${prop("request/headers/x-probe")} id=${prop("request/id")} proto=${prop("request/protocol")} src=${prop("source/address")} srcport=${prop("source/port")} dst=${prop("destination/address")} name=${prop("plugin_name")} root=${prop("plugin_root_id")} vm=${prop("plugin_vm_id")} node=${prop("node/id")} meta=${prop("node/metadata/zone")} nope=${prop("no_such_thing")} set=${c(sp)} get=${prop("my_prop")}`;
  return out;
}
/** Metrics: define, increment, record and read counters, gauges, histograms. */
function probeMetrics(): string {
  let out = "";
  const ctr = defineMetric(0, "probe_requests");
  const g = defineMetric(1, "probe_gauge");
  const h = defineMetric(2, "probe_hist");
  const bad = defineMetric(3, "probe_bad");
  const i1 = proxy_increment_metric(ctr, 2);
  const i0 = proxy_increment_metric(ctr, 0);
  const ineg = proxy_increment_metric(ctr, -1);
  const gi = proxy_increment_metric(g, 5);
  const gd = proxy_increment_metric(g, -2);
  const hr = proxy_record_metric(h, 42);
  const hi = proxy_increment_metric(h, 1);
  const unknown = proxy_increment_metric(ctr + 400, 1);
  out = `ids=${c(ctr)},${c(g)},${c(h)} bad=${c(bad)} inc=${c(i1)} inc0=${c(i0)} incneg=${c(ineg)} ctr=${getMetric(ctr)} gauge_inc=${c(gi)} gauge_dec=${c(gd)} gauge=${getMetric(g)} hist_rec=${c(hr)} hist_inc=${c(hi)} hist_get=${getMetric(h)} unknown=${c(unknown)}`;
  const gr = proxy_record_metric(g, 100);
  out += ` gauge_set=${c(gr)} gauge2=${getMetric(g)}`;
  return out;
}
/** Everything else: log level, clocks, random, foreign functions, bad map/buffer types, fd_write. */
function probeMisc(): string {
  let out = "";
  const ll = proxy_get_log_level(OUT_U32);
  const level = load<u32>(OUT_U32);
  const badlog = proxy_log(9, 0, 0);
  const tr = proxy_get_current_time_nanoseconds(U64);
  const now = load<u64>(U64);
  const rnd = random_get(U64, 8);
  const big = random_get(U64, 65537);
  const clk = clock_time_get(1, 0, U64);
  const clkBad = clock_time_get(7, 0, U64);
  const eff = proxy_set_effective_context(424242);
  const fn = utf8("no_such_function");
  const ff = proxy_call_foreign_function(changetype<usize>(fn), fn.byteLength, 0, 0, OUT_PTR, OUT_SIZE);
  const dn = proxy_done();
  const hmBad = proxy_get_header_map_size(9, OUT_U32);
  const hmSize = proxy_get_header_map_size(0, OUT_U32);
  const hmBytes = load<u32>(OUT_U32);
  const bufBad = proxy_get_buffer_status(9, OUT_U32, OUT_SIZE);
  const csBad = proxy_continue_stream(9);
  const csUp = proxy_continue_stream(3);
  const vm = getBuffer(6, 0, 100);
  const pc = getBuffer(7, 0, 100);
  const cd = getBuffer(8, 0, 100);
  const callBody = getBuffer(4, 0, 100);
  // fd_write to stdout: one iovec
  const msg = utf8("hello from fd_write\n");
  const iov = memory.data(8);
  store<u32>(iov, changetype<usize>(msg));
  store<u32>(iov + 4, msg.byteLength);
  const fw = fd_write(1, iov, 1, OUT_U32);
  const fwBad = fd_write(7, iov, 1, OUT_U32);
  out = `loglevel=${c(ll)}:${c(level)} badlog=${c(badlog)} time=${c(tr)}:${now > 1600000000000000000 ? "sane" : "bad"} random=${rnd.toString()} random_big=${big.toString()} clock=${clk.toString()} clock_bad=${clkBad.toString()} eff_bad=${c(eff)} foreign=${c(ff)} done=${c(dn)} hm_bad=${c(hmBad)} hm_size=${c(hmSize)}:${c(hmBytes)} buf_bad=${c(bufBad)} cs_bad=${c(csBad)} cs_up=${c(csUp)} vmcfg=${c(vm.code)}:${vm.text} plugincfg=${c(pc.code)} calldata=${c(cd.code)} callbody=${c(callBody.code)} fd_write=${fw.toString()}:${c(load<u32>(OUT_U32))} fd_bad=${fwBad.toString()}`;
  return out;
}
/** A stream context registers a queue and enqueues on it. */
function probeQueueRegistration(): string {
  let out = "";
  const q = utf8("stream-queue");
  const r = proxy_register_shared_queue(changetype<usize>(q), q.byteLength, OUT_U32);
  const t = load<u32>(OUT_U32);
  const data = utf8("from-stream");
  const e = proxy_enqueue_shared_queue(t, changetype<usize>(data), data.byteLength);
  out = `register=${c(r)} enq=${c(e)}`;
  return out;
}

export function proxy_on_log(_id: u32): void {}
export function proxy_on_done(_id: u32): u32 {
  return 1;
}
export function proxy_on_delete(_id: u32): void {}
