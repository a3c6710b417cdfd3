// routing.tierWeights: defaults, the filter receiving them in kvr.cfg, and bad values refused
// with the path of the field.
import { describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../control-plane/src/config/load-config.ts";
import { encodeCfgImage } from "../../control-plane/src/publish/images.ts";
import { route, writeIo } from "../filter-core/core-probes.ts";

const minimal = {
  pools: [{ name: "p", models: ["m"], endpoints: [{ address: "127.0.0.1:8000", ranks: [0] }] }],
};
const withWeights = (tierWeights: unknown) => ({ ...minimal, routing: { tierWeights } });

function problemsOf(raw: unknown): string[] {
  try {
    parseConfig(raw, "t", {});
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("routing.tierWeights", () => {
  it("defaults to gpu 1, cpu 0.85, storage 0.45 and fills omitted tiers", () => {
    expect(parseConfig(minimal, "t", {}).routing.tierWeights).toEqual({ gpu: 1, cpu: 0.85, storage: 0.45 });
    expect(parseConfig(withWeights({ storage: 0.2 }), "t", {}).routing.tierWeights).toEqual({
      gpu: 1,
      cpu: 0.85,
      storage: 0.2,
    });
  });

  it("reaches the filter in kvr.cfg", () => {
    const cfg = parseConfig(withWeights({ gpu: 0.9, cpu: 0.5, storage: 0.25 }), "t", {});
    const image = encodeCfgImage(cfg, 1, new Map());
    writeIo(image);
    expect(route.cfgDecodeIo(image.length)).toBe(1);
    expect([14, 15, 16].map((f) => route.cfgField(f))).toEqual([0.9, 0.5, 0.25].map(Math.fround));
  });

  it.each([
    ["cpu above 1", { cpu: 1.5 }, "routing.tierWeights.cpu:"],
    ["a negative storage weight", { storage: -0.1 }, "routing.tierWeights.storage:"],
    ["a string", { gpu: "1" }, "routing.tierWeights.gpu:"],
    ["NaN", { cpu: Number.NaN }, "routing.tierWeights.cpu:"],
    ["cpu worth more than gpu", { gpu: 0.5, cpu: 0.6 }, "routing.tierWeights.cpu: must not exceed gpu"],
    [
      "storage worth more than cpu",
      { cpu: 0.3, storage: 0.31 },
      "routing.tierWeights.storage: must not exceed cpu",
    ],
    ["an unknown tier", { disk: 0.2 }, "routing.tierWeights: unknown field"],
    ["a misspelt tier", { CPU: 0.2 }, "routing.tierWeights: unknown field"],
  ])("refuses %s, naming the field", (_name, weights, message) => {
    expect(problemsOf(withWeights(weights)).join("\n")).toContain(message);
  });

  it("accepts the edges: all equal, zeros, gpu 1 and cpu 1", () => {
    for (const w of [
      { gpu: 1, cpu: 1, storage: 1 },
      { gpu: 0, cpu: 0, storage: 0 },
      { cpu: 1, storage: 0 },
    ])
      expect(() => parseConfig(withWeights(w), "t", {})).not.toThrow();
  });
});
