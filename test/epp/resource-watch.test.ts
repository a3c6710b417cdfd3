// The picker follows the InferenceObjective and InferenceModelRewrite resources of its namespace
// (epp.resources) through the Kubernetes API — here a fake API server on loopback serving
// llm-d.ai/v1alpha2 objects shaped as llm-d-router's own manifests
// (config/manifests/inferenceobjective.yaml, test/testdata/inferencepool-with-model-hermetic.yaml).
// Only objects whose poolRef names the configured InferencePool count; changes and deletions
// apply without a restart.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeApiServer } from "../discovery/fake-api-server.ts";
import { chatBody, type EppStack, eppSynced, JSON_HEADERS, startEppStack, until, upstream } from "./stack.ts";

const NS = "llm";
const POOL = "vllm-qwen3-32b";

const objective = (name: string, priority: number | undefined, pool = POOL) => ({
  apiVersion: "llm-d.ai/v1alpha2",
  kind: "InferenceObjective",
  metadata: { name, namespace: NS },
  spec: {
    ...(priority === undefined ? {} : { priority }),
    poolRef: { group: "inference.networking.k8s.io", name: pool },
  },
});
const modelRewrite = (from: string, to: string, pool = POOL) => ({
  apiVersion: "llm-d.ai/v1alpha2",
  kind: "InferenceModelRewrite",
  metadata: { name: `rewrite-${from}`, namespace: NS, creationTimestamp: "2026-01-01T00:00:00Z" },
  spec: {
    poolRef: { group: "inference.networking.k8s.io", name: pool },
    rules: [{ matches: [{ model: { value: from } }], targets: [{ modelRewrite: to }] }],
  },
});

let api: FakeApiServer;
let s: EppStack;
beforeAll(async () => {
  api = new FakeApiServer();
  await api.listen();
  api.put("inferenceobjectives", objective("small-segment-lora", 1));
  api.put("inferenceobjectives", objective("base-model", undefined));
  api.put("inferenceobjectives", objective("batch", -1, "another-pool"));
  api.put("inferencemodelrewrites", modelRewrite("model-to-be-rewritten", "qwen3"));
  s = await startEppStack({
    engines: [[0, 1]],
    epp: { resources: { namespace: NS, inferencePool: POOL } },
    controlPlane: { eppKubeConfig: api.kubeConfig() },
  });
  await until(() => s.cp.ready(), "control plane ready");
  await eppSynced(s.cp);
  await until(() => s.cp.epp?.resources.get("small-segment-lora") !== undefined, "objectives listed");
  await until(() => (s.cp.epp?.resources.rewrites.size ?? 0) > 0, "rewrites listed");
}, 60_000);
afterAll(async () => {
  await s?.close();
  await api?.close();
});

const ask = (model: string, headers: Array<[string, string]> = []) =>
  s.client.exchange(
    { path: "/v1/chat/completions", headers: [...JSON_HEADERS, ...headers], body: chatBody("w", "q", model) },
    upstream,
  );

describe("InferenceObjectives from the cluster", () => {
  it("this pool's objectives count (priority unset = 0); another pool's do not", async () => {
    const r = s.cp.epp?.resources;
    expect(r?.get("small-segment-lora")).toBe(1);
    expect(r?.get("base-model")).toBe(0);
    expect(r?.get("batch")).toBeUndefined();
    const before = { ...s.cp.epp?.stats.objectives };
    await ask("qwen3", [["x-llm-d-inference-objective", "small-segment-lora"]]);
    await ask("qwen3", [["x-llm-d-inference-objective", "batch"]]);
    expect(s.cp.epp?.stats.objectives.mapped).toBe((before.mapped ?? 0) + 1);
    expect(s.cp.epp?.stats.objectives.unknown).toBe((before.unknown ?? 0) + 1);
  });

  it("a changed priority, a new objective and a deletion apply while running", async () => {
    api.put("inferenceobjectives", objective("small-segment-lora", -3));
    api.put("inferenceobjectives", objective("late", 7));
    api.remove("inferenceobjectives", "base-model");
    const r = s.cp.epp?.resources;
    await until(
      () => r?.get("small-segment-lora") === -3 && r.get("late") === 7 && r.get("base-model") === undefined,
      "watched changes applied",
    );
  });
});

describe("InferenceModelRewrites from the cluster", () => {
  it("rewrites the model the manifest names, and stops once the resource is deleted", async () => {
    const r = await ask("model-to-be-rewritten");
    expect(r.immediate).toBeUndefined();
    expect(JSON.parse(r.upstreamBody.toString()).model).toBe("qwen3");
    api.remove("inferencemodelrewrites", "rewrite-model-to-be-rewritten");
    await until(() => s.cp.epp?.resources.rewrites.size === 0, "rewrite deleted");
    const after = await ask("model-to-be-rewritten");
    expect(after.immediate?.status).toBe(404);
  });

  it("a rewrite for another pool is ignored", async () => {
    api.put("inferencemodelrewrites", modelRewrite("elsewhere", "qwen3", "another-pool"));
    api.put("inferencemodelrewrites", modelRewrite("marker", "qwen3"));
    await until(() => s.cp.epp?.resources.rewrites.ruleFor("marker") !== null, "marker listed");
    expect(s.cp.epp?.resources.rewrites.ruleFor("elsewhere")).toBeNull();
  });
});
