// Which fields a reload applies and which wait for a restart, field class by field class.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { diffPaths, liveChange } from "../../control-plane/src/config/live-change.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { ReloadStats } from "../../control-plane/src/config/reload-stats.ts";
import { reloadConfig } from "../../control-plane/src/config-reload.ts";

// biome-ignore lint/suspicious/noExplicitAny: edits of raw YAML-shaped objects, validated by parseConfig
type Raw = Record<string, any>;

const base = {
  pools: [
    { name: "a", models: ["m"], endpoints: [{ address: "10.0.0.1:8000", ranks: [0, 1] }] },
    { name: "b", models: ["n"], endpoints: [{ address: "10.0.0.2:8000", ranks: [0] }] },
  ],
};
const cfg = (over: (raw: Raw) => void = () => {}, logLevel = "info") => {
  const raw = structuredClone(base) as Raw;
  raw.logLevel = logLevel;
  over(raw);
  return parseConfig(raw, "test", {});
};

describe("liveChange", () => {
  it.each([
    [
      "weights",
      (r: Raw) => (r.routing = { overlapWeight: 2, temperature: 0.5 }),
      ["routing.overlapWeight", "routing.temperature"],
    ],
    [
      "trust",
      (r: Raw) => (r.routing = { rankHeaderPolicy: { mode: "honor", trustedCidrs: ["10.0.0.0/8"] } }),
      ["routing.rankHeaderPolicy.mode", "routing.rankHeaderPolicy.trustedCidrs"],
    ],
    [
      "a pool's shedding",
      (r: Raw) => (r.pools[1].shedding = { enabled: true }),
      ["pools[1].shedding.enabled"],
    ],
    ["a pool's policy", (r: Raw) => (r.pools[0].policy = "least-load"), ["pools[0].policy"]],
    [
      "fail mode and default pool",
      (r: Raw) => (r.routing = { failMode: "closed", defaultPool: "b" }),
      ["routing.defaultPool", "routing.failMode"],
    ],
    ["log level", (r: Raw) => (r.logLevel = "debug"), ["logLevel"]],
    ["speculative TTL", (r: Raw) => (r.cache = { speculativeTtlMs: 500 }), ["cache.speculativeTtlMs"]],
  ])("applies %s live", (_what, edit, paths) => {
    const change = liveChange(cfg(), cfg(edit));
    expect(change.applied).toEqual(paths);
    expect(change.refused).toEqual([]);
    expect(change.running).toEqual(cfg(edit));
  });

  it.each([
    ["the listen address", (r: Raw) => (r.listen = "0.0.0.0:9999"), ["listen"]],
    ["the cache geometry", (r: Raw) => (r.cache = { buckets: 1024 }), ["cache.buckets"]],
    ["the chunk size", (r: Raw) => (r.routing = { chunkSize: 64 }), ["routing.chunkSize"]],
    [
      "a pool's endpoints",
      (r: Raw) => r.pools[0].endpoints.push({ address: "10.0.0.3:8000" }),
      ["pools[0].endpoints"],
    ],
    ["a new pool", (r: Raw) => r.pools.push({ name: "c", models: ["o"] }), ["pools"]],
    ["the endpoint picker", (r: Raw) => (r.epp = {}), ["epp"]],
  ])("refuses %s and keeps its running value", (_what, edit, paths) => {
    const change = liveChange(cfg(), cfg(edit));
    expect(change.applied).toEqual([]);
    expect(change.refused).toEqual(paths);
    expect(change.running).toEqual(cfg());
  });

  it("splits a mixed change: the live part runs, the rest keeps its old value", () => {
    const next = cfg((r) => {
      r.routing = { decodeWeight: 3, chunkSize: 256 };
      r.pools[0].policy = "random";
      r.pools[0].blockSize = 32;
    });
    const change = liveChange(cfg(), next);
    expect(change.applied).toEqual(["pools[0].policy", "routing.decodeWeight"]);
    expect(change.refused).toEqual(["pools[0].blockSize", "routing.chunkSize"]);
    expect(change.running.routing.chunkSize).toBe(128);
    expect(change.running.routing.decodeWeight).toBe(3);
  });

  it("applies a static pool's endpoints when asked, keeping the unchanged endpoint objects", () => {
    const current = cfg();
    const next = cfg((r) => r.pools[0].endpoints.push({ address: "10.0.0.3:8000", ranks: [0] }));
    const change = liveChange(current, next, { staticEndpoints: true });
    expect(change.applied).toEqual(["pools[0].endpoints"]);
    expect(change.refused).toEqual([]);
    const [kept, added] = change.running.pools[0]?.endpoints ?? [];
    expect(kept).toBe(current.pools[0]?.endpoints[0]); // the fleet tells unchanged endpoints by identity
    expect(added?.address).toBe("10.0.0.3:8000");
    // A pool that moves to a discovery is another matter: restart.
    const discovered = cfg((r) => {
      r.pools[1].endpoints = [];
      r.pools[1].discovery = { inferencePool: { namespace: "llm", name: "pool" } };
    });
    expect(liveChange(current, discovered, { staticEndpoints: true }).refused).toEqual([
      "pools[1].discovery",
      "pools[1].endpoints",
    ]);
  });

  it("removing an optional live field applies too (defaultPool unset)", () => {
    const change = liveChange(
      cfg((r) => (r.routing = { defaultPool: "a" })),
      cfg(),
    );
    expect(change.applied).toEqual(["routing.defaultPool"]);
    expect(change.running.routing.defaultPool).toBeUndefined();
  });

  it("diffPaths names arrays of values whole and arrays of objects by element", () => {
    expect(diffPaths({ a: [1, 2] }, { a: [1, 3] })).toEqual(["a"]);
    expect(diffPaths({ a: [{ x: 1 }, { x: 2 }] }, { a: [{ x: 1 }, { x: 3 }] })).toEqual(["a[1].x"]);
    expect(diffPaths({ a: 1 }, { a: 1, b: 2 })).toEqual(["b"]);
    expect(diffPaths({ a: [1] }, { a: [1] })).toEqual([]);
  });
});

describe("reloadConfig", () => {
  // A reload sets the logger's level from the file: lines go nowhere rather than to the test output.
  const silent = pino({ level: "silent" }, { write() {} });
  const parts = (current: ReturnType<typeof cfg>) => ({
    live: { cfg: current },
    published: 0,
    publishCfg() {
      this.published++;
    },
    logger: silent,
    stats: new ReloadStats(),
  });

  it("publishes kvr.cfg once for a live change, not for a log level alone", () => {
    const p = parts(cfg());
    expect(reloadConfig(p, () => cfg((r) => (r.routing = { temperature: 1 })))).toBe("applied");
    expect(p.published).toBe(1);
    expect(reloadConfig(p, () => cfg((r) => (r.routing = { temperature: 1 }), "debug"))).toBe("applied");
    expect(p.published).toBe(1);
    expect(p.live.cfg.logLevel).toBe("debug");
  });

  it("keeps everything when the live fields clash with a restart-only one that still runs", () => {
    // The file moves the priority header away and gives its old name to sessions: valid as a
    // whole, but the running priorityHeader (restart-only) would then equal the sessionHeader.
    const p = parts(cfg((r) => (r.routing = { priorityHeader: "x-prio" })));
    const before = structuredClone(p.live.cfg);
    const result = reloadConfig(p, () =>
      cfg((r) => (r.routing = { priorityHeader: "x-other", sessionHeader: "x-prio" })),
    );
    expect(result).toBe("invalid");
    expect(p.live.cfg).toEqual(before);
    expect(p.published).toBe(0);
  });

  it("keeps everything when the file does not load", () => {
    const p = parts(cfg());
    expect(
      reloadConfig(p, () => {
        throw new Error("bad");
      }),
    ).toBe("invalid");
    expect(p.stats.counts.get("invalid")).toBe(1);
  });
});
