// vllm:lora_requests_info as the control plane reads it: vLLM keeps every label set it ever set
// on the page, each valued with the time it was set, so the newest one is the engine's state;
// a series without an `engine` label belongs to the page's only rank; malformed series are skipped.
import { describe, expect, it } from "vitest";
import { parseEngineMetrics } from "../../control-plane/src/load/engine-metrics.ts";

const load = (engine: string) => `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="${engine}",model_name="m"} 1.0
`;

describe("vllm:lora_requests_info", () => {
  it("takes the newest label set of a single-engine page (as vLLM writes it, no engine label)", () => {
    const page = `${load("3")}# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="old",waiting_lora_adapters=""} 1.7349e+09
vllm:lora_requests_info{max_lora="2",running_lora_adapters="sql,chat",waiting_lora_adapters="legal"} 1.7350e+09
vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 1.7348e+09
`;
    expect(parseEngineMetrics(page).ranks.get(3)?.lora).toEqual({
      maxLoras: 2,
      running: ["sql", "chat"],
      waiting: ["legal"],
    });
  });

  it("per rank with engine labels; an unlabelled series on a page of several ranks is nobody's", () => {
    const page = `${load("0")}${load("1")}# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="1",waiting_lora_adapters="",running_lora_adapters="a",engine="1"} 5.0
vllm:lora_requests_info{max_lora="4",waiting_lora_adapters="",running_lora_adapters="b"} 9.0
`;
    const m = parseEngineMetrics(page);
    expect(m.ranks.get(1)?.lora).toEqual({ maxLoras: 1, running: ["a"], waiting: [] });
    expect(m.ranks.get(0)?.lora).toBeUndefined();
  });

  it("skips series with a bad max_lora or value, and bounds the names read", () => {
    const names = Array.from({ length: 400 }, (_, i) => `n${i}`).join(",");
    const page = `${load("0")}# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="lots",running_lora_adapters="x",waiting_lora_adapters=""} 9.0
vllm:lora_requests_info{max_lora="-1",running_lora_adapters="x",waiting_lora_adapters=""} 9.0
vllm:lora_requests_info{max_lora="2",running_lora_adapters="x",waiting_lora_adapters=""} NaN
vllm:lora_requests_info{max_lora="8",running_lora_adapters=" ${names} ,,",waiting_lora_adapters=""} 1.0
`;
    const lora = parseEngineMetrics(page).ranks.get(0)?.lora;
    expect(lora?.maxLoras).toBe(8);
    expect(lora?.running.length).toBe(256);
    expect(lora?.running[0]).toBe("n0");
  });
});
