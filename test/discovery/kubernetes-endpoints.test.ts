// From EndpointSlices and pods to a pool's endpoint list: readiness, selector, ports per rank,
// annotations, Dynamo worker ids. Pure; no API server.
import type { V1EndpointSlice, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import type { PoolConfig } from "../../control-plane/src/config/schema.ts";
import { dynamoWorkerId } from "../../control-plane/src/discovery/dynamo-worker-id.ts";
import { clusterEndpoints, parseRanks } from "../../control-plane/src/discovery/kubernetes-endpoints.ts";
import { endpointSlice, pod } from "./fake-api-server.ts";

function poolWith(extra: Record<string, unknown>, k8s: Record<string, unknown>): PoolConfig {
  const cfg = parseConfig(
    {
      pools: [
        {
          name: "p",
          models: ["m"],
          ...extra,
          discovery: {
            kubernetes: {
              namespace: "llm",
              service: "workers",
              selector: { matchLabels: { app: "w" } },
              ...k8s,
            },
          },
        },
      ],
    },
    "test",
    {},
  );
  return cfg.pools[0] as PoolConfig;
}

function run(pool: PoolConfig, slices: unknown[], pods: unknown[]) {
  const byName = new Map((pods as V1Pod[]).map((p) => [p.metadata?.name as string, p]));
  return clusterEndpoints(pool, pool.discovery?.kubernetes as never, slices as V1EndpointSlice[], byName);
}

const W = { app: "w" };

describe("clusterEndpoints", () => {
  it("lists ready, selected pods on one port with ranks from metrics", () => {
    const pool = poolWith({}, { port: 8000, kvEvents: { endpoint: "tcp://*:5557", topic: "kv" } });
    const out = run(
      pool,
      [
        endpointSlice(
          "s1",
          "workers",
          [
            { pod: "a", ip: "10.0.0.2", ready: true },
            { pod: "b", ip: "10.0.0.3", ready: false },
            { pod: "c", ip: "10.0.0.4", ready: undefined },
            { pod: "other", ip: "10.0.0.5", ready: true },
          ],
          [8000],
        ),
      ],
      [
        pod("a", "10.0.0.2", W),
        pod("b", "10.0.0.3", W),
        pod("c", "10.0.0.4", W),
        pod("other", "10.0.0.5", { app: "x" }),
      ],
    );
    expect(out.problems).toEqual([]);
    const kvEvents = { endpoint: "tcp://*:5557", topic: "kv" };
    expect(out.endpoints).toEqual([
      {
        address: "10.0.0.2:8000",
        ranks: "auto",
        role: "aggregated",
        metricsUrl: "http://10.0.0.2:8000/metrics",
        kvEvents,
      },
      // ready unset means "unknown", which the API says to treat as ready
      {
        address: "10.0.0.4:8000",
        ranks: "auto",
        role: "aggregated",
        metricsUrl: "http://10.0.0.4:8000/metrics",
        kvEvents,
      },
    ]);
  });

  it("skips pods it has not seen (pod watch behind the slice watch) and FQDN slices", () => {
    const pool = poolWith({}, { port: 8000 });
    const fqdn = {
      ...endpointSlice("f", "workers", [{ pod: "a", ip: "x.example", ready: true }], [8000]),
      addressType: "FQDN",
    };
    const out = run(
      pool,
      [fqdn, endpointSlice("s", "workers", [{ pod: "ghost", ip: "10.0.0.9", ready: true }], [8000])],
      [pod("a", "10.0.0.2", W)],
    );
    expect(out.endpoints).toEqual([]);
  });

  it("external LB: one endpoint per target port, rank = start-rank + port index", () => {
    const pool = poolWith({ dpMode: "external" }, { targetPorts: [8000, 8001, 8002], metricsPath: "/m" });
    const out = run(
      pool,
      [
        endpointSlice(
          "s",
          "workers",
          [
            { pod: "a", ip: "10.0.0.2", ready: true },
            { pod: "b", ip: "10.0.0.3", ready: true },
          ],
          [8000, 8001, 8002],
        ),
      ],
      [pod("a", "10.0.0.2", W), pod("b", "10.0.0.3", W, { "kvroute.io/start-rank": "3" })],
    );
    expect(out.endpoints.map((e) => [e.address, e.ranks, e.metricsUrl])).toEqual([
      ["10.0.0.2:8000", [0], "http://10.0.0.2:8000/m"],
      ["10.0.0.2:8001", [1], "http://10.0.0.2:8001/m"],
      ["10.0.0.2:8002", [2], "http://10.0.0.2:8002/m"],
      ["10.0.0.3:8000", [3], "http://10.0.0.3:8000/m"],
      ["10.0.0.3:8001", [4], "http://10.0.0.3:8001/m"],
      ["10.0.0.3:8002", [5], "http://10.0.0.3:8002/m"],
    ]);
  });

  it("reads explicit ranks, start rank and role from the pod; bad values skip the pod with a reason", () => {
    const pool = poolWith({ dpMode: "hybrid" }, { port: 8000 });
    const pods = [
      pod(
        "a",
        "10.0.0.2",
        { ...W, "kvroute.io/role": "prefill" },
        { "kvroute.io/ranks": "4-7", "kvroute.io/start-rank": "4" },
      ),
      pod("b", "10.0.0.3", { ...W, "kvroute.io/role": "teacher" }),
      pod("c", "10.0.0.4", W, { "kvroute.io/start-rank": "+1" }),
      pod("d", "10.0.0.5", W, { "kvroute.io/ranks": "1,1" }),
      // Hybrid LB without the start rank: its headers would be guessed from the ranks seen.
      pod("e", "10.0.0.6", W, { "kvroute.io/ranks": "4-7" }),
    ];
    const slice = endpointSlice(
      "s",
      "workers",
      pods.map((p, i) => ({ pod: p.metadata.name, ip: `10.0.0.${i + 2}`, ready: true })),
      [8000],
    );
    const out = run(pool, [slice], pods);
    expect(out.endpoints).toEqual([
      {
        address: "10.0.0.2:8000",
        ranks: [4, 5, 6, 7],
        startRank: 4,
        role: "prefill",
        metricsUrl: "http://10.0.0.2:8000/metrics",
      },
    ]);
    expect(out.problems).toHaveLength(4);
    expect(out.problems.join("\n")).toMatch(/pod e: hybrid LB needs annotation kvroute.io\/start-rank/);
    expect(out.problems.join("\n")).toMatch(/pod b: label kvroute.io\/role=teacher/);
    expect(out.problems.join("\n")).toMatch(/pod c: annotation kvroute.io\/start-rank=\+1/);
    expect(out.problems.join("\n")).toMatch(/pod d: annotation kvroute.io\/ranks=1,1/);
  });

  it("dynamo pools get the worker instance id Dynamo derives from the pod name", () => {
    const pool = poolWith({ engine: "dynamo" }, { port: 9000 });
    const out = run(
      pool,
      [endpointSlice("s", "workers", [{ pod: "worker-0", ip: "10.0.0.2", ready: true }], [9000])],
      [pod("worker-0", "10.0.0.2", W)],
    );
    expect(out.endpoints[0]?.workerId).toBe(dynamoWorkerId("worker-0").toString());
    expect(out.endpoints[0]?.workerId).toBe("1186445869714687");
  });

  it("writes IPv6 addresses in brackets and lists a pod once when two slices carry it", () => {
    const pool = poolWith({}, { port: 8000 });
    const v6 = {
      ...endpointSlice("v6", "workers", [{ pod: "a", ip: "fd00::2", ready: true }], [8000]),
      addressType: "IPv6",
    };
    const out = run(
      pool,
      [v6, { ...v6, metadata: { ...v6.metadata, name: "v6-dup" } }],
      [pod("a", "fd00::2", W)],
    );
    expect(out.endpoints.map((e) => e.address)).toEqual(["[fd00::2]:8000"]);
  });
});

describe("parseRanks", () => {
  it.each([
    ["0-3", [0, 1, 2, 3]],
    ["5", [5]],
    ["2,0,1", [0, 1, 2]],
    ["3-1", null],
    ["01", null],
    ["1,,2", null],
    [" 1", null],
    ["4096", null],
  ])("%s → %j", (text, want) => {
    expect(parseRanks(text)).toEqual(want);
  });
});
