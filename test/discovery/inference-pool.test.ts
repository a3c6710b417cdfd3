// A GAIE InferencePool as a pool's discovery source: the pure mapping (selector, 1–8 target
// ports, readiness from the pod's own Ready condition, ranks per port) with near misses, then
// the watcher against the fake API server — pods rolling, the InferencePool's selector and ports
// changing, the InferencePool going away and coming back.
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import type { Config, EndpointConfig, PoolConfig } from "../../control-plane/src/config/schema.ts";
import { discoveryFor } from "../../control-plane/src/discovery/discovery.ts";
import { inferencePoolEndpoints, readyPods } from "../../control-plane/src/discovery/inference-pool.ts";
import { InferencePoolDiscovery } from "../../control-plane/src/discovery/inference-pool-discovery.ts";
import { until } from "../until.ts";
import { FakeApiServer, pod } from "./fake-api-server.ts";

const silent = pino({ level: "silent" });
const LABELS = { app: "vllm-qwen" };

function config(extra: Record<string, unknown> = {}): Config {
  return parseConfig(
    {
      pools: [
        {
          name: "qwen",
          models: ["qwen3"],
          ...extra,
          discovery: { inferencePool: { namespace: "llm", name: "qwen-pool" } },
        },
      ],
      cache: { buckets: 64, ways: 4 },
    },
    "test",
    {},
  );
}

function inferencePool(ports: number[], labels: Record<string, string> = LABELS, name = "qwen-pool") {
  return {
    apiVersion: "inference.networking.k8s.io/v1",
    kind: "InferencePool",
    metadata: { name, namespace: "llm" },
    spec: {
      selector: { matchLabels: labels },
      targetPorts: ports.map((number) => ({ number })),
      endpointPickerRef: { kind: "Service", name: "kvroute-epp", port: { number: 9002 } },
    },
  };
}

function readyPod(
  name: string,
  ip: string,
  ready: boolean | null,
  labels: Record<string, string> = LABELS,
  annotations: Record<string, string> = {},
) {
  const p = pod(name, ip, labels, annotations) as ReturnType<typeof pod> & {
    status: Record<string, unknown>;
  };
  if (ready !== null) p.status.conditions = [{ type: "Ready", status: ready ? "True" : "False" }];
  return p;
}

const asPod = (o: unknown) => o as Parameters<typeof readyPods>[0] extends Iterable<infer P> ? P : never;

describe("an InferencePool's endpoints (pure)", () => {
  const pool = (extra: Record<string, unknown> = {}) => config(extra).pools[0] as PoolConfig;
  const src = (p: PoolConfig) =>
    p.discovery?.inferencePool as NonNullable<NonNullable<PoolConfig["discovery"]>["inferencePool"]>;
  const pods = (...list: unknown[]) =>
    new Map(list.map((p) => [(p as { metadata: { name: string } }).metadata.name, asPod(p)]));

  it("one target port: one endpoint per ready pod, ranks from /metrics", () => {
    const p = pool();
    const r = inferencePoolEndpoints(p, src(p), inferencePool([8000]), pods(readyPod("a", "10.0.0.1", true)));
    expect(r.endpoints).toEqual([
      {
        address: "10.0.0.1:8000",
        ranks: "auto",
        metricsUrl: "http://10.0.0.1:8000/metrics",
        role: "aggregated",
      },
    ]);
  });

  it("several target ports (external LB): each port is the next rank, from the pod's start rank", () => {
    const p = pool({ dpMode: "external" });
    const r = inferencePoolEndpoints(
      p,
      src(p),
      inferencePool([8000, 8001, 8002]),
      pods(readyPod("a", "10.0.0.1", true, LABELS, { "kvroute.io/start-rank": "3" })),
    );
    expect(r.endpoints.map((e) => [e.address, e.ranks])).toEqual([
      ["10.0.0.1:8000", [3]],
      ["10.0.0.1:8001", [4]],
      ["10.0.0.1:8002", [5]],
    ]);
  });

  it("several target ports need dpMode external; bad InferencePools leave the pool empty, saying why", () => {
    const p = pool();
    expect(inferencePoolEndpoints(p, src(p), inferencePool([8000, 8001]), pods()).problems[0]).toMatch(
      /needs dpMode: external/,
    );
    const ext = pool({ dpMode: "external" });
    for (const [obj, why] of [
      [undefined, /does not exist/],
      [inferencePool([]), /1 to 8 targetPorts/],
      [inferencePool([1, 2, 3, 4, 5, 6, 7, 8, 9]), /1 to 8 targetPorts/],
      [inferencePool([8000, 8000]), /repeats/],
      [inferencePool([0]), /not a port number/],
      [inferencePool([65536]), /not a port number/],
      [inferencePool([8000], {}), /no selector/],
    ] as const) {
      const r = inferencePoolEndpoints(ext, src(ext), obj as never, pods(readyPod("a", "10.0.0.1", true)));
      expect(r.endpoints).toEqual([]);
      expect(r.problems.join()).toMatch(why);
    }
  });

  it("readiness is the pod's Ready condition: False, missing, unknown, no IP or terminating pods are left out", () => {
    const terminating = readyPod("t", "10.0.0.6", true) as { metadata: Record<string, unknown> };
    terminating.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
    const unknown = readyPod("u", "10.0.0.7", true) as unknown as { status: { conditions: unknown[] } };
    unknown.status.conditions = [{ type: "Ready", status: "Unknown" }];
    const other = readyPod("c", "10.0.0.8", true) as unknown as { status: { conditions: unknown[] } };
    other.status.conditions = [{ type: "ContainersReady", status: "True" }];
    const ready = readyPods(
      [
        readyPod("a", "10.0.0.1", true),
        readyPod("b", "10.0.0.2", false),
        readyPod("n", "10.0.0.3", null),
        readyPod("x", "", true),
        terminating,
        unknown,
        other,
      ].map(asPod),
    );
    expect([...ready]).toEqual([["a", "10.0.0.1"]]);
  });

  it("pods the selector does not pick are not members, also near misses of the label", () => {
    const p = pool();
    const r = inferencePoolEndpoints(
      p,
      src(p),
      inferencePool([8000]),
      pods(
        readyPod("a", "10.0.0.1", true),
        readyPod("b", "10.0.0.2", true, { app: "vllm-qwen2" }),
        readyPod("c", "10.0.0.3", true, { App: "vllm-qwen" }),
        readyPod("d", "10.0.0.4", true, {}),
      ),
    );
    expect(r.endpoints.map((e) => e.address)).toEqual(["10.0.0.1:8000"]);
  });
});

describe("InferencePoolDiscovery against a fake API server", () => {
  let api: FakeApiServer;
  let discovery: InferencePoolDiscovery;
  let reports: EndpointConfig[][];
  const last = () => (reports.at(-1) ?? []).map((e) => e.address);

  beforeEach(async () => {
    api = new FakeApiServer();
    await api.listen();
    reports = [];
  });
  afterEach(async () => {
    await discovery?.stop();
    await api.close();
  });

  async function startWith(cfg: Config): Promise<void> {
    discovery = new InferencePoolDiscovery(cfg.pools, {
      kubeConfig: api.kubeConfig(),
      logger: silent,
      retryMinMs: 20,
      retryMaxMs: 100,
      initialTimeoutMs: 3_600_000,
    });
    await discovery.start((_pool, endpoints) => reports.push(endpoints));
  }

  it("follows pods rolling, the selector and the ports changing, and the InferencePool going and coming back", async () => {
    api.put("inferencepools", inferencePool([8000]));
    api.put("inferencepools", inferencePool([9000], { app: "other" }, "another-pool"));
    api.put("pods", readyPod("a", "10.0.0.1", true));
    api.put("pods", readyPod("b", "10.0.0.2", false));
    api.put("pods", readyPod("o", "10.0.0.9", true, { app: "other" }));
    await startWith(config({ dpMode: "external" }));
    expect(last()).toEqual(["10.0.0.1:8000"]);

    api.put("pods", readyPod("b", "10.0.0.2", true));
    await until("pod b ready", () => last().length === 2);
    expect(last()).toEqual(["10.0.0.1:8000", "10.0.0.2:8000"]);

    // Two ports: each pod is two ranks.
    api.put("inferencepools", inferencePool([8000, 8001]));
    await until("two ports per pod", () => last().length === 4);
    expect(reports.at(-1)?.map((e) => [e.address, e.ranks])).toEqual([
      ["10.0.0.1:8000", [0]],
      ["10.0.0.1:8001", [1]],
      ["10.0.0.2:8000", [0]],
      ["10.0.0.2:8001", [1]],
    ]);

    // Another selector: the pod watch follows it.
    api.put("inferencepools", inferencePool([8000], { app: "other" }));
    await until("selector followed", () => last().join() === "10.0.0.9:8000");

    // Gone: no endpoints; back: endpoints again.
    api.remove("inferencepools", "qwen-pool");
    await until("InferencePool removed", () => last().length === 0);
    api.put("inferencepools", inferencePool([8000]));
    await until("InferencePool back", () => last().length === 2);
  });

  it("discoveryFor picks the InferencePool source for pools that ask for it", async () => {
    api.put("inferencepools", inferencePool([8000]));
    api.put("pods", readyPod("a", "10.0.0.1", true));
    const cfg = config();
    const d = discoveryFor(cfg, { kubeConfig: api.kubeConfig(), logger: silent });
    const seen: string[][] = [];
    await d.start((_p, eps) => seen.push(eps.map((e) => e.address)));
    expect(seen.at(-1)).toEqual(["10.0.0.1:8000"]);
    await d.stop();
  });
});

describe("configuration", () => {
  it("discovery takes exactly one of kubernetes and inferencePool", () => {
    expect(() => parseConfig({ pools: [{ name: "q", models: ["m"], discovery: {} }] }, "t", {})).toThrow(
      /exactly one of kubernetes and inferencePool/,
    );
    expect(() =>
      parseConfig(
        {
          pools: [
            {
              name: "q",
              models: ["m"],
              endpoints: [{ address: "10.0.0.1:8000", ranks: [0] }],
              discovery: { inferencePool: { namespace: "llm", name: "p" } },
            },
          ],
        },
        "t",
        {},
      ),
    ).toThrow(/either from `endpoints` or from `discovery`/);
    expect(() =>
      parseConfig(
        {
          pools: [
            { name: "q", models: ["m"], discovery: { inferencePool: { namespace: "LLM", name: "p" } } },
          ],
        },
        "t",
        {},
      ),
    ).toThrow(/Kubernetes name/);
  });
});
