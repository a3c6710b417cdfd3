// LoRA adapters in the configuration (pools[].adapters, routing.lora) and in the adapter catalog
// that adds the engines' /v1/models adapters: bounded names, one meaning per `model` name, and
// what an engine lists that cannot be routed is refused, not added.
import { describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../control-plane/src/config/load-config.ts";
import { parseModelList } from "../../control-plane/src/discovery/adapter-discovery.ts";
import { AdapterCatalog } from "../../control-plane/src/model/adapter-catalog.ts";

const pool = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  models: [`${name}-base`],
  endpoints: [{ address: `127.0.0.${name.length}:8000`, ranks: [0] }],
  ...extra,
});

function problemsOf(raw: unknown): string {
  try {
    parseConfig(raw, "t", {});
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.join("\n");
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("LoRA configuration", () => {
  it("defaults: no adapters, a load cost of 1024 and a full cost of 8192 prefill tokens", () => {
    const cfg = parseConfig({ pools: [pool("a")] }, "t", {});
    expect(cfg.pools[0]?.adapters).toEqual([]);
    expect(cfg.routing.lora).toEqual({ loadCost: 1024, fullCost: 8192 });
    expect(cfg.load.modelsIntervalMs).toBe(10_000);
  });

  it.each([
    ['a"quote', "pools[0].adapters[0]"],
    ["", "pools[0].adapters[0]"],
    ["x".repeat(129), "pools[0].adapters[0]"],
    ["with space", "pools[0].adapters[0]"],
    ["-leading-dash", "pools[0].adapters[0]"],
    ["é", "pools[0].adapters[0]"],
  ])("refuses the adapter name %j", (name, path) => {
    expect(problemsOf({ pools: [pool("a", { adapters: [name] })] })).toContain(path);
  });

  it("refuses an adapter that is a model or another pool's adapter, and a repeat", () => {
    expect(problemsOf({ pools: [pool("a", { adapters: ["a-base"] })] })).toMatch(
      /pools\[0\]\.adapters\[0\].*a-base is already a model or adapter of pool a/,
    );
    expect(problemsOf({ pools: [pool("a", { adapters: ["x"] }), pool("bb", { adapters: ["x"] })] })).toMatch(
      /pools\[1\]\.adapters\[0\].*x is already a model or adapter of pool a/,
    );
    expect(problemsOf({ pools: [pool("a", { adapters: ["x", "x"] })] })).toMatch(/pools\[0\]\.adapters\[1\]/);
  });

  it("refuses more than 256 adapters per pool and a full cost below the load cost", () => {
    const many = Array.from({ length: 257 }, (_, i) => `a${i}`);
    expect(problemsOf({ pools: [pool("a", { adapters: many })] })).toContain("pools[0].adapters");
    expect(problemsOf({ pools: [pool("a")], routing: { lora: { loadCost: 500, fullCost: 100 } } })).toMatch(
      /routing\.lora\.fullCost.*must not be below loadCost \(500\)/,
    );
    expect(problemsOf({ pools: [pool("a")], routing: { lora: { loadCost: -1 } } })).toContain(
      "routing.lora.loadCost",
    );
  });
});

describe("adapter catalog", () => {
  const cfg = parseConfig(
    { pools: [pool("a", { adapters: ["sql"] }), pool("bb", { adapters: ["legal"] })] },
    "t",
    {},
  );

  it("adds an engine's adapters over the pool's models after the configured ones, once, in order", () => {
    const c = new AdapterCatalog(cfg);
    expect(
      c.discovered("a", [
        { id: "a-base", parent: null },
        { id: "chat", parent: "a-base" },
        { id: "sql", parent: "a-base" },
      ]),
    ).toBe(true);
    expect(c.discovered("a", [{ id: "chat", parent: "a-base" }])).toBe(false);
    expect(c.adapters("a")).toEqual(["sql", "chat"]);
    expect([c.idOf("a", "sql"), c.idOf("a", "chat"), c.idOf("a", "nope"), c.idOf("zz", "sql")]).toEqual([
      0, 1, -1, -1,
    ]);
  });

  it("refuses what cannot be routed: other bases, taken names, bad names, a full table", () => {
    const c = new AdapterCatalog(cfg);
    const grew = c.discovered("a", [
      { id: "other", parent: "not-our-base" },
      { id: "legal", parent: "a-base" },
      { id: "bb-base", parent: "a-base" },
      { id: 'bad"name', parent: "a-base" },
      { id: "z".repeat(200), parent: "a-base" },
    ]);
    expect(grew).toBe(false);
    expect(c.adapters("a")).toEqual(["sql"]);
    expect(c.refused.get("a/legal")).toBe("already served by pool bb");
    expect(c.refused.get("a/bb-base")).toBe("already served by pool bb");
    expect(c.refused.get('a/bad"name')).toMatch(/not a valid adapter name/);
    expect(c.refused.has("a/other")).toBe(false); // not an adapter of this pool at all
    const flood = Array.from({ length: 300 }, (_, i) => ({ id: `f${i}`, parent: "a-base" }));
    expect(c.discovered("a", flood)).toBe(true);
    expect(c.adapters("a").length).toBe(256);
    expect(c.refused.get("a/f299")).toBe("the pool already has 256 adapters");
  });

  it("reads /v1/models bodies, skipping entries that are not model cards", () => {
    expect(
      parseModelList({
        object: "list",
        data: [{ id: "m", parent: null }, { id: "x", parent: "m" }, { id: 3 }, null, "s"],
      }),
    ).toEqual([
      { id: "m", parent: null },
      { id: "x", parent: "m" },
    ]);
    for (const bad of [null, [], "x", { data: {} }, { data: "m" }]) expect(parseModelList(bad)).toBeNull();
  });
});
