// ListWatch never waits forever: a list that gets no answer fails after its deadline, and a
// watch whose server neither sends nor ends it is cut after timeoutSeconds + grace; both
// lead to a relist, and the copy survives in between.
import type { V1Pod } from "@kubernetes/client-node";
import { CoreV1Api } from "@kubernetes/client-node";
import { afterEach, beforeEach, expect, it } from "vitest";
import { ListWatch, type ListWatchOptions } from "../../control-plane/src/discovery/kubernetes-watch.ts";
import { until } from "../until.ts";
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

function start(errors: unknown[], over: Partial<ListWatchOptions<V1Pod>> = {}): ListWatch<V1Pod> {
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
    ...over,
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
  await until("the cut", () => errors.some((e) => /silent past its 1 s timeout/.test(String(e))));
  expect(watch.synced).toBe(true);
  expect([...watch.objects.keys()]).toEqual(["a"]);
  api.hanging = false;
  api.put("pods", pod("b", "10.0.0.2", { app: "w" }));
  await until("relisted", () => api.requests.list > lists && watch?.objects.has("b") === true);
});

// Deadlines an hour away: if stop() waited for any of them, the test would time out instead.
const HOUR = { listTimeoutMs: 3_600_000, watchTimeoutSeconds: 3600, watchGraceMs: 3_600_000 };

it("stop() does not wait for a hanging list's deadline", async () => {
  api.hanging = true;
  const errors: unknown[] = [];
  watch = start(errors, HOUR);
  await until("a hanging list", () => api.requests.hung >= 1);
  await watch.stop();
  expect(api.requests.list).toBe(0); // the list never got an answer
  expect(errors).toEqual([]); // and stop() is not reported as a failure
});

it("stop() does not wait for a watch request that has no answer yet", async () => {
  api.put("pods", pod("a", "10.0.0.1", { app: "w" }));
  api.hangingWatches = true;
  const errors: unknown[] = [];
  watch = start(errors, HOUR);
  await until("listed", () => watch?.synced === true);
  await until("a hanging watch request", () => api.requests.hung >= 1);
  await watch.stop();
  expect(api.requests.list).toBe(1);
  expect(api.watchers).toBe(0); // the watch request never got its answer
  expect(errors).toEqual([]);
});
