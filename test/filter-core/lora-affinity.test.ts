// LoRA adapters in the shared-data images and the filter's adapter cost (filter/core/lora-affinity.ts),
// through build/kvroute-core.wasm: kvr.cfg carries each pool's adapter table, kvr.load each slot's
// active adapters as ids into it; a slot running the adapter costs nothing, one with room a load
// (more for its last places; also when the adapter only waits there), a full one more; this VM's
// requests in flight hold places as the list does; and an image without LoRA fields (stride 16,
// protocol 2) changes nothing.
import { beforeEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { AdapterCatalog } from "../../control-plane/src/model/adapter-catalog.ts";
import { LoadModel } from "../../control-plane/src/model/slot-load.ts";
import { SlotTable } from "../../control-plane/src/model/slot-table.ts";
import { encodeCfgImage, encodeLoadImage, encodeSlotsImage } from "../../control-plane/src/publish/images.ts";
import { route, writeIo } from "./core-probes.ts";

const cfg = parseConfig(
  {
    pools: [
      {
        name: "other",
        models: ["other-base"],
        adapters: ["other-a"],
        endpoints: [{ address: "10.0.0.9:8000", ranks: [0] }],
      },
      {
        name: "llama",
        models: ["meta-llama/Llama-3.1-8B", "llama"],
        adapters: ["sql", "chat"],
        endpoints: [
          { address: "10.0.0.1:8000", ranks: [0] },
          { address: "10.0.0.2:8000", ranks: [0] },
          { address: "10.0.0.3:8000", ranks: [0] },
          { address: "10.0.0.4:8000", ranks: [0] },
        ],
      },
    ],
    routing: { lora: { loadCost: 300, fullCost: 5000 } },
  },
  "t",
  {},
);
const [other, llama] = cfg.pools as [(typeof cfg.pools)[number], (typeof cfg.pools)[number]];
const catalog = new AdapterCatalog(cfg);
catalog.discovered("llama", [
  { id: "meta-llama/Llama-3.1-8B", parent: null },
  { id: "legal", parent: "meta-llama/Llama-3.1-8B" },
  { id: "not-ours", parent: "some-other-base" },
]);
const slots = new SlotTable(16);
slots.setEndpointRanks(other, other.endpoints[0] as never, [0]);
for (const e of llama.endpoints) slots.setEndpointRanks(llama, e, [0]);
const poolIndex = (name: string) => cfg.pools.findIndex((p) => p.name === name);
const enc = new TextEncoder();

function publish(lora: Array<{ maxLoras: number; running: string[]; waiting: string[] } | null>) {
  const load = new LoadModel(1);
  lora.forEach((l, i) => {
    load.scraped(i, { running: 0, waiting: 0, kvUsage: 0, ...(l === null ? {} : { lora: l }) }, 0);
  });
  const cfgImage = encodeCfgImage(cfg, 1, new Map(), (p) => catalog.adapters(p));
  writeIo(cfgImage);
  expect(route.cfgDecodeIo(cfgImage.length)).toBe(2);
  const slotsImage = encodeSlotsImage(slots.all(), poolIndex);
  writeIo(slotsImage);
  expect(route.slotsDecodeIo(slotsImage.length)).toBe(5);
  const loadImage = encodeLoadImage(
    slots.all(),
    (id) => load.get(id),
    (p, a) => catalog.idOf(p, a),
  );
  writeIo(loadImage);
  expect(route.loadDecodeIo(loadImage.length)).toBe(5);
}

const find = (model: string) => {
  const b = enc.encode(model);
  writeIo(b);
  return route.adapterFindIo(b.length);
};
const cost = (adapter: number, slot: number, now = 1000n) => route.loraCostIo(1, adapter, slot, now);
/** A slot that must load the adapter: the load (or full) cost plus its place in the adapter's home
 * order, up to 4 loads (HOME_SPREAD in lora-affinity.ts); a load into a slot's last free place
 * costs one load more (LAST_PLACE). */
const LOAD = 300;
const FULL = 5000;
const home = (adapter: number, slot: number) => LOAD * 4 * route.loraHomeIo(1, adapter, slot);
const load = (adapter: number, slot: number, others = 0, max = 2) =>
  LOAD * (others + 1 === max ? 2 : 1) + home(adapter, slot);
const full = (adapter: number, slot: number) => FULL + home(adapter, slot);
const SQL = 0;
const CHAT = 1;
const LEGAL = 2;

beforeEach(() => route.loraResetIo());

describe("adapters in kvr.cfg", () => {
  it("carries configured then discovered adapters, and the costs", () => {
    publish([null, null, null, null]);
    expect(route.cfgPoolField(1, 8)).toBe(3);
    expect(route.cfgPoolField(0, 8)).toBe(1);
    expect([route.cfgField(20), route.cfgField(21)]).toEqual([300, 5000]);
    expect(find("sql")).toBe((1 << 16) | SQL);
    expect(find("legal")).toBe((1 << 16) | LEGAL);
    expect(find("other-a")).toBe(0);
  });

  it("names no adapter for base models, unknown names, prefixes or case variants", () => {
    publish([null, null, null, null]);
    for (const m of ["llama", "meta-llama/Llama-3.1-8B", "not-ours", "sq", "sqlx", "SQL", ""])
      expect(find(m), m).toBe(-1);
  });

  it("still reads a protocol-2 kvr.cfg (no adapters) and refuses protocol 4", () => {
    publish([null, null, null, null]);
    const image = encodeCfgImage(cfg, 1, new Map(), (p) => catalog.adapters(p));
    // A protocol-2 image is this one without the protocol-3 tail (session settings, then LoRA).
    const tail =
      2 + cfg.routing.sessionHeader.length + 4 + 4 + 8 + 2 + (2 + 7) + 2 + (2 + 3) + (2 + 4) + (2 + 5);
    const v2 = Buffer.from(image.subarray(0, image.length - tail));
    v2.writeUInt16LE(2, 4);
    writeIo(v2);
    expect(route.cfgDecodeIo(v2.length)).toBe(2);
    expect(route.cfgPoolField(1, 8)).toBe(0);
    expect(find("sql")).toBe(-1);
    const v4 = Buffer.from(image);
    v4.writeUInt16LE(4, 4);
    writeIo(v4);
    expect(route.cfgDecodeIo(v4.length)).toBe(-2);
  });

  it("refuses an adapter table longer than the control plane can write", () => {
    const many = Array.from({ length: 257 }, (_, i) => `a${i}`);
    const image = encodeCfgImage(cfg, 1, new Map(), (p) => (p === "llama" ? many : []));
    writeIo(image);
    expect(route.cfgDecodeIo(image.length)).toBe(-3);
  });
});

describe("adapters in kvr.load", () => {
  it("lists running adapters first, ids from the pool's table, unknown names as 0xffff", () => {
    publish([
      null,
      { maxLoras: 4, running: ["legal"], waiting: ["sql", "mystery", "legal"] },
      null,
      null,
      null,
    ]);
    expect([6, 7, 8].map((f) => Number(route.loadField(1, f)))).toEqual([4, 3, 3]);
    expect([0, 1, 2, 3].map((i) => route.loadAdapterIo(1, i))).toEqual([0x10000 | LEGAL, SQL, 0xffff, -1]);
    // No report: no LoRA fields.
    expect([6, 7, 8].map((f) => Number(route.loadField(2, f)))).toEqual([0, 0, 0]);
  });

  it("keeps at most 8 ids per slot but counts every active adapter", () => {
    const names = Array.from({ length: 12 }, (_, i) => `x${i}`);
    publish([null, { maxLoras: 16, running: names, waiting: [] }, null, null, null]);
    expect([6, 7, 8].map((f) => Number(route.loadField(1, f)))).toEqual([16, 12, 8]);
  });
});

describe("the adapter cost", () => {
  it("is 0 where the adapter is active, the load cost where there is room, the full cost where there is none", () => {
    publish([
      null,
      { maxLoras: 2, running: ["sql"], waiting: [] },
      { maxLoras: 2, running: ["chat"], waiting: [] },
      { maxLoras: 2, running: ["chat", "legal"], waiting: [] },
      null,
    ]);
    expect([1, 2, 3, 4].map((s) => cost(SQL, s))).toEqual([0, load(SQL, 2, 1), full(SQL, 3), 0]);
    // Only waiting there: queued for a place, judged by what the other adapters take.
    publish([
      null,
      { maxLoras: 1, running: ["chat"], waiting: ["sql"] },
      { maxLoras: 2, running: ["chat"], waiting: ["sql"] },
      null,
      null,
    ]);
    expect([cost(SQL, 1), cost(SQL, 2)]).toEqual([full(SQL, 1), load(SQL, 2, 1)]);
    expect([cost(LEGAL, 1), cost(LEGAL, 2)]).toEqual([full(LEGAL, 1), full(LEGAL, 2)]);
    expect(cost(CHAT, 1)).toBe(0);
  });

  it("counts this VM's requests in flight as active, whatever the time, with the list's adapters", () => {
    publish([
      null,
      { maxLoras: 2, running: [], waiting: [] },
      { maxLoras: 2, running: ["chat"], waiting: [] },
      null,
      null,
    ]);
    // loraStartedIo: a request the filter routed and has not ended (the probe cannot end it).
    route.loraStartedIo(SQL, 1);
    expect(cost(SQL, 1, 1200n)).toBe(0);
    expect(cost(SQL, 1, 60_000n)).toBe(0); // no TTL: in flight until its end
    expect(cost(LEGAL, 1)).toBe(load(LEGAL, 1, 1));
    // Slot 2 runs chat; a request of sql in flight there fills its second adapter place.
    route.loraStartedIo(SQL, 2);
    route.loraStartedIo(SQL, 2);
    expect(cost(LEGAL, 2)).toBe(full(LEGAL, 2));
    expect(cost(CHAT, 2)).toBe(0);
    // A request of the adapter the list names already is not a second adapter.
    route.loraResetIo();
    route.loraStartedIo(CHAT, 2);
    expect(cost(LEGAL, 2)).toBe(load(LEGAL, 2, 1));
    // In flight where the others fill every place: its requests wait there, a load like elsewhere.
    route.loraResetIo();
    publish([
      null,
      { maxLoras: 1, running: ["chat"], waiting: [] },
      { maxLoras: 1, running: [], waiting: [] },
      null,
      null,
    ]);
    route.loraStartedIo(SQL, 1);
    expect(cost(SQL, 1)).toBe(LOAD);
    expect(cost(SQL, 2)).toBe(load(SQL, 2, 0, 1));
  });

  it("orders the slots that must load an adapter by their place in the pool, rotated by the adapter", () => {
    const idle = { maxLoras: 2, running: [], waiting: [] };
    publish([null, idle, idle, idle, idle]);
    // Pool llama holds slots 1–4: adapter a is first on its (a mod 4)-th slot, then the next ones;
    // a pure function of the pool's slots and the adapter's id, so every VM and gateway agrees.
    const order = (a: number) => [1, 2, 3, 4].map((s) => route.loraHomeIo(1, a, s));
    expect(order(SQL)).toEqual([0, 0.25, 0.5, 0.75]);
    expect(order(CHAT)).toEqual([0.75, 0, 0.25, 0.5]);
    expect(order(LEGAL)).toEqual([0.5, 0.75, 0, 0.25]);
    // Each slot is first for as many adapters as any other.
    const firsts = [0, 1, 2, 3, 4, 5, 6, 7].map((a) => order(a).indexOf(0));
    expect(firsts).toEqual([0, 1, 2, 3, 0, 1, 2, 3]);
    expect(route.loraHomeIo(1, SQL, 0)).toBe(-1); // another pool's slot
    // It is a part of the cost: slot 2 (room, no adapter yet) costs the load plus a quarter of the spread.
    expect(cost(SQL, 2)).toBe(300 + 1200 * 0.25);
    expect(cost(SQL, 1)).toBe(300);
  });

  it("a truncated list may hold the adapter: a load, not the full cost", () => {
    const names = Array.from({ length: 9 }, (_, i) => `x${i}`);
    publish([null, { maxLoras: 9, running: names, waiting: [] }, null, null, null]);
    expect(cost(SQL, 1)).toBe(load(SQL, 1));
  });

  it("a load image without LoRA fields (stride 16) costs nothing anywhere", () => {
    publish([null, { maxLoras: 1, running: ["chat"], waiting: [] }, null, null, null]);
    const load = new LoadModel(1);
    load.scraped(1, { running: 0, waiting: 0, kvUsage: 0 }, 0);
    const image = Buffer.from(encodeLoadImage(slots.all(), (id) => load.get(id)));
    // Rewrite as the 16-byte stride of a control plane before LoRA.
    const rows = (image.length - 12) / 36;
    const old = Buffer.alloc(12 + rows * 16);
    image.copy(old, 0, 0, 12);
    old.writeUInt16LE(16, 8);
    for (let r = 0; r < rows; r++) image.copy(old, 12 + r * 16, 12 + r * 36, 12 + r * 36 + 16);
    writeIo(old);
    expect(route.loadDecodeIo(old.length)).toBe(5);
    expect(Number(route.loadField(1, 6))).toBe(0);
    expect([1, 2, 3, 4].map((s) => cost(SQL, s))).toEqual([0, 0, 0, 0]);
  });
});
