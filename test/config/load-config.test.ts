import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  ConfigError,
  loadConfigFile,
  parseConfig,
  parseConfigYaml,
} from "../../control-plane/src/config/load-config.ts";

const minimal = {
  pools: [{ name: "p", models: ["m"], endpoints: [{ address: "127.0.0.1:8000", ranks: [0, 1] }] }],
};

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("configuration", () => {
  it("accepts the shipped complete example", () => {
    const cfg = loadConfigFile(
      new URL("../../control-plane/config.example.yaml", import.meta.url).pathname,
      {},
    );
    expect(cfg.pools.map((p) => p.name)).toEqual(["qwen3", "llama-disagg"]);
    expect(cfg.pools[0]?.endpoints[1]?.ranks).toBe("auto");
    expect(cfg.routing.defaultPool).toBe("qwen3");
  });

  it("fills defaults for a minimal file", () => {
    const cfg = parseConfig(minimal, "t", {});
    expect(cfg.listen).toBe("0.0.0.0:9090");
    expect(cfg.routing.chunkSize).toBe(128);
    expect(cfg.routing.rankHeaderPolicy.mode).toBe("ignore");
    expect(cfg.routing.failMode).toBe("open");
    expect(cfg.cache).toEqual({
      buckets: 65536,
      ways: 60,
      fullKeep: "newest",
      speculativeTtlMs: 2000,
      maxBlocksPerSlot: 1048576,
    });
    expect(cfg.pools[0]?.engine).toBe("vllm");
    expect(cfg.pools[0]?.dpMode).toBe("internal");
  });

  it("names the path of every bad field", () => {
    const problems = problemsOf(() =>
      parseConfig(
        {
          pools: [{ name: "Bad_Name", models: [], endpoints: [{ address: "nope", ranks: [-1] }] }],
          cache: { buckets: 1000 },
          routing: { rankHeaderPolicy: { mode: "sometimes" } },
        },
        "t",
        {},
      ),
    );
    const text = problems.join("\n");
    expect(text).toContain("pools[0].name:");
    expect(text).toContain("pools[0].models:");
    expect(text).toContain("pools[0].endpoints[0].address:");
    expect(text).toContain("pools[0].endpoints[0].ranks[0]:");
    expect(text).toContain("cache.buckets: must be a power of two");
    expect(text).toContain("routing.rankHeaderPolicy.mode:");
  });

  it("routing.maxBodyBytes stops at the filter's 64 MiB (the endpoint picker's embedded filter takes it)", () => {
    const at = (maxBodyBytes: number) => ({ ...minimal, routing: { maxBodyBytes } });
    expect(parseConfig(at(64 * 1024 * 1024), "t", {}).routing.maxBodyBytes).toBe(64 * 1024 * 1024);
    expect(problemsOf(() => parseConfig(at(64 * 1024 * 1024 + 1), "t", {})).join("\n")).toContain(
      "routing.maxBodyBytes:",
    );
  });

  it("refuses trusted CIDRs the filter could never match, and takes every form it can", () => {
    const bad = [
      "10.0.0.0/33",
      "10.0.0.0",
      "10.0.0/8",
      "010.0.0.0/8",
      "::/129",
      "fe80::1%eth0/64",
      "10.0.0.0/ 8",
      "x/8",
    ];
    const good = ["10.0.0.0/8", "10.0.4.0/23", "2001:db8::/50", "::ffff:172.16.0.0/108", "0.0.0.0/0"];
    const problems = problemsOf(() =>
      parseConfig(
        { ...minimal, routing: { rankHeaderPolicy: { mode: "honor", trustedCidrs: [...bad, ...good] } } },
        "t",
        {},
      ),
    );
    expect(problems.map((p) => p.slice(0, p.indexOf(":")))).toEqual(
      bad.map((_, i) => `routing.rankHeaderPolicy.trustedCidrs[${i}]`),
    );
  });

  it("rejects unknown fields instead of ignoring a typo", () => {
    const problems = problemsOf(() => parseConfig({ ...minimal, routing: { chunksize: 64 } }, "t", {}));
    expect(problems).toEqual(["routing: unknown field(s) chunksize"]);
  });

  it("checks cross-field rules: duplicate models, unknown default pool, DP-mode shapes", () => {
    const problems = problemsOf(() =>
      parseConfig(
        {
          pools: [
            {
              name: "a",
              models: ["m"],
              dpMode: "external",
              endpoints: [{ address: "127.0.0.1:1", ranks: [0, 1] }],
            },
            {
              name: "b",
              models: ["m"],
              dpMode: "hybrid",
              endpoints: [{ address: "127.0.0.1:2", ranks: [2, 3] }],
            },
            { name: "c", models: ["x"], engine: "dynamo", endpoints: [{ address: "127.0.0.1:3" }] },
            {
              name: "d",
              models: ["y"],
              dpMode: "hybrid",
              endpoints: [{ address: "127.0.0.1:4", ranks: "auto" }],
            },
          ],
          routing: { defaultPool: "zzz" },
        },
        "t",
        {},
      ),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        "pools[0].endpoints[0].ranks: an external-LB endpoint serves exactly one rank",
        "pools[1].endpoints[0].startRank: hybrid LB needs startRank (vLLM --data-parallel-start-rank)",
        "pools[2].endpoints[0].workerId: dynamo pools need a workerId per endpoint",
        "pools[3].endpoints[0].startRank: hybrid LB needs startRank (vLLM --data-parallel-start-rank)",
        "pools[1].models[0]: model m is already served by pool a",
        "routing.defaultPool: no pool named zzz",
      ]),
    );
  });

  it("takes secrets and the listen address from the environment", () => {
    const cfg = parseConfig(minimal, "t", {
      KVROUTE_AUTH_TOKEN: "0123456789abcdef-secret",
      KVROUTE_LISTEN: "127.0.0.1:7000",
    });
    expect(cfg.authToken).toBe("0123456789abcdef-secret");
    expect(cfg.listen).toBe("127.0.0.1:7000");
    expect(problemsOf(() => parseConfig(minimal, "t", { KVROUTE_AUTH_TOKEN: "short" }))).toEqual([
      "authToken: use at least 16 characters",
    ]);
  });

  it("reports YAML syntax errors with a line and duplicate keys", () => {
    expect(problemsOf(() => parseConfigYaml("pools:\n  - name: a\n    name: b\n", "f.yaml", {}))[0]).toMatch(
      /^line 3:/,
    );
    expect(problemsOf(() => parseConfigYaml("- just\n- a list\n", "f.yaml", {}))).toEqual([
      "(top level): expected a mapping of configuration fields",
    ]);
  });

  it("reports an unreadable file by its path", () => {
    const dir = mkdtempSync(join(tmpdir(), "kvroute-cfg-"));
    const err = (() => {
      try {
        loadConfigFile(join(dir, "missing.yaml"), {});
      } catch (e) {
        return e as ConfigError;
      }
    })();
    expect(err?.message).toContain("missing.yaml");
    writeFileSync(join(dir, "ok.yaml"), "pools: [{name: p, models: [m]}]\n");
    expect(loadConfigFile(join(dir, "ok.yaml"), {}).pools[0]?.endpoints).toEqual([]);
  });
});
