// LoRA requests in flight on the gateway board (docs/wire-format.md §4.5 flight sections,
// docs/configuration.md "LoRA adapters"): each VM publishes its requests in flight per (slot,
// adapter), from its decision to the request's end, and every VM of the gateway prices an
// adapter's place from them as well as from the engines' lists — a place one thread just filled is
// full for the others before any scrape shows it. Through the shipped module, two worker threads.
import { afterEach, describe, expect, it } from "vitest";
import { encodeLoadImage } from "../../control-plane/src/publish/images.ts";
import { chat, ShippedFilter } from "../filter-core/shipped-filter.ts";
import { boardFlights, readBoard } from "./board.ts";

let f: ShippedFilter;
afterEach(() => f?.close());

/** a0…a5: with 4 slots, a1 and a5 both have slot 1 first in their home order (id mod 4). */
const ADAPTERS = ["a0", "a1", "a2", "a3", "a4", "a5"];

/** A scrape: every slot reports max_loras and runs the adapters `running` names for it. */
function lora(maxLoras: number, running: Record<number, string[]> = {}): void {
  for (const s of f.slots.all())
    f.load.scraped(
      s.id,
      { running: 0, waiting: 0, kvUsage: 0, lora: { maxLoras, running: running[s.id] ?? [], waiting: [] } },
      0,
    );
  const image = encodeLoadImage(
    f.slots.all(),
    (id) => f.load.get(id),
    (_pool, name) => ADAPTERS.indexOf(name),
  );
  f.host.core.sharedData.set("kvroute", "kvr.load", image, 0);
  f.tick();
}

function start(maxLoras: number): void {
  f = new ShippedFilter({
    threads: 2,
    pools: [
      {
        name: "qwen",
        models: ["qwen3"],
        adapters: ADAPTERS,
        endpoints: [{ address: "10.0.0.1:8000", ranks: [0, 1, 2, 3] }],
      },
    ],
  });
  lora(maxLoras);
}

const ask = (adapter: string, n: number, thread: number) =>
  f.route(chat(`system of ${adapter}`, `question ${n}`, adapter), { thread });

describe("LoRA requests in flight on the board", () => {
  it("a VM's request is on the board from its decision to its end, per slot and adapter", () => {
    start(2);
    const a = ask("a1", 1, 0);
    const b = ask("a1", 2, 0);
    expect(a.slot).toBe(1);
    expect(b.slot).toBe(1);
    expect(boardFlights(f.host)).toEqual(new Map([["1:1", 2]]));
    // The board's reader checks that nothing follows the flight sections.
    expect(readBoard(f.host)?.flightSections).toHaveLength(1);
    f.finish(a);
    f.tick();
    expect(boardFlights(f.host)).toEqual(new Map([["1:1", 1]]));
    f.firstByte(b);
    f.finish(b);
    f.tick();
    expect(boardFlights(f.host)).toEqual(new Map());
    expect(readBoard(f.host)?.flightSections).toHaveLength(0);
  });

  it("another VM's request in flight takes its slot's place before the engine lists it", () => {
    start(1);
    // Thread 0 sends a1 to its first slot, 1; no scrape shows it yet.
    const held = ask("a1", 1, 0);
    expect(held.slot).toBe(1);
    // a5's first slot is 1 too: full for thread 1 (max_loras 1), so it goes to its second, 2.
    const other = ask("a5", 1, 1);
    expect(other.slot).toBe(2);
    // a1 itself still goes where it is in flight.
    expect(ask("a1", 2, 1).slot).toBe(1);
    f.finish(held);
    f.finish(other);
  });

  it("a place is free again once the request ended and the engine's list no longer names its adapter", () => {
    start(1);
    const held = ask("a1", 1, 0);
    expect(held.slot).toBe(1);
    f.finish(held);
    // The engine's list still shows a1 running at slot 1 (a scrape from before its end): full.
    lora(1, { 1: ["a1"] });
    const elsewhere = ask("a5", 1, 1);
    expect(elsewhere.slot).toBe(2);
    f.finish(elsewhere);
    // Both say it is gone: a5 goes to its first slot.
    lora(1);
    expect(ask("a5", 2, 1).slot).toBe(1);
  });

  it("flight sections that do not fit, or name slots and adapters that do not exist, are ignored without a trap", () => {
    start(1);
    const held = ask("a1", 1, 0);
    const store = f.host.core.sharedData;
    const board = () => Buffer.from(store.get("kvroute", "kvr.gwb", true)?.value ?? new Uint8Array(0));
    const put = (b: Buffer) => {
      const cur = store.get("kvroute", "kvr.gwb", false);
      expect(store.set("kvroute", "kvr.gwb", new Uint8Array(b), cur?.cas ?? 0)).toBe(0);
    };
    // A flight count past the sections there are: the flights are ignored, not the board.
    const more = board();
    more.writeUInt16LE(more.readUInt16LE(36) + 3, 36);
    put(more);
    const other = ask("a5", 1, 1);
    expect(other.forwarded).toBeDefined();
    expect(other.slot).toBe(1); // a1's flight went unseen
    f.finish(other);
    // The next write drops what did not fit and publishes the writer's own flights again.
    f.tick();
    expect(boardFlights(f.host)).toEqual(new Map([["1:1", 1]]));
    // A section naming slot 60000 and adapter 65535 (neither exists) changes no cost.
    const odd = board();
    const section = Buffer.alloc(24);
    section.writeUInt16LE(900, 0); // a thread slot no VM holds
    section.writeUInt16LE(1, 2);
    section.writeBigUInt64LE(BigInt(f.clock.now), 8);
    section.writeUInt16LE(60000, 16);
    section.writeUInt16LE(0xffff, 18);
    section.writeUInt32LE(7, 20);
    const withOdd = Buffer.concat([odd, section]);
    withOdd.writeUInt16LE(odd.readUInt16LE(36) + 1, 36);
    put(withOdd);
    const third = ask("a5", 2, 1);
    expect(third.slot).toBe(2);
    f.finish(third);
    f.finish(held);
  });
});
