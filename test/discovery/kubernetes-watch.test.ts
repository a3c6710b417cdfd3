// ListWatch never waits forever: a list that gets no answer fails after its deadline, and a
// watch whose server neither sends nor ends it is cut after timeoutSeconds + grace; both
// lead to a relist, and the copy survives in between.
import type { V1Pod } from "@kubernetes/client-node";
import { CoreV1Api } from "@kubernetes/client-node";
import { afterEach, beforeEach, expect, it } from "vitest";
import { ListWatch } from "../../control-plane/src/discovery/kubernetes-watch.ts";
import { FakeApiServer, pod } from "./fake-api-server.ts";

let api: FakeApiServer;
let watch: ListWatch<V1Pod> | undefined;

beforeEach(async () => {
  api = new FakeApiServer();
  await api.listen();
});

afterEach(async () => {
  await watch?.stop();
  await api.close();
});

async function until(what: string, check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function start(errors: unknown[]): ListWatch<V1Pod> {
  const kc = api.kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const w = new ListWatch<V1Pod>({
    kubeConfig: kc,
    path: "/api/v1/namespaces/llm/pods",
    labelSelector: "app=w",
    list: () => core.listNamespacedPod({ namespace: "llm", labelSelector: "app=w" }),
    onChange: () => {},
    onError: (err) => errors.push(err),
    retryMinMs: 20,
    retryMaxMs: 50,
    listTimeoutMs: 150,
    watchTimeoutSeconds: 1,
    watchGraceMs: 100,
  });
  w.start();
  return w;
}

it("a list without an answer fails after its deadline and is retried", async () => {
  api.hanging = true;
  api.put("pods", pod("a", "10.0.0.1", { app: "w" }));
  const errors: unknown[] = [];
  watch = start(errors);
  await until("a timed-out list", () => errors.length >= 1);
  expect(String(errors[0])).toMatch(/no answer within 150 ms/);
  expect(watch.synced).toBe(false);
  api.hanging = false;
  await until("the list after the outage", () => watch?.synced === true);
  expect([...watch.objects.keys()]).toEqual(["a"]);
});

it("a silent watch is cut after timeoutSeconds + grace, keeping the copy, and relisted", async () => {
  api.put("pods", pod("a", "10.0.0.1", { app: "w" }));
  const errors: unknown[] = [];
  watch = start(errors);
  await until("watching", () => api.watchers === 1);
  // From now on nothing answers: the open watch stays silent and is never ended by the server.
  api.hanging = true;
  const lists = api.requests.list;
  await until("the cut", () => errors.some((e) => /silent past its 1 s timeout/.test(String(e))), 4000);
  expect(watch.synced).toBe(true);
  expect([...watch.objects.keys()]).toEqual(["a"]);
  api.hanging = false;
  api.put("pods", pod("b", "10.0.0.2", { app: "w" }));
  await until("relisted", () => api.requests.list > lists && watch?.objects.has("b") === true);
});

it("stop() returns promptly even while a list hangs", async () => {
  api.hanging = true;
  watch = start([]);
  await until("a hanging list", () => api.requests.hung >= 1);
  const t0 = Date.now();
  await watch.stop();
  expect(Date.now() - t0).toBeLessThan(100);
});

it("stop() returns promptly even while a watch request has no answer yet", async () => {
  api.put("pods", pod("a", "10.0.0.1", { app: "w" }));
  watch = start([]);
  await until("listed", () => watch?.synced === true);
  // The first watch is open; drop it and let the next list answer, its watch hang.
  await until("watching", () => api.watchers === 1);
  const lists = api.requests.list;
  api.dropWatches();
  await until("relisted", () => api.requests.list > lists);
  api.hanging = true;
  await until("a hanging watch request", () => api.requests.hung >= 1);
  const t0 = Date.now();
  await watch.stop();
  expect(Date.now() - t0).toBeLessThan(100);
});
