// vLLM's internal DP balancer (DPLBAsyncMPClient.get_core_engine_for_request), both generations,
// as an internal-LB deployment spanning the 8 ranks with one API server (client_count 1).
// Stats (waiting, running, KV usage per engine) come from the DP coordinator, refreshed every
// ~100 ms (ClusterConfig.statsIntervalMs); between refreshes each pick adds client_count to
// the chosen engine's local waiting count. The rules live in control-plane/sim/balancer.ts
// (the simulator's own balancer); this policy runs one instance of it per run.
// Upstream (github.com/vllm-project/vllm, vllm/v1/engine/core_client.py):
// - ≤ 0.11 (tag v0.11.0): score = 4 · waiting + running, scan from the client's fixed start
//   index, first minimum wins;
// - main @ 00080ee13c7a451fce071ccb8d0e94d395acf5a7: score = max(client_count · in-flight,
//   waiting + running) + waiting · 6 · max(0, kv_usage − 0.5) when anything waits; the scan start
//   rotates after every pick; in-flight counts this client's requests until they finish.
import { type BalancerRule, VllmDpBalancer } from "../../../control-plane/sim/balancer.ts";
import type { PolicyFactory, RoutingPolicy } from "./types.ts";

export function vllmDpPolicyFor(rule: BalancerRule, statsIntervalMs = 100): PolicyFactory {
  const legacy = rule === "legacy";
  return {
    name: legacy ? "vllm-dp ≤0.11" : "vllm-dp main",
    describe: legacy
      ? "vLLM ≤ 0.11 internal DP balancer: lowest 4·waiting + running, fixed scan start, coordinator stats every " +
        `${statsIntervalMs} ms plus its own picks between refreshes`
      : "vLLM main (core_client.py @ 00080ee) DP balancer: lowest max(in-flight, waiting + running) + waiting·6·max(0, kv − 0.5), " +
        `rotating scan start, coordinator stats every ${statsIntervalMs} ms plus its own picks`,
    create(ctx): RoutingPolicy {
      const balancer = new VllmDpBalancer(ctx.ranks, rule);
      let refreshedMs = Number.NEGATIVE_INFINITY;
      return {
        tick(now, loads) {
          if (now - refreshedMs < statsIntervalMs) return;
          refreshedMs = now;
          balancer.updateStats(loads);
        },
        choose: () => balancer.pick(),
        done: (result) => balancer.finished(result.rank),
      };
    },
  };
}

export const vllmLegacyPolicy = vllmDpPolicyFor("legacy");
export const vllmCurrentPolicy = vllmDpPolicyFor("current");
