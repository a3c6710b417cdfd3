// Imports Envoy refuses for ABI 0.2.1 modules: proxy_clear_route_cache (registered only for ABI
// 0.1.0) and proxy_grpc_call with the 10 parameters the AssemblyScript SDK declares (Envoy's has 12).
export declare function proxy_clear_route_cache(): u32;
export declare function proxy_grpc_call(
  a: usize,
  b: usize,
  c: usize,
  d: usize,
  e: usize,
  f: usize,
  g: usize,
  h: usize,
  t: u32,
  tok: usize,
): u32;
