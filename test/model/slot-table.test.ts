import { describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { SlotTable, SlotTableFullError } from "../../control-plane/src/model/slot-table.ts";

function poolOf(pool: Record<string, unknown>) {
  const cfg = parseConfig({ pools: [{ name: "p", models: ["m"], ...pool }] }, "t", {});
  return cfg.pools[0] as (typeof cfg.pools)[number];
}

describe("slot table", () => {
  it.each([
    // [dpMode, ranks of the endpoint, startRank, expected header values]
    ["internal", [0, 1, 2, 3], undefined, [0, 1, 2, 3]],
    ["hybrid", [4, 5, 6, 7], 4, [0, 1, 2, 3]],
    // Discovered ranks without the start rank (its engine is down): still rank − startRank.
    ["hybrid", [5, 6, 7], 4, [1, 2, 3]],
    ["external", [5], undefined, [null]],
  ] as const)("derives the rank header for vLLM %s LB", (dpMode, ranks, startRank, headers) => {
    const pool = poolOf({
      dpMode,
      endpoints: [
        { address: "10.0.0.1:8000", ranks: [...ranks], ...(startRank === undefined ? {} : { startRank }) },
      ],
    });
    const table = new SlotTable(64);
    const added = table.setEndpointRanks(pool, pool.endpoints[0] as (typeof pool.endpoints)[number], [
      ...ranks,
    ]);
    expect(added.map((s) => s.headerRank)).toEqual(headers);
    expect(added.map((s) => s.globalRank)).toEqual(ranks);
  });

  it("keeps ids stable, tombstones removed ranks and revives them under the same id", () => {
    const pool = poolOf({ endpoints: [{ address: "10.0.0.1:8000", ranks: "auto" }] });
    const ep = pool.endpoints[0] as (typeof pool.endpoints)[number];
    const table = new SlotTable(8);
    table.setEndpointRanks(pool, ep, [0, 1, 2]);
    expect(table.takeChanged()).toBe(true);
    table.setEndpointRanks(pool, ep, [0, 2]);
    expect(table.takeChanged()).toBe(true);
    expect(table.present().map((s) => s.id)).toEqual([0, 2]);
    expect(table.all()).toHaveLength(3);
    expect(table.setEndpointRanks(pool, ep, [0, 1, 2]).map((s) => s.id)).toEqual([1]);
    expect(table.setEndpointRanks(pool, ep, [0, 1, 2])).toEqual([]);
    expect(table.takeChanged()).toBe(true);
    expect(table.takeChanged()).toBe(false);
    expect(table.removeEndpoint("p", "10.0.0.1:8000").map((s) => s.id)).toEqual([0, 1, 2]);
    expect(table.present()).toEqual([]);
  });

  it("honours selective ranks and refuses to grow past its bound", () => {
    const pool = poolOf({ useRanks: [1, 3], endpoints: [{ address: "10.0.0.1:8000" }] });
    const ep = pool.endpoints[0] as (typeof pool.endpoints)[number];
    const table = new SlotTable(2);
    expect(table.setEndpointRanks(pool, ep, [0, 1, 2, 3]).map((s) => s.globalRank)).toEqual([1, 3]);
    const other = poolOf({ endpoints: [{ address: "10.0.0.2:8000" }] });
    expect(() =>
      table.setEndpointRanks(other, other.endpoints[0] as (typeof other.endpoints)[number], [0]),
    ).toThrow(SlotTableFullError);
  });
});
