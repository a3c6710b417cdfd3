// Each gateway's share of a pool's slots (filter/core/route-decision.ts partIndex): from its place in
// kvr.gw, the roster of gateways that report, a gateway keeps near-equal choices to its own share,
// so two gateways that see each other's requests only through reports rarely pick one slot at the
// same moment. A real load difference still wins; no roster, a roster without the gateway, a
// roster of one or a configured seed leave the order as it was; a malformed roster is ignored.
import { describe, expect, it } from "vitest";
import { gatewayHash } from "../../control-plane/src/publish/images.ts";
import { chat, gatewaysClosedAfterEach, routeOnce as once, type ShippedFilter } from "./shipped-filter.ts";

const gateway = gatewaysClosedAfterEach();
const picks = (f: ShippedFilter, count = 24) => new Set(Array.from({ length: count }, (_, i) => once(f, i)));

/** The qwen pool's slots, in slot order (the order shares are cut from). */
const QWEN_SLOTS = [0, 1, 2, 3];

/** A gateway's place among `ids` as kvr.gw orders them (ascending id hash). */
const placeOf = (id: string, ids: string[]) =>
  [...ids].sort((a, b) => (gatewayHash(a) < gatewayHash(b) ? -1 : 1)).indexOf(id);

const sorted = (s: Set<number>) => [...s].sort((a, b) => a - b);

describe("gateway shares of a pool's slots", () => {
  it("two gateways in the roster keep to disjoint halves at equal load", () => {
    const ids = ["envoy-a", "envoy-b"];
    const shares = ids.map((id) => {
      const f = gateway(id);
      f.publishRoster(ids);
      const got = picks(f);
      const place = placeOf(id, ids);
      expect(sorted(got)).toEqual(QWEN_SLOTS.filter((_, k) => k % 2 === place));
      return got;
    });
    const [a, b] = shares as [Set<number>, Set<number>];
    expect([...a].some((s) => b.has(s))).toBe(false);
  });

  it("a real load difference wins over the share", () => {
    const ids = ["envoy-a", "envoy-b"];
    const f = gateway("envoy-a");
    const mine = QWEN_SLOTS.filter((_, k) => k % 2 === placeOf("envoy-a", ids));
    // 25 decoding sequences × 16 = 400 prefill-token equivalents: more than the share's 256 plus
    // the order's 128, so every pick leaves the share.
    for (const s of mine) f.load.scraped(s, { running: 25, waiting: 0, kvUsage: 0 }, 1);
    f.publish();
    f.publishRoster(ids);
    const got = picks(f, 12);
    expect([...got].some((s) => mine.includes(s))).toBe(false);
  });

  it("expects another gateway's share as busy as its own: its unanswered requests stay in its share", () => {
    const ids = ["envoy-a", "envoy-b"];
    const f = gateway("envoy-a");
    f.publishRoster(ids);
    const mine = QWEN_SLOTS.filter((_, k) => k % 2 === placeOf("envoy-a", ids));
    // ~1,500-token prompts, none answered: each costs its slot ~1,100 queued tokens, far more than
    // the share's 256 — a gateway that priced the other share at 256 alone would spill onto it from
    // the third request on, where the other gateway's own requests of the same moment wait unseen.
    const held = Array.from({ length: 6 }, (_, i) =>
      f.route(chat(`${i} ${"context ".repeat(750)}`, `question ${i}`)),
    );
    expect(held.map((r) => r.slot).filter((s) => !mine.includes(s))).toEqual([]);
    expect(new Set(held.map((r) => r.slot)).size).toBe(mine.length);
    for (const r of held) f.finish(r);
  });

  it("counts what the other share's metrics already price toward the expectation", () => {
    const ids = ["envoy-a", "envoy-b"];
    const f = gateway("envoy-a");
    f.publishRoster(ids);
    const mine = QWEN_SLOTS.filter((_, k) => k % 2 === placeOf("envoy-a", ids));
    const long = (i: number) => chat(`${i} ${"context ".repeat(750)}`, `question ${i}`);
    const held = [f.route(long(0)), f.route(long(1))];
    expect(held.map((r) => r.slot).sort()).toEqual(mine);
    // Its slots: its own request (~1,100 tokens) and 40 decoding sequences (640). The others': three
    // waiting requests of the other gateway, priced 3 × 384 — already past the ~1,100 tokens the
    // mirror expects, so nothing is added and the next request goes there (1,408 against 1,765);
    // adding the expectation on top of what is shown would keep it home.
    for (const kv of [0.01, 0.02]) {
      for (const s of QWEN_SLOTS)
        f.load.scraped(
          s,
          mine.includes(s)
            ? { running: 40, waiting: 1, kvUsage: kv }
            : { running: 0, waiting: 3, kvUsage: kv },
          1,
        );
      f.publish();
      f.tick();
    }
    const next = f.route(long(2));
    expect(mine).not.toContain(next.slot);
    for (const r of [...held, next]) f.finish(r);
  });

  it("a real load difference within the share still wins over the expectation", () => {
    const ids = ["envoy-a", "envoy-b"];
    const f = gateway("envoy-a");
    f.publishRoster(ids);
    const mine = QWEN_SLOTS.filter((_, k) => k % 2 === placeOf("envoy-a", ids));
    // Its share decodes 40 sequences each (640 tokens) with nothing of its own queued: the other
    // share, idle by its metrics and expected idle, takes the requests.
    for (const s of mine) f.load.scraped(s, { running: 40, waiting: 0, kvUsage: 0 }, 1);
    f.publish();
    f.publishRoster(ids);
    expect([...picks(f, 12)].some((s) => mine.includes(s))).toBe(false);
  });

  it("with more gateways than slots, gateway i's share is slot i mod n", () => {
    const ids = Array.from({ length: 6 }, (_, i) => `edge-${i}`);
    for (const id of ["edge-1", "edge-4", "edge-5"]) {
      const f = gateway(id);
      f.publishRoster(ids);
      expect(sorted(picks(f, 8))).toEqual([QWEN_SLOTS[placeOf(id, ids) % QWEN_SLOTS.length]]);
    }
  });

  it("no share without a roster, outside the roster, or in a roster of one", () => {
    const none = gateway("solo");
    const listedElsewhere = gateway("stranger");
    listedElsewhere.publishRoster(["envoy-a", "envoy-b"]);
    const alone = gateway("lonely");
    alone.publishRoster(["lonely"]);
    for (const f of [none, listedElsewhere, alone]) expect(picks(f, 32).size).toBeGreaterThan(2);
  });

  it("is off under a configured seed, roster or not", () => {
    const ids = ["seeded-a", "seeded-b"];
    const [a, b] = ids.map((id) => {
      const f = gateway(id, { plugin: { seed: 7 } });
      f.publishRoster(ids);
      return f;
    }) as [ShippedFilter, ShippedFilter];
    const run = (f: ShippedFilter) => Array.from({ length: 8 }, (_, i) => once(f, i));
    expect(run(a)).toEqual(run(b));
  });

  it("ignores a malformed roster and keeps the last good one", () => {
    const ids = ["envoy-a", "envoy-b"];
    const f = gateway("envoy-b");
    f.publishRoster(ids);
    const mine = QWEN_SLOTS.filter((_, k) => k % 2 === placeOf("envoy-b", ids));
    const good = new Uint8Array([0x4b, 0x56, 0x52, 0x47, 1, 0, 2, 0]);
    const bad = [
      new Uint8Array([1, 2, 3]),
      good, // two hashes announced, none there
      new Uint8Array([...good.slice(0, 6), 1, 0, 5, 0, 0, 0, 0, 0, 0, 0, 9]), // trailing byte
      new Uint8Array([0x4b, 0x56, 0x52, 0x47, 9, 0, 0, 0]), // unknown protocol
      new Uint8Array([...good, ...new Uint8Array(8).fill(2), ...new Uint8Array(8).fill(1)]), // not ascending
    ];
    for (const b of bad) {
      f.publishRoster(b);
      expect(sorted(picks(f, 12))).toEqual(mine);
    }
  });
});
