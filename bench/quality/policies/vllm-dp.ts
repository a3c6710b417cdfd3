// vLLM's internal DP balancer (REFERENCE §1.1): no rank header, the API server picks the engine
// with the lowest `4*waiting + running` from coordinator stats refreshed every ~100 ms, adding
// its own picks to the local waiting counts in between. The simulator models exactly that
// (control-plane/sim/balancer.ts, rule "legacy"; the harness sets statsIntervalMs = 100), so
// this policy routes nothing itself: it lets the simulator's balancer choose, as an
// internal-LB deployment spanning both workers (--data-parallel-size 8, 4 local) would.
import type { PolicyFactory } from "./types.ts";

export const vllmDpPolicy: PolicyFactory = {
  name: "vllm-dp",
  describe:
    "vLLM internal DP balancer: lowest 4·waiting + running, stats refreshed every 100 ms (simulator's model)",
  create: () => ({}),
};
