// Storage tiers in the shipped filter's decision (build/kvroute.wasm in the Node host): a prefix
// cached only in CPU memory or on storage counts as partly cached, at its tier's weight from
// routing.tierWeights (prefix-walk.ts: uncached = prompt − chunkSize × weighted cached chunks).
import { afterEach, describe, expect, it } from "vitest";
import { TIER_CPU, TIER_STORAGE } from "../../control-plane/src/index/tier.ts";
import { chat, ShippedFilter, type ShippedFilterOptions } from "./shipped-filter.ts";

let open: ShippedFilter[] = [];
afterEach(() => {
  for (const f of open) f.close();
  open = [];
});
const fleet = (o: ShippedFilterOptions = {}) => {
  const f = new ShippedFilter(o);
  open.push(f);
  return f;
};

// ~2.9 kB of prompt (~22 chunks of 128 bytes, ~720 tokens at 4 bytes a token).
// ~1400 tokens: a GPU copy's 15 % over a CPU one (210 tokens) outweighs the gateway's order of
// near-equal slots (128 tokens).
const longSystem = "You are a careful assistant who cites sources and keeps answers short. ".repeat(80);
const body = chat(longSystem, "Which tier holds my prefix?");

describe("storage tiers in the routing decision", () => {
  it("prefers a CPU-tier hit to no hit, and a GPU hit to the CPU one", () => {
    const f = fleet();
    f.hold(body, 1, Number.POSITIVE_INFINITY, TIER_CPU);
    f.publish();
    expect(f.route(body)).toMatchObject({ outcome: "prefix_hit", slot: 1 });

    const g = fleet();
    g.hold(body, 1, Number.POSITIVE_INFINITY, TIER_CPU);
    g.hold(body, 3);
    g.publish();
    expect(g.route(body)).toMatchObject({ outcome: "prefix_hit", slot: 3 });
  });

  it("orders GPU over CPU over storage over none", () => {
    const f = fleet();
    f.hold(body, 0, Number.POSITIVE_INFINITY, TIER_STORAGE);
    f.hold(body, 2, Number.POSITIVE_INFINITY, TIER_CPU);
    f.publish();
    expect(f.route(body).slot).toBe(2);
    const g = fleet();
    g.hold(body, 0, Number.POSITIVE_INFINITY, TIER_STORAGE);
    g.publish();
    expect(g.route(body)).toMatchObject({ outcome: "prefix_hit", slot: 0 });
  });

  it("a slot's GPU copy wins even where it also has a CPU copy of a deeper prefix", () => {
    const f = fleet();
    const chunks = f.hold(body, 1, Number.POSITIVE_INFINITY, TIER_CPU);
    f.hold(body, 1, chunks - 2); // GPU copy of all but the last two chunks
    // GPU only, one chunk shorter: it would win if slot 1 counted at its CPU weight alone
    // (0.85 × chunks < chunks − 3 for chunks > 20).
    expect(chunks).toBeGreaterThan(20);
    f.hold(body, 2, chunks - 3);
    f.publish();
    expect(f.route(body).slot).toBe(1);
  });

  it("weighs a CPU hit against load by routing.tierWeights.cpu", () => {
    // Slot 1 holds the prompt on CPU but decodes 10 sequences (10 × 16 token-equivalents); the
    // other slots are idle and hold nothing. At cpu 0.85 the saving (~610 tokens) beats the load;
    // at cpu 0.1 (~70 tokens) it does not.
    const at = (cpu: number) => {
      const f = fleet({ routing: { tierWeights: { cpu, storage: Math.min(cpu, 0.05) } } });
      f.hold(body, 1, Number.POSITIVE_INFINITY, TIER_CPU);
      f.load.scraped(1, { running: 10, waiting: 0, kvUsage: 0.2 }, 1);
      f.publish();
      return f.route(body).slot;
    };
    expect(at(0.85)).toBe(1);
    const slot = at(0.1);
    expect(slot).not.toBe(1);
    expect(slot).toBeGreaterThanOrEqual(0);
  });

  it("with a CPU weight of 0 a CPU-only prefix is worth nothing: a GPU-less slot under load loses", () => {
    const f = fleet({ routing: { tierWeights: { cpu: 0, storage: 0 } } });
    f.hold(body, 1, Number.POSITIVE_INFINITY, TIER_CPU);
    f.load.scraped(1, { running: 1, waiting: 0, kvUsage: 0.1 }, 1);
    f.publish();
    expect(f.route(body).slot).not.toBe(1);
  });
});
