// The pool schema's `discovery.kubernetes` field: shape, defaults and cross-field rules, with
// errors that name the bad field.
import { describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../control-plane/src/config/load-config.ts";

const base = { namespace: "llm", service: "workers", selector: { matchLabels: { app: "w" } } };

function problems(pool: Record<string, unknown>): string[] {
  try {
    parseConfig({ pools: [{ name: "p", models: ["m"], ...pool }] }, "test", {});
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}

describe("pools[].discovery.kubernetes", () => {
  it("accepts one port with defaults filled in", () => {
    const cfg = parseConfig(
      { pools: [{ name: "p", models: ["m"], discovery: { kubernetes: { ...base, port: 8000 } } }] },
      "t",
      {},
    );
    expect(cfg.pools[0]?.discovery?.kubernetes).toEqual({ ...base, port: 8000, metricsPath: "/metrics" });
  });

  it.each([
    [
      { discovery: { kubernetes: { ...base } } },
      "pools[0].discovery.kubernetes.port: set exactly one of port and targetPorts",
    ],
    [
      { discovery: { kubernetes: { ...base, port: 8000, targetPorts: [8000] } } },
      "pools[0].discovery.kubernetes.port: set exactly one of port and targetPorts",
    ],
    [
      { discovery: { kubernetes: { ...base, targetPorts: [8000, 8001] } } },
      "pools[0].discovery.kubernetes.targetPorts: targetPorts (one port per rank) need dpMode: external; use port for one server per pod",
    ],
    [
      { dpMode: "external", discovery: { kubernetes: { ...base, targetPorts: [8000, 8000] } } },
      "pools[0].discovery.kubernetes.targetPorts: target ports must be distinct",
    ],
    [
      {
        dpMode: "external",
        discovery: { kubernetes: { ...base, targetPorts: [1, 2, 3, 4, 5, 6, 7, 8, 9] } },
      },
      "pools[0].discovery.kubernetes.targetPorts: Too big: expected array to have <=8 items",
    ],
    [
      { endpoints: [{ address: "10.0.0.1:8000" }], discovery: { kubernetes: { ...base, port: 8000 } } },
      "pools[0].endpoints: a pool takes its endpoints either from `endpoints` or from `discovery`, not both",
    ],
    [
      { discovery: { kubernetes: { ...base, namespace: "LLM", port: 8000 } } },
      "pools[0].discovery.kubernetes.namespace: expected a Kubernetes name (RFC 1123 label)",
    ],
    [
      { discovery: { kubernetes: { ...base, selector: { matchLabels: {} }, port: 8000 } } },
      "pools[0].discovery.kubernetes.selector.matchLabels: at least one label",
    ],
    [
      { discovery: { kubernetes: { ...base, selector: { matchLabels: { "bad key!": "x" } }, port: 8000 } } },
      "pools[0].discovery.kubernetes.selector.matchLabels.bad key!: Invalid key in record",
    ],
    [
      { discovery: { kubernetes: { ...base, port: 8000, metricsPath: "metrics" } } },
      "pools[0].discovery.kubernetes.metricsPath: expected an absolute path such as /metrics",
    ],
    [
      { discovery: { kubernetes: { ...base, port: 8000, labels: {} } } },
      "pools[0].discovery.kubernetes: unknown field(s) labels",
    ],
    [{ discovery: { consul: {} } }, "pools[0].discovery: unknown field(s) consul"],
  ])("%j is rejected", (pool, message) => {
    expect(problems(pool)).toContain(message);
  });

  it("lets a dynamo pool without static endpoints pass: worker ids come from pod names", () => {
    expect(problems({ engine: "dynamo", discovery: { kubernetes: { ...base, port: 9000 } } })).toEqual([]);
  });
});
