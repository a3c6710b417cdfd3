// The import table Envoy links a 0.2.1 module against, with each function's Wasm signature, as
// proxy-wasm-cpp-host registers them (include/proxy-wasm/exports.h: FOR_ALL_HOST_FUNCTIONS, the
// 0.2.1-only continue_stream/close_stream/get_log_level, FOR_ALL_WASI_FUNCTIONS under both
// "wasi_unstable" and "wasi_snapshot_preview1"; src/wasm.cc registerCallbacks). `Word` is i32 on
// wasm32, int64_t/uint64_t are i64. Note the host's own (non-standard) arities for WASI
// path_link (6) and path_symlink (4): a module importing the standard 7/5-parameter versions is
// refused by Envoy, and so it is here.

export type ValType = "i32" | "i64";
export interface Signature {
  params: ValType[];
  results: ValType[];
}

const i = (n: number): ValType[] => Array.from({ length: n }, () => "i32" as const);
const ret: ValType[] = ["i32"];

const proxy: Record<string, Signature> = {
  log: { params: i(3), results: ret },
  get_status: { params: i(3), results: ret },
  set_property: { params: i(4), results: ret },
  get_property: { params: i(4), results: ret },
  send_local_response: { params: i(8), results: ret },
  get_shared_data: { params: i(5), results: ret },
  set_shared_data: { params: i(5), results: ret },
  register_shared_queue: { params: i(3), results: ret },
  resolve_shared_queue: { params: i(5), results: ret },
  dequeue_shared_queue: { params: i(3), results: ret },
  enqueue_shared_queue: { params: i(3), results: ret },
  get_header_map_value: { params: i(5), results: ret },
  add_header_map_value: { params: i(5), results: ret },
  replace_header_map_value: { params: i(5), results: ret },
  remove_header_map_value: { params: i(3), results: ret },
  get_header_map_pairs: { params: i(3), results: ret },
  set_header_map_pairs: { params: i(3), results: ret },
  get_header_map_size: { params: i(2), results: ret },
  get_buffer_status: { params: i(3), results: ret },
  get_buffer_bytes: { params: i(5), results: ret },
  set_buffer_bytes: { params: i(5), results: ret },
  http_call: { params: i(10), results: ret },
  grpc_call: { params: i(12), results: ret },
  grpc_stream: { params: i(9), results: ret },
  grpc_close: { params: i(1), results: ret },
  grpc_cancel: { params: i(1), results: ret },
  grpc_send: { params: i(4), results: ret },
  set_tick_period_milliseconds: { params: i(1), results: ret },
  get_current_time_nanoseconds: { params: i(1), results: ret },
  define_metric: { params: i(4), results: ret },
  increment_metric: { params: ["i32", "i64"], results: ret },
  record_metric: { params: ["i32", "i64"], results: ret },
  get_metric: { params: i(2), results: ret },
  set_effective_context: { params: i(1), results: ret },
  done: { params: [], results: ret },
  call_foreign_function: { params: i(6), results: ret },
  // 0.2.1-specific (wasm.cc registerCallbacks). proxy_clear_route_cache, proxy_get_configuration,
  // proxy_continue_request/response exist only for ABI 0.1.0 and are NOT importable here.
  continue_stream: { params: i(1), results: ret },
  close_stream: { params: i(1), results: ret },
  get_log_level: { params: i(1), results: ret },
};

const wasi: Record<string, Signature> = {
  fd_write: { params: i(4), results: ret },
  fd_read: { params: i(4), results: ret },
  fd_seek: { params: ["i32", "i64", "i32", "i32"], results: ret },
  fd_close: { params: i(1), results: ret },
  fd_fdstat_get: { params: i(2), results: ret },
  fd_fdstat_set_flags: { params: i(2), results: ret },
  fd_fdstat_set_rights: { params: ["i32", "i64", "i64"], results: ret },
  environ_get: { params: i(2), results: ret },
  environ_sizes_get: { params: i(2), results: ret },
  args_get: { params: i(2), results: ret },
  args_sizes_get: { params: i(2), results: ret },
  clock_time_get: { params: ["i32", "i64", "i32"], results: ret },
  clock_res_get: { params: i(2), results: ret },
  fd_advise: { params: ["i32", "i64", "i64", "i32"], results: ret },
  fd_allocate: { params: ["i32", "i64", "i64"], results: ret },
  fd_datasync: { params: i(1), results: ret },
  fd_filestat_set_size: { params: ["i32", "i64"], results: ret },
  fd_filestat_set_times: { params: ["i32", "i64", "i64", "i32"], results: ret },
  fd_pread: { params: ["i32", "i32", "i32", "i64", "i32"], results: ret },
  fd_pwrite: { params: ["i32", "i32", "i32", "i64", "i32"], results: ret },
  fd_readdir: { params: ["i32", "i32", "i32", "i64", "i32"], results: ret },
  fd_renumber: { params: i(2), results: ret },
  fd_sync: { params: i(1), results: ret },
  fd_tell: { params: i(2), results: ret },
  path_create_directory: { params: i(3), results: ret },
  path_filestat_set_times: { params: ["i32", "i32", "i32", "i32", "i64", "i64", "i32"], results: ret },
  path_link: { params: i(6), results: ret },
  path_readlink: { params: i(6), results: ret },
  path_remove_directory: { params: i(3), results: ret },
  path_rename: { params: i(6), results: ret },
  path_symlink: { params: i(4), results: ret },
  path_unlink_file: { params: i(3), results: ret },
  sock_accept: { params: i(3), results: ret },
  sock_recv: { params: i(6), results: ret },
  sock_send: { params: i(5), results: ret },
  sock_shutdown: { params: i(2), results: ret },
  random_get: { params: i(2), results: ret },
  sched_yield: { params: [], results: ret },
  poll_oneoff: { params: i(4), results: ret },
  proc_exit: { params: i(1), results: [] },
  path_open: { params: ["i32", "i32", "i32", "i32", "i32", "i64", "i64", "i32", "i32"], results: ret },
  fd_prestat_get: { params: i(2), results: ret },
  fd_prestat_dir_name: { params: i(3), results: ret },
  path_filestat_get: { params: i(5), results: ret },
  fd_filestat_get: { params: i(2), results: ret },
};

/** Every importable function, keyed "module.name". */
export const HOST_SIGNATURES: ReadonlyMap<string, Signature> = new Map<string, Signature>([
  ...Object.entries(proxy).map(([n, s]) => [`env.proxy_${n}`, s] as [string, Signature]),
  ["env.pthread_equal", { params: i(2), results: ret }],
  ["env.emscripten_notify_memory_growth", { params: i(1), results: [] }],
  ...Object.entries(wasi).map(([n, s]) => [`wasi_unstable.${n}`, s] as [string, Signature]),
  ...Object.entries(wasi).map(([n, s]) => [`wasi_snapshot_preview1.${n}`, s] as [string, Signature]),
]);

/** Calls allowed while _start/_initialize runs (src/wasm.cc WasmBase::startVm); others trap. */
const restrictedWasi = [
  "fd_write",
  "args_sizes_get",
  "args_get",
  "environ_sizes_get",
  "environ_get",
  "clock_time_get",
  "clock_res_get",
  "random_get",
  "poll_oneoff",
  "fd_fdstat_get",
  "fd_fdstat_set_flags",
  "fd_advise",
  "fd_allocate",
  "fd_datasync",
  "fd_fdstat_set_rights",
  "fd_filestat_get",
  "fd_filestat_set_size",
  "fd_filestat_set_times",
  "fd_pread",
  "fd_prestat_dir_name",
  "fd_prestat_get",
  "fd_pwrite",
  "fd_readdir",
  "fd_renumber",
  "fd_sync",
  "fd_tell",
  "path_create_directory",
  "path_filestat_get",
  "path_filestat_set_times",
  "path_link",
  "path_readlink",
  "path_remove_directory",
  "path_rename",
  "path_symlink",
  "path_unlink_file",
  "sock_accept",
  "sock_recv",
  "sock_send",
  "sock_shutdown",
];
export const ALLOWED_DURING_START: ReadonlySet<string> = new Set([
  "env.emscripten_notify_memory_growth",
  "env.proxy_log",
  ...restrictedWasi.flatMap((n) => [`wasi_unstable.${n}`, `wasi_snapshot_preview1.${n}`]),
]);
