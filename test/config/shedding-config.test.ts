// The configuration of overload shedding (per pool) and of the priority header (routing), and how
// both travel to the filter in kvr.cfg: defaults, bounds, the sheddable ≤ standard rule, header
// names that already mean something to kvroute.
import { describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../control-plane/src/config/load-config.ts";
import { encodeCfgImage } from "../../control-plane/src/publish/images.ts";

const pool = (extra: Record<string, unknown> = {}) => ({
  name: "p",
  models: ["m"],
  endpoints: [{ address: "127.0.0.1:8000", ranks: [0] }],
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

describe("shedding configuration", () => {
  it("is off by default, with thresholds ready for when it is turned on", () => {
    const cfg = parseConfig({ pools: [pool()] }, "t", {});
    expect(cfg.pools[0]?.shedding).toEqual({
      enabled: false,
      retryAfterSeconds: 1,
      standard: { maxQueued: 16, maxKvUsage: 0.95 },
      sheddable: { maxQueued: 4, maxKvUsage: 0.85 },
    });
    expect(cfg.routing.priorityHeader).toBe("x-kvroute-priority");
  });

  it("keeps a level's other default when only one field is given", () => {
    const cfg = parseConfig(
      { pools: [pool({ shedding: { enabled: true, standard: { maxQueued: 8 } } })] },
      "t",
      {},
    );
    expect(cfg.pools[0]?.shedding.standard).toEqual({ maxQueued: 8, maxKvUsage: 0.95 });
    expect(cfg.pools[0]?.shedding.sheddable).toEqual({ maxQueued: 4, maxKvUsage: 0.85 });
  });

  it("names the path of every bad field", () => {
    const text = problemsOf({
      pools: [
        pool({
          shedding: {
            enabled: "yes",
            retryAfterSeconds: 0,
            standard: { maxQueued: -1, maxKvUsage: 1.5 },
            sheddable: { maxQueue: 2 },
          },
        }),
      ],
    });
    expect(text).toContain("pools[0].shedding.enabled:");
    expect(text).toContain("pools[0].shedding.retryAfterSeconds:");
    expect(text).toContain("pools[0].shedding.standard.maxQueued:");
    expect(text).toContain("pools[0].shedding.standard.maxKvUsage:");
    expect(text).toContain("pools[0].shedding.sheddable:"); // the typo'd key
  });

  it("refuses sheddable thresholds above standard's (sheddable must go first)", () => {
    const text = problemsOf({
      pools: [
        pool({
          shedding: {
            standard: { maxQueued: 4, maxKvUsage: 0.8 },
            sheddable: { maxQueued: 5, maxKvUsage: 0.9 },
          },
        }),
      ],
    });
    expect(text).toContain("pools[0].shedding.sheddable.maxQueued: must not be above standard.maxQueued");
    expect(text).toContain("pools[0].shedding.sheddable.maxKvUsage: must not be above standard.maxKvUsage");
    // Equal is fine.
    parseConfig(
      {
        pools: [
          pool({
            shedding: {
              standard: { maxQueued: 4, maxKvUsage: 0.8 },
              sheddable: { maxQueued: 4, maxKvUsage: 0.8 },
            },
          }),
        ],
      },
      "t",
      {},
    );
  });

  it("takes a priority header name, lower-cased, and refuses one kvroute already uses", () => {
    expect(
      parseConfig({ pools: [pool()], routing: { priorityHeader: "X-Tier" } }, "t", {}).routing.priorityHeader,
    ).toBe("x-tier");
    expect(problemsOf({ pools: [pool()], routing: { priorityHeader: "x tier" } })).toContain(
      "routing.priorityHeader:",
    );
    expect(problemsOf({ pools: [pool()], routing: { priorityHeader: "x-data-parallel-rank" } })).toContain(
      "routing.priorityHeader: x-data-parallel-rank already has a meaning",
    );
    expect(
      problemsOf({
        pools: [pool()],
        routing: {
          priorityHeader: "x-secret",
          rankHeaderPolicy: { secretHeader: { name: "X-Secret", value: "0123456789abcdef" } },
        },
      }),
    ).toContain("routing.priorityHeader: x-secret already has a meaning");
  });

  it("takes GAIE objectives for the picker, names unique, integer priorities", () => {
    const cfg = parseConfig(
      { pools: [pool()], epp: { objectives: [{ name: "chat", priority: -2 }] } },
      "t",
      {},
    );
    expect(cfg.epp?.objectives).toEqual([{ name: "chat", priority: -2 }]);
    // Unset: the picker reads llm-d-router's header, then the deprecated GAIE one.
    expect(cfg.epp?.objectiveHeader).toBeUndefined();
    const dup = problemsOf({
      pools: [pool()],
      epp: {
        objectives: [
          { name: "a", priority: 1 },
          { name: "a", priority: 2 },
        ],
      },
    });
    expect(dup).toContain("epp.objectives: objective names must be unique");
    expect(problemsOf({ pools: [pool()], epp: { objectives: [{ name: "a", priority: 1.5 }] } })).toContain(
      "epp.objectives[0].priority:",
    );
  });

  it("travels in kvr.cfg: the pool's record ends with the shedding fields, the image with the header name", () => {
    const cfg = parseConfig(
      {
        pools: [
          pool({
            shedding: {
              enabled: true,
              retryAfterSeconds: 9,
              standard: { maxQueued: 12, maxKvUsage: 0.9 },
              sheddable: { maxQueued: 3, maxKvUsage: 0.6 },
            },
          }),
        ],
        routing: { priorityHeader: "x-tier", sessionHeader: "" },
      },
      "t",
      {},
    );
    // Protocol 3 ends with the session settings (header "" = u16 0, margin f32, TTL u32), then the
    // LoRA costs (2 × f32) and each pool's (empty) adapter table (u16).
    const full = Buffer.from(encodeCfgImage(cfg, 1, new Map()));
    const tail = 10 + 8 + 2 * cfg.pools.length;
    const img = full.subarray(0, full.length - tail);
    expect(full.readUInt16LE(full.length - tail)).toBe(0);
    const header = Buffer.from([6, 0, ...Buffer.from("x-tier")]);
    expect(img.subarray(img.length - header.length)).toEqual(header);
    // enabled u8, reserved u8, Retry-After u16, standard (queued u16, KV ‰ u16), sheddable (same).
    const shed = img.subarray(img.length - header.length - 12, img.length - header.length);
    expect(shed.readUInt8(0)).toBe(1);
    expect(shed.readUInt16LE(2)).toBe(9);
    expect(shed.readUInt16LE(4)).toBe(12);
    expect(shed.readUInt16LE(6)).toBe(900);
    expect(shed.readUInt16LE(8)).toBe(3);
    expect(shed.readUInt16LE(10)).toBe(600);
  });
});
