// Kubernetes discovery against a fake API server on loopback: a rollout (pods added, not
// ready, removed), a dropped watch connection and a 410 Gone (both relist), an API outage that
// keeps the last picture — first through the discovery's own reports, then through the
// control plane's GET /v1/status.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import type { Config, EndpointConfig } from "../../control-plane/src/config/schema.ts";
import { discoveryFor } from "../../control-plane/src/discovery/discovery.ts";
import { dynamoWorkerId } from "../../control-plane/src/discovery/dynamo-worker-id.ts";
import { KubernetesDiscovery } from "../../control-plane/src/discovery/kubernetes.ts";
import { until } from "../until.ts";
import { endpointSlice, FakeApiServer, pod } from "./fake-api-server.ts";

const silent = pino({ level: "silent" });
const W = { app: "qwen" };

function config(k8s: Record<string, unknown>, extra: Record<string, unknown> = {}): Config {
  return parseConfig(
    {
      pools: [
        {
          name: "qwen",
          models: ["Qwen/Qwen3-8B"],
          ...extra,
          discovery: {
            kubernetes: { namespace: "llm", service: "qwen-workers", selector: { matchLabels: W }, ...k8s },
          },
        },
      ],
      cache: { buckets: 64, ways: 4 },
      load: { scrapeIntervalMs: 50, scrapeTimeoutMs: 200 },
    },
    "test",
    {},
  );
}

type Entry = { pod: string; ip: string; ready: boolean | undefined };

describe("KubernetesDiscovery against a fake API server", () => {
  let api: FakeApiServer;
  let discovery: KubernetesDiscovery;
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
    discovery = new KubernetesDiscovery(cfg.pools, {
      kubeConfig: api.kubeConfig(),
      logger: silent,
      retryMinMs: 20,
      retryMaxMs: 100,
      // start() must resolve because the first picture is complete, never because this
      // passed: an hour, so a slow machine cannot turn the check below into a coin toss.
      initialTimeoutMs: 3_600_000,
    });
    await discovery.start((_pool, endpoints) => reports.push(endpoints));
  }

  const slice = (entries: Entry[]) =>
    endpointSlice("qwen-workers-abc", "qwen-workers", entries, [8000, 8001]);

  it("follows a rollout, and keeps its picture through dropped watches, 410 Gone and an outage", async () => {
    api.put("pods", pod("w-1", "10.1.0.1", W));
    api.put("pods", pod("w-2", "10.1.0.2", W));
    api.put("pods", pod("stranger", "10.1.0.9", { app: "other" }));
    api.put(
      "endpointslices",
      slice([
        { pod: "w-1", ip: "10.1.0.1", ready: true },
        { pod: "w-2", ip: "10.1.0.2", ready: true },
        { pod: "stranger", ip: "10.1.0.9", ready: true },
      ]),
    );
    await startWith(config({ targetPorts: [8000, 8001] }, { dpMode: "external" }));
    // start() resolves with the first complete picture already reported
    expect(last()).toEqual(["10.1.0.1:8000", "10.1.0.1:8001", "10.1.0.2:8000", "10.1.0.2:8001"]);
    expect(reports.at(-1)?.map((e) => e.ranks)).toEqual([[0], [1], [0], [1]]);
    await until("two watches", () => api.watchers === 2);

    // Rollout: a new pod appears not ready, becomes ready; an old one goes not ready, then away.
    const reportsBefore = reports.length;
    api.put("pods", pod("w-3", "10.1.0.3", W, { "kvroute.io/start-rank": "2" }));
    api.put(
      "endpointslices",
      slice([
        { pod: "w-1", ip: "10.1.0.1", ready: true },
        { pod: "w-2", ip: "10.1.0.2", ready: true },
        { pod: "w-3", ip: "10.1.0.3", ready: false },
      ]),
    );
    api.put(
      "endpointslices",
      slice([
        { pod: "w-1", ip: "10.1.0.1", ready: false },
        { pod: "w-2", ip: "10.1.0.2", ready: true },
        { pod: "w-3", ip: "10.1.0.3", ready: true },
      ]),
    );
    await until(
      "w-3 in, w-1 out",
      () => last().join() === "10.1.0.2:8000,10.1.0.2:8001,10.1.0.3:8000,10.1.0.3:8001",
    );
    // Both slices came on the same watch, in order: by the time the second one was reported
    // the first (w-3 not ready) had been handled. No report listed w-3 next to w-1, which only
    // that first slice could have caused. (Between the two, a report of w-2 alone is fine: the
    // pods watch may bring w-3's pod after the slice that makes it ready.)
    const w3BeforeReady = reports
      .slice(reportsBefore)
      .filter(
        (r) =>
          r.some((e) => e.address.startsWith("10.1.0.3:")) &&
          r.some((e) => e.address.startsWith("10.1.0.1:")),
      );
    expect(w3BeforeReady).toEqual([]);
    expect(
      reports
        .at(-1)
        ?.slice(2)
        .map((e) => e.ranks),
    ).toEqual([[2], [3]]);
    api.remove("pods", "w-1");

    // The watch connection drops and, while nobody watches, w-2 goes away: only a relist sees it.
    const listsBefore = api.requests.list;
    api.failing = true;
    api.dropWatches();
    await until("failed relists", () => api.requests.failed >= 2);
    // During the outage the last picture stands: nothing was reported as empty.
    expect(last()).toEqual(["10.1.0.2:8000", "10.1.0.2:8001", "10.1.0.3:8000", "10.1.0.3:8001"]);
    api.put("endpointslices", slice([{ pod: "w-3", ip: "10.1.0.3", ready: true }]));
    api.remove("pods", "w-2");
    api.failing = false;
    await until("both relisted after the outage", () => api.requests.list >= listsBefore + 2);
    await until("the relisted picture", () => last().join() === "10.1.0.3:8000,10.1.0.3:8001");

    // 410 Gone ends the watches with an ERROR event; discovery relists and watches again.
    await until("watching again", () => api.watchers === 2);
    const listsAtGone = api.requests.list;
    api.expireWatches();
    await until("relisted after 410", () => api.requests.list >= listsAtGone + 2 && api.watchers === 2);
    api.put("pods", pod("w-4", "10.1.0.4", W, { "kvroute.io/start-rank": "4" }));
    api.put(
      "endpointslices",
      slice([
        { pod: "w-3", ip: "10.1.0.3", ready: true },
        { pod: "w-4", ip: "10.1.0.4", ready: true },
      ]),
    );
    await until("w-4 after the new watch", () => last().length === 4);
    expect(reports.at(-1)?.map((e) => [e.address, e.ranks])).toEqual([
      ["10.1.0.3:8000", [2]],
      ["10.1.0.3:8001", [3]],
      ["10.1.0.4:8000", [4]],
      ["10.1.0.4:8001", [5]],
    ]);
    // Each report is a change: no duplicates from relists that found nothing new.
    for (let i = 1; i < reports.length; i++) expect(reports[i]).not.toEqual(reports[i - 1]);
  });

  it("start() gives up waiting after initialTimeoutMs when the API does not answer, and catches up later", async () => {
    api.failing = true;
    api.put("pods", pod("w-1", "10.1.0.1", W));
    api.put("endpointslices", slice([{ pod: "w-1", ip: "10.1.0.1", ready: true }]));
    discovery = new KubernetesDiscovery(config({ port: 8000 }).pools, {
      kubeConfig: api.kubeConfig(),
      logger: silent,
      retryMinMs: 20,
      retryMaxMs: 50,
      initialTimeoutMs: 200,
    });
    await discovery.start((_pool, endpoints) => reports.push(endpoints));
    expect(reports).toEqual([]);
    api.failing = false;
    await until("first picture", () => last().join() === "10.1.0.1:8000");
  });

  it("discoveryFor picks Kubernetes for pools that ask for it and static for the others", async () => {
    const cfg = parseConfig(
      {
        pools: [
          { name: "fixed", models: ["a"], endpoints: [{ address: "10.2.0.1:8000", ranks: [0] }] },
          {
            name: "k8s",
            models: ["b"],
            discovery: {
              kubernetes: {
                namespace: "llm",
                service: "qwen-workers",
                selector: { matchLabels: W },
                port: 8000,
              },
            },
          },
        ],
      },
      "test",
      {},
    );
    api.put("pods", pod("w-1", "10.1.0.1", W));
    api.put("endpointslices", slice([{ pod: "w-1", ip: "10.1.0.1", ready: true }]));
    const seen = new Map<string, string[]>();
    const d = discoveryFor(cfg, { kubeConfig: api.kubeConfig(), logger: silent });
    await d.start((pool, endpoints) =>
      seen.set(
        pool.name,
        endpoints.map((e) => e.address),
      ),
    );
    await d.stop();
    expect(Object.fromEntries(seen)).toEqual({ fixed: ["10.2.0.1:8000"], k8s: ["10.1.0.1:8000"] });
  });
});

describe("the control plane's status follows Kubernetes discovery", () => {
  // Pods get loopback addresses 127.0.0.2.. so the control plane's /metrics scrapes reach fake
  // engines on this machine; each engine reports two DP ranks (ranks: auto).
  const ips = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
  const engines: Server[] = [];
  let port = 0;
  let api: FakeApiServer;
  let cp: ControlPlane;

  beforeAll(async () => {
    const metrics =
      'vllm:num_requests_running{engine="0",model_name="q"} 1\nvllm:num_requests_running{engine="1",model_name="q"} 0\n';
    for (const ip of ips) {
      const s = createServer((_req, res) => res.writeHead(200).end(metrics));
      await new Promise<void>((r) => s.listen(port, ip, r));
      port = (s.address() as AddressInfo).port;
      engines.push(s);
    }
    api = new FakeApiServer();
    await api.listen();
  });

  afterAll(async () => {
    await cp?.stop();
    await api.close();
    for (const s of engines) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  async function slots(): Promise<Array<{ address: string; globalRank: number; present: boolean }>> {
    const res = await fetch(`${cp.url}/v1/status`);
    const body = (await res.json()) as {
      slots: Array<{ address: string; globalRank: number; present: boolean }>;
    };
    return body.slots;
  }
  const present = async () =>
    (await slots())
      .filter((s) => s.present)
      .map((s) => `${s.address}#${s.globalRank}`)
      .sort();

  it("slots appear, go and come back as pods roll", async () => {
    const entries = (ready: boolean[]): Entry[] =>
      ips.map((ip, i) => ({ pod: `w-${i}`, ip, ready: ready[i] }));
    ips.forEach((ip, i) => {
      api.put("pods", pod(`w-${i}`, ip, W));
    });
    api.put(
      "endpointslices",
      endpointSlice("qwen-workers-1", "qwen-workers", entries([true, true, false]), [port]),
    );

    const cfg = config({ port });
    const discovery = new KubernetesDiscovery(cfg.pools, {
      kubeConfig: api.kubeConfig(),
      logger: silent,
      retryMinMs: 20,
      retryMaxMs: 100,
    });
    cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: silent, discovery });
    const a = `127.0.0.2:${port}`;
    const b = `127.0.0.3:${port}`;
    const c = `127.0.0.4:${port}`;
    const poll = (want: string[]) =>
      until(`present slots ${want.join(" ")}`, async () => (await present()).join() === want.join());
    await poll([`${a}#0`, `${a}#1`, `${b}#0`, `${b}#1`]);
    const readyz = await fetch(`${cp.url}/readyz`);
    expect(readyz.status).toBe(200);

    // c becomes ready, a goes not ready: a's slots stay in the table as not present.
    api.put(
      "endpointslices",
      endpointSlice("qwen-workers-1", "qwen-workers", entries([false, true, true]), [port]),
    );
    await poll([`${b}#0`, `${b}#1`, `${c}#0`, `${c}#1`]);
    expect((await slots()).filter((s) => s.address === a).map((s) => s.present)).toEqual([false, false]);

    // The watch drops; a comes back while it is down; the relist brings its slots back.
    api.dropWatches();
    api.put(
      "endpointslices",
      endpointSlice("qwen-workers-1", "qwen-workers", entries([true, true, true]), [port]),
    );
    await poll([`${a}#0`, `${a}#1`, `${b}#0`, `${b}#1`, `${c}#0`, `${c}#1`]);

    // b's pod is deleted (the slice drops it too).
    api.remove("pods", "w-1");
    await poll([`${a}#0`, `${a}#1`, `${c}#0`, `${c}#1`]);
    await cp.stop();
  });

  it("a Dynamo pool's slots carry the worker ids Dynamo derives from the pod names", async () => {
    const labels = { app: "dyn" };
    api.put(
      "pods",
      pod(
        "dyn-prefill-0",
        "127.0.0.2",
        { ...labels, "kvroute.io/role": "prefill" },
        { "kvroute.io/ranks": "0-1" },
      ),
    );
    api.put(
      "pods",
      pod(
        "dyn-decode-0",
        "127.0.0.3",
        { ...labels, "kvroute.io/role": "decode" },
        { "kvroute.io/ranks": "0-1" },
      ),
    );
    api.put(
      "endpointslices",
      endpointSlice(
        "dyn-1",
        "dyn-workers",
        [
          { pod: "dyn-prefill-0", ip: "127.0.0.2", ready: true },
          { pod: "dyn-decode-0", ip: "127.0.0.3", ready: true },
        ],
        [port],
      ),
    );
    const cfg = parseConfig(
      {
        pools: [
          {
            name: "dyn",
            models: ["m"],
            engine: "dynamo",
            discovery: {
              kubernetes: {
                namespace: "llm",
                service: "dyn-workers",
                selector: { matchLabels: labels },
                port,
              },
            },
          },
        ],
        cache: { buckets: 64, ways: 4 },
      },
      "test",
      {},
    );
    const discovery = new KubernetesDiscovery(cfg.pools, { kubeConfig: api.kubeConfig(), logger: silent });
    cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: silent, discovery });
    const body = (await (await fetch(`${cp.url}/v1/status`)).json()) as {
      slots: Array<{ address: string; globalRank: number; role: string; workerId: string }>;
    };
    expect(body.slots.map((s) => [s.address.split(":")[0], s.globalRank, s.role, s.workerId])).toEqual([
      ["127.0.0.2", 0, "prefill", dynamoWorkerId("dyn-prefill-0").toString()],
      ["127.0.0.2", 1, "prefill", dynamoWorkerId("dyn-prefill-0").toString()],
      ["127.0.0.3", 0, "decode", dynamoWorkerId("dyn-decode-0").toString()],
      ["127.0.0.3", 1, "decode", dynamoWorkerId("dyn-decode-0").toString()],
    ]);
  });
});
