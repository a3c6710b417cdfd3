// Each gateway's own order of near-equal slots (filter/core/route-decision.ts gatewaySeed): gateways
// that read the same load image must not all send their next request to the same slot, no gateway
// keeps a favourite past its next load image (an idle gateway past its next decision), a real load
// difference always wins over the order, and a configured seed (reproducible decisions) turns it off.
import { describe, expect, it } from "vitest";
import { chat, gatewaysClosedAfterEach, routeOnce as once, type ShippedFilter } from "./shipped-filter.ts";

const gateway = gatewaysClosedAfterEach();

const QWEN_SLOTS = [0, 1, 2, 3];

describe("gateway order of near-equal slots", () => {
  it("holds for one load image while the gateway is busy, and changes with the next image", () => {
    const f = gateway("gw-a");
    // One request stays unanswered: the gateway is busy (a burst is what the order is for).
    const held = f.route(chat("s", "a held question"));
    const first = once(f, 0);
    expect(QWEN_SLOTS).toContain(first);
    expect(first).not.toBe(held.slot);
    // Random tie-breaks would scatter these; the order sends them to one slot.
    for (let i = 1; i < 6; i++) expect(once(f, i)).toBe(first);
    const picks = new Set<number>();
    for (let i = 0; i < 12; i++) {
      f.publishLoad();
      f.tick();
      picks.add(once(f, 100 + i));
    }
    expect(picks.size).toBeGreaterThan(1);
    f.finish(held);
  });

  it("is new with every decision of an idle gateway: one request after another spreads", () => {
    const f = gateway("gw-idle");
    const picks = new Set(Array.from({ length: 12 }, (_, i) => once(f, i)));
    expect(picks.size).toBeGreaterThan(1);
  });

  it("differs between gateways on the same image", () => {
    const firsts = new Set<number>();
    for (let g = 0; g < 8; g++) firsts.add(once(gateway(`envoy-${g}`), 0));
    expect(firsts.size).toBeGreaterThan(1);
  });

  it("reorders only near ties: a difference of nine decoding sequences always wins, one does not", () => {
    const loaded = (f: ShippedFilter, running: number) => {
      for (const s of [0, 1, 3]) f.load.scraped(s, { running, waiting: 0, kvUsage: 0 }, 1);
      f.load.scraped(2, { running: 0, waiting: 0, kvUsage: 0 }, 1);
      f.publish();
      return f;
    };
    // 9 × 16 prefill-token equivalents = 144 > GATEWAY_SPREAD (128): slot 2 for every gateway.
    for (let g = 0; g < 8; g++) expect(once(loaded(gateway(`far-${g}`), 9), 0)).toBe(2);
    // 16 tokens apart: within the spread, so the gateways do not all agree on slot 2.
    const near = new Set<number>();
    for (let g = 0; g < 8; g++) near.add(once(loaded(gateway(`near-${g}`), 1), 0));
    expect(near.size).toBeGreaterThan(1);
  });

  it("is off under a configured seed: two gateways with one seed decide alike", () => {
    const a = gateway("seeded-a", { plugin: { seed: 7 } });
    const b = gateway("seeded-b", { plugin: { seed: 7 } });
    const picks = (f: ShippedFilter) => Array.from({ length: 8 }, (_, i) => once(f, i));
    expect(picks(a)).toEqual(picks(b));
  });
});
