// The control plane's fleet session table: learned from reports (only for slots it has), bounded
// per key like the filter's, forgotten after its TTL, published as kvr.sc.<j> in the layout the
// filter reads (a session entry of the speculative layout, never expiring at the gateway).
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import { SESSION_KEYS, SESSION_WAYS, SessionTable } from "../../control-plane/src/model/session-table.ts";
import { LoadModel } from "../../control-plane/src/model/slot-load.ts";
import { SlotTable } from "../../control-plane/src/model/slot-table.ts";
import { applyReport } from "../../control-plane/src/reports/apply-report.ts";

/** A hash that lands in key `key`, the `i`th of them. */
const inKey = (key: number, i: number) => (BigInt(i + 1) << 10n) | BigInt(key);

describe("fleet session table", () => {
  it("keeps the newest SESSION_WAYS sessions of a key and publishes them in the filter's layout", () => {
    const t = new SessionTable(60_000);
    for (let i = 0; i < SESSION_WAYS + 3; i++) t.learn(inKey(5, i), i, 1000 + i, 61_000n + BigInt(i));
    expect(t.size).toBe(SESSION_WAYS);
    expect(t.slotOf(inKey(5, 0))).toBeUndefined();
    expect(t.slotOf(inKey(5, SESSION_WAYS + 2))).toBe(SESSION_WAYS + 2);
    // A session seen again moves to the newest place and keeps its one entry. Its gateway's
    // expiry is published; one past this process's now + TTL (a clock ahead) is capped there.
    t.learn(inKey(5, 3), 40, 2000, 10n ** 15n);
    expect(t.slotOf(inKey(5, 3))).toBe(40);
    expect(t.size).toBe(SESSION_WAYS);
    const images = t.takeDirtyImages();
    expect(images.map(([k]) => k)).toEqual(["kvr.sc.5"]);
    const v = Buffer.from((images[0] as [string, Uint8Array])[1]);
    expect(v.length).toBe(4 + SESSION_WAYS * 24);
    expect(v.readUInt8(0)).toBe(SESSION_WAYS);
    const last = 4 + (SESSION_WAYS - 1) * 24;
    expect(v.readBigUInt64LE(last)).toBe(inKey(5, 3));
    expect(v.readBigUInt64LE(last + 8)).toBe(62_000n);
    expect(v.readBigUInt64LE(4 + 8)).toBe(61_004n); // the oldest kept: i = 4
    expect(v.readUInt32LE(last + 16)).toBe(0);
    expect(v.readUInt16LE(last + 20)).toBe(40);
    expect(t.takeDirtyImages()).toEqual([]);
  });

  it("republishes a kept session only once its published expiry lags by an eighth of the TTL", () => {
    const t = new SessionTable(80_000);
    t.learn(7n, 1, 0, 80_000n);
    expect(t.takeDirtyImages().length).toBe(1);
    // The same slot, reported again and again: nothing to resend yet.
    t.learn(7n, 1, 5000, 85_000n);
    t.learn(7n, 1, 9999, 89_999n);
    expect(t.takeDirtyImages()).toEqual([]);
    t.learn(7n, 1, 10_000, 90_000n);
    const [[, v]] = t.takeDirtyImages() as [[string, Uint8Array]];
    expect(Buffer.from(v).readBigUInt64LE(12)).toBe(90_000n);
    // A new slot goes out at once, and the table keeps the session until its last report's TTL.
    t.learn(7n, 2, 10_001, 90_001n);
    expect(t.takeDirtyImages().length).toBe(1);
    t.learn(7n, 2, 12_000, 92_000n);
    expect(t.takeDirtyImages()).toEqual([]);
    t.expire(91_000);
    expect(t.slotOf(7n)).toBe(2);
  });

  it("forgets sessions after the TTL and republishes their key", () => {
    const t = new SessionTable(1000);
    t.learn(inKey(1, 0), 2, 0, 1000n);
    t.learn(inKey(1, 1), 3, 500, 1500n);
    t.takeDirtyImages();
    t.expire(1200);
    expect(t.slotOf(inKey(1, 0))).toBeUndefined();
    expect(t.slotOf(inKey(1, 1))).toBe(3);
    const [[key, value]] = t.takeDirtyImages() as [[string, Uint8Array]];
    expect(key).toBe("kvr.sc.1");
    expect(value[0]).toBe(1);
    t.expire(1600);
    expect(t.size).toBe(0);
    expect(Buffer.from((t.takeDirtyImages()[0] as [string, Uint8Array])[1])).toEqual(
      Buffer.from([0, 0, 0, 0]),
    );
  });

  it("publishes every key at the start of an epoch, so a gateway drops the previous epoch's sessions", () => {
    const t = new SessionTable(1000);
    t.learn(inKey(7, 0), 1, 0, 1000n);
    const all = t.allImages();
    expect(all.length).toBe(SESSION_KEYS);
    expect(all.filter(([, v]) => v[0] !== 0).map(([k]) => k)).toEqual(["kvr.sc.7"]);
    expect(t.takeDirtyImages()).toEqual([]);
  });

  it("learns from reports only the slots it has", () => {
    const cfg = parseConfig(
      { pools: [{ name: "p", models: ["m"], endpoints: [{ address: "10.0.0.1:8000", ranks: [0, 1] }] }] },
      "t",
      {},
    );
    const slots = new SlotTable(16);
    const pool = cfg.pools[0] as (typeof cfg.pools)[number];
    slots.setEndpointRanks(pool, pool.endpoints[0] as (typeof pool.endpoints)[number], [0, 1]);
    const sessions = new SessionTable(60_000);
    const targets = {
      load: new LoadModel(3),
      slots,
      index: new PrefixIndex({ buckets: 64, ways: 4, maxSlots: 16 }),
      sessions,
    };
    applyReport(
      targets,
      {
        gateway: "g",
        inflight: new Map(),
        finished: [],
        speculative: [],
        sessions: [
          { slot: 1, outcome: 0, hash: 11n, expiresMs: 60_000n },
          { slot: 9, outcome: 0, hash: 12n, expiresMs: 60_000n }, // no such slot
          { slot: 0xffff, outcome: 2, hash: 13n, expiresMs: 60_000n },
        ],
      },
      0,
    );
    expect(sessions.slotOf(11n)).toBe(1);
    expect(sessions.slotOf(12n)).toBeUndefined();
    expect(sessions.slotOf(13n)).toBeUndefined();
  });
});
