// Proxy-Wasm host functions. AssemblyScript imports a body-less declared function from the
// module named after its file, so this file's name makes every declaration an "env" import.
export declare function proxy_add_header_map_value(t: u32, kp: usize, ks: usize, vp: usize, vs: usize): u32;
export declare function proxy_call_foreign_function(
  np: usize,
  ns: usize,
  ap: usize,
  as: usize,
  rp: usize,
  rs: usize,
): u32;
export declare function proxy_close_stream(t: u32): u32;
export declare function proxy_continue_stream(t: u32): u32;
export declare function proxy_define_metric(t: u32, p: usize, s: usize, idp: usize): u32;
export declare function proxy_dequeue_shared_queue(t: u32, pp: usize, sp: usize): u32;
export declare function proxy_done(): u32;
export declare function proxy_enqueue_shared_queue(t: u32, p: usize, s: usize): u32;
export declare function proxy_get_buffer_bytes(t: u32, start: u32, len: u32, pp: usize, sp: usize): u32;
export declare function proxy_get_buffer_status(t: u32, lp: usize, fp: usize): u32;
export declare function proxy_get_current_time_nanoseconds(p: usize): u32;
export declare function proxy_get_header_map_pairs(t: u32, pp: usize, sp: usize): u32;
export declare function proxy_get_header_map_size(t: u32, p: usize): u32;
export declare function proxy_get_header_map_value(t: u32, kp: usize, ks: usize, pp: usize, sp: usize): u32;
export declare function proxy_get_log_level(p: usize): u32;
export declare function proxy_get_metric(id: u32, vp: usize): u32;
export declare function proxy_get_property(p: usize, s: usize, pp: usize, sp: usize): u32;
export declare function proxy_get_shared_data(kp: usize, ks: usize, pp: usize, sp: usize, cp: usize): u32;
export declare function proxy_get_status(cp: usize, pp: usize, sp: usize): u32;
export declare function proxy_http_call(
  up: usize,
  us: usize,
  hp: usize,
  hs: usize,
  bp: usize,
  bs: usize,
  tp: usize,
  ts: usize,
  timeout: u32,
  tokp: usize,
): u32;
export declare function proxy_increment_metric(id: u32, off: i64): u32;
export declare function proxy_log(l: u32, p: usize, s: usize): u32;
export declare function proxy_record_metric(id: u32, v: u64): u32;
export declare function proxy_register_shared_queue(p: usize, s: usize, tp: usize): u32;
export declare function proxy_remove_header_map_value(t: u32, kp: usize, ks: usize): u32;
export declare function proxy_replace_header_map_value(
  t: u32,
  kp: usize,
  ks: usize,
  vp: usize,
  vs: usize,
): u32;
export declare function proxy_resolve_shared_queue(vp: usize, vs: usize, p: usize, s: usize, tp: usize): u32;
export declare function proxy_send_local_response(
  code: u32,
  dp: usize,
  ds: usize,
  bp: usize,
  bs: usize,
  hp: usize,
  hs: usize,
  grpc: i32,
): u32;
export declare function proxy_set_buffer_bytes(t: u32, start: u32, len: u32, p: usize, s: usize): u32;
export declare function proxy_set_effective_context(id: u32): u32;
export declare function proxy_set_property(p: usize, s: usize, v: usize, vs: usize): u32;
export declare function proxy_set_shared_data(kp: usize, ks: usize, vp: usize, vs: usize, cas: u32): u32;
export declare function proxy_set_tick_period_milliseconds(ms: u32): u32;
