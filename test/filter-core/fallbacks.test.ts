// The fallback list of a decision (filter/core route-decision.ts `Decider.fallbacks`, with the
// per-engine limit of fallback-limit.ts), one table: which slots follow the pick, in which
// order. The shipped filter (build/kvroute.wasm in the host) writes their addresses after the
// pick's in x-gateway-destination-endpoint; the table names each as `<address>#<rank>`.
import { afterEach, describe, expect, it } from "vitest";
import { chat, ShippedFilter } from "./shipped-filter.ts";

let filter: ShippedFilter | null = null;
afterEach(() => {
  filter?.close();
  filter = null;
});

const at = (i: number) => `10.0.0.${i}:8000`;

interface Case {
  name: string;
  /** The pool (one per case, model "m"): endpoints i → at(i), with their ranks. */
  pool: Record<string, unknown> & {
    endpoints: Array<{ address: string; ranks: number[]; workerId?: string }>;
  };
  /** Requests running per slot key suffix `<address>#<rank>` (others 0). */
  running?: Record<string, number>;
  /** Only these slots are eligible (the gateway's subset hint). */
  subset?: string[];
  destinationFallbacks: number;
  /** The pick, then its fallbacks, as `<address>#<rank>`. */
  pick: string;
  fallbacks: string[];
}

const external = (n: number) => ({
  dpMode: "external",
  endpoints: Array.from({ length: n }, (_, i) => ({ address: at(i + 1), ranks: [i] })),
});
const internal = (n: number, ranks: number[]) => ({
  endpoints: Array.from({ length: n }, (_, i) => ({ address: at(i + 1), ranks })),
});

const cases: Case[] = [
  {
    name: "external LB: cheapest first, the pick excluded, every endpoint once",
    pool: external(4),
    running: { [`${at(1)}#0`]: 3, [`${at(2)}#1`]: 1, [`${at(3)}#2`]: 0, [`${at(4)}#3`]: 2 },
    destinationFallbacks: 3,
    pick: `${at(3)}#2`,
    fallbacks: [`${at(2)}#1`, `${at(4)}#3`, `${at(1)}#0`],
  },
  {
    name: "equal costs: lower slot id first",
    pool: external(4),
    running: { [`${at(4)}#3`]: 0, [`${at(1)}#0`]: 5, [`${at(2)}#1`]: 5, [`${at(3)}#2`]: 5 },
    destinationFallbacks: 3,
    pick: `${at(4)}#3`,
    fallbacks: [`${at(1)}#0`, `${at(2)}#1`, `${at(3)}#2`],
  },
  {
    name: "the list stops at destinationFallbacks",
    pool: external(4),
    running: { [`${at(1)}#0`]: 3, [`${at(2)}#1`]: 1, [`${at(3)}#2`]: 0, [`${at(4)}#3`]: 2 },
    destinationFallbacks: 1,
    pick: `${at(3)}#2`,
    fallbacks: [`${at(2)}#1`],
  },
  {
    name: "destinationFallbacks 0: the pick alone",
    pool: external(4),
    running: { [`${at(1)}#0`]: 3, [`${at(2)}#1`]: 1, [`${at(3)}#2`]: 0, [`${at(4)}#3`]: 2 },
    destinationFallbacks: 0,
    pick: `${at(3)}#2`,
    fallbacks: [],
  },
  {
    name: "internal LB: only the pick's rank on other endpoints (the rank header stays valid), cheapest first",
    pool: internal(3, [0, 1]),
    running: {
      [`${at(1)}#0`]: 4,
      [`${at(1)}#1`]: 0,
      [`${at(2)}#0`]: 1,
      [`${at(2)}#1`]: 3,
      [`${at(3)}#0`]: 1,
      [`${at(3)}#1`]: 2,
    },
    destinationFallbacks: 5,
    pick: `${at(1)}#1`,
    fallbacks: [`${at(3)}#1`, `${at(2)}#1`],
  },
  {
    name: "internal LB, one endpoint: no other endpoint takes the same rank header",
    pool: internal(1, [0, 1, 2, 3]),
    running: { [`${at(1)}#0`]: 2, [`${at(1)}#1`]: 0, [`${at(1)}#2`]: 1, [`${at(1)}#3`]: 1 },
    destinationFallbacks: 3,
    pick: `${at(1)}#1`,
    fallbacks: [],
  },
  {
    name: "subset hint: pick and fallbacks stay inside it, whatever the cost outside",
    pool: external(4),
    running: { [`${at(1)}#0`]: 3, [`${at(2)}#1`]: 9, [`${at(3)}#2`]: 0, [`${at(4)}#3`]: 5 },
    subset: [`${at(1)}#0`, `${at(2)}#1`, `${at(4)}#3`],
    destinationFallbacks: 3,
    pick: `${at(1)}#0`,
    fallbacks: [`${at(4)}#3`, `${at(2)}#1`],
  },
  {
    name: "subset hint of one slot: no fallbacks",
    pool: external(4),
    subset: [`${at(2)}#1`],
    destinationFallbacks: 3,
    pick: `${at(2)}#1`,
    fallbacks: [],
  },
  {
    name: "Dynamo: its headers name the worker, so the pick alone",
    pool: {
      engine: "dynamo",
      endpoints: internal(3, [0]).endpoints.map((e, i) => ({ ...e, workerId: String(100 + i) })),
    },
    running: { [`${at(1)}#0`]: 2, [`${at(2)}#0`]: 0, [`${at(3)}#0`]: 1 },
    destinationFallbacks: 3,
    pick: `${at(2)}#0`,
    fallbacks: [],
  },
  {
    name: "SGLang: the same rule as vLLM (the body rank equals the header rank)",
    pool: { engine: "sglang", ...internal(3, [0]) },
    running: { [`${at(1)}#0`]: 2, [`${at(2)}#0`]: 0, [`${at(3)}#0`]: 1 },
    destinationFallbacks: 3,
    pick: `${at(2)}#0`,
    fallbacks: [`${at(3)}#0`, `${at(1)}#0`],
  },
  {
    name: "round-robin keeps no costs: no fallbacks",
    pool: { policy: "round-robin", ...external(3) },
    destinationFallbacks: 3,
    pick: `${at(1)}#0`,
    fallbacks: [],
  },
];

function run(c: Case) {
  const f = new ShippedFilter({
    pools: [{ name: "p", models: ["m"], ...c.pool }],
    cache: { buckets: 256, ways: 16 },
    // A configured seed turns the gateway's order of near-equal slots off (route-decision.ts): the
    // pick is the cheapest slot by its cost alone, which these small load differences decide.
    plugin: { destinationFallbacks: c.destinationFallbacks, seed: 1 },
  });
  filter = f;
  const name = (id: number) => {
    const key = f.slots.get(id)?.key ?? "";
    return key.slice(key.indexOf("/") + 1);
  };
  for (const s of f.slots.all())
    f.load.scraped(s.id, { running: c.running?.[name(s.id)] ?? 0, waiting: 0, kvUsage: 0 }, 0);
  f.publishLoad();
  f.tick();
  const subset = c.subset?.map((n) => n.slice(0, n.indexOf("#")));
  const r = f.route(chat("", "hello", "m"), {
    ...(subset === undefined
      ? {}
      : { metadata: { "envoy.lb.subset_hint": { "x-gateway-destination-endpoint-subset": subset } } }),
  });
  const listed = (r.forwarded?.get("x-gateway-destination-endpoint") ?? "").split(",");
  // The pick: the slot the filter's headers name (its rank header, or Dynamo's worker and rank).
  const rank = r.forwarded?.get("x-data-parallel-rank");
  const pick =
    r.slot >= 0
      ? r.slot
      : (f.slots
          .all()
          .find((s) => s.address === listed[0] && (rank === undefined || s.headerRank === Number(rank)))
          ?.id ?? -1);
  const pickRank = f.slots.get(pick)?.globalRank;
  // A fallback endpoint runs the request under the pick's rank header: its slot of that rank, or
  // its only slot (external LB: one rank per endpoint, no rank header).
  const slotAt = (address: string) => {
    const there = f.slots.all().filter((s) => s.present && s.address === address);
    return (there.length === 1 ? there[0] : there.find((s) => s.globalRank === pickRank))?.id ?? -1;
  };
  expect(listed[0]).toBe(f.slots.get(pick)?.address);
  return { pick: name(pick), fallbacks: listed.slice(1).map((a) => name(slotAt(a))) };
}

describe("fallbacks()", () => {
  it.each(cases)("$name", (c) => {
    expect(run(c)).toEqual({ pick: c.pick, fallbacks: c.fallbacks });
  });
});
