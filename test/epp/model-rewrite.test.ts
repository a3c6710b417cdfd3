// Model-name rewrites through the picker, as llm-d-router applies them: the client's
// x-llm-d-model-name-rewrite header (or the deprecated x-gateway-model-name-rewrite), then an
// InferenceModelRewrite rule for the body's model — exact match over generic, oldest resource
// first, targets by weight. The body reaches the engine with the target model (and its length),
// the filter routes by the target's pool, and the response names the client's model again.
// Rewrites are given in the CRD's shape (llm-d.ai/v1alpha2, as in llm-d-router's
// test/testdata/inferencepool-with-model-hermetic.yaml); resource-watch.test.ts watches them.
import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InferenceModelRewrite } from "../../control-plane/src/epp/model-rewrite.ts";
import type { EngineHit } from "../filter/harness.ts";
import {
  chatBody,
  type EppStack,
  eppSynced,
  header,
  JSON_HEADERS,
  startEppStack,
  until,
  upstream,
} from "./stack.ts";

let s: EppStack;
// Engine 0: pool "base" (model qwen3); engine 1: pool "canary" (model qwen3-canary).
beforeAll(async () => {
  s = await startEppStack({
    engines: [[0], [0]],
    pools: (e) => [
      { name: "base", models: ["qwen3"], endpoints: [{ address: e[0]?.address, ranks: [0] }] },
      { name: "canary", models: ["qwen3-canary"], endpoints: [{ address: e[1]?.address, ranks: [0] }] },
    ],
  });
  // The engines answer like vLLM: the model they served is in the body.
  for (const e of s.engines)
    e.reply = (res: ServerResponse, hit: EngineHit) => {
      const model = hit.body === "" ? null : JSON.parse(hit.body).model;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: "x", object: "chat.completion", model, engine: e.address, choices: [] }));
    };
  await until(() => s.cp.ready(), "control plane ready");
  await eppSynced(s.cp);
}, 60_000);
afterAll(async () => s?.close());

const engine = (i: number) => s.engines[i]?.address as string;
const rewrites = (objects: InferenceModelRewrite[]) => s.cp.epp?.resources.setRewrites(objects);
const rewrite = (
  name: string,
  created: string,
  rules: NonNullable<InferenceModelRewrite["spec"]>["rules"],
): InferenceModelRewrite => ({
  metadata: { name, creationTimestamp: created },
  spec: { poolRef: { group: "inference.networking.k8s.io", name: "pool" }, rules },
});
const ask = (model: string, headers: Array<[string, string]> = [], mode?: "BUFFERED") =>
  s.client.exchange(
    {
      path: "/v1/chat/completions",
      headers: [...JSON_HEADERS, ...headers],
      body: chatBody("rw", "q", model),
    },
    upstream,
    mode === undefined ? {} : { mode },
  );

describe("InferenceModelRewrite rules", () => {
  for (const mode of [undefined, "BUFFERED"] as const) {
    it(`${mode ?? "FULL_DUPLEX_STREAMED"}: an exact match sends the request to the target's pool with the target model; the client sees its own name`, async () => {
      rewrites([
        rewrite("rewrite-test", "2026-01-01T00:00:00Z", [
          { matches: [{ model: { value: "my-alias" } }], targets: [{ modelRewrite: "qwen3-canary" }] },
        ]),
      ]);
      const r = await ask("my-alias", [], mode);
      expect(r.immediate).toBeUndefined();
      expect(r.destination).toBe(engine(1));
      expect(JSON.parse(r.upstreamBody.toString()).model).toBe("qwen3-canary");
      expect(header(r.upstreamHeaders, "content-length")).toBe(String(r.upstreamBody.length));
      const answer = JSON.parse(r.response?.body.toString() ?? "{}");
      expect(answer.model).toBe("my-alias");
      expect(answer.engine).toBe(engine(1));
      // Without a rule for it, a model passes unchanged.
      const plain = await ask("qwen3", [], mode);
      expect(plain.destination).toBe(engine(0));
      expect(JSON.parse(plain.response?.body.toString() ?? "{}").model).toBe("qwen3");
    });
  }

  it("an exact match wins over a generic rule; among equals the oldest resource, then its first rule", async () => {
    rewrites([
      rewrite("generic", "2020-01-01T00:00:00Z", [{ targets: [{ modelRewrite: "qwen3" }] }]),
      rewrite("newer", "2026-02-01T00:00:00Z", [
        { matches: [{ model: { value: "alias" } }], targets: [{ modelRewrite: "qwen3" }] },
      ]),
      rewrite("older", "2026-01-01T00:00:00Z", [
        { matches: [{ model: { value: "alias" } }], targets: [{ modelRewrite: "qwen3-canary" }] },
        { matches: [{ model: { value: "alias" } }], targets: [{ modelRewrite: "qwen3" }] },
      ]),
    ]);
    expect((await ask("alias")).destination).toBe(engine(1));
    // Any other model: the generic rule.
    expect(JSON.parse((await ask("qwen3-canary")).upstreamBody.toString()).model).toBe("qwen3");
  });

  it("targets by weight: both are used, a weight-less target next to weighted ones never", async () => {
    rewrites([
      rewrite("split", "2026-01-01T00:00:00Z", [
        {
          matches: [{ model: { value: "split" } }],
          targets: [
            { modelRewrite: "qwen3", weight: 50 },
            { modelRewrite: "qwen3-canary", weight: 50 },
          ],
        },
        {
          matches: [{ model: { value: "mixed" } }],
          targets: [{ modelRewrite: "qwen3", weight: 1 }, { modelRewrite: "qwen3-canary" }],
        },
      ]),
    ]);
    const seen = new Set<string | undefined>();
    for (let i = 0; i < 40; i++) seen.add((await ask("split")).destination);
    expect(seen).toEqual(new Set([engine(0), engine(1)]));
    for (let i = 0; i < 10; i++) expect((await ask("mixed")).destination).toBe(engine(0));
  });
});

describe("the rewrite header", () => {
  it("x-llm-d-model-name-rewrite, then the deprecated x-gateway-model-name-rewrite, name the target", async () => {
    rewrites([]);
    for (const name of ["x-llm-d-model-name-rewrite", "x-gateway-model-name-rewrite"]) {
      const r = await ask("qwen3", [[name, "qwen3-canary"]]);
      expect(r.destination, name).toBe(engine(1));
      expect(JSON.parse(r.upstreamBody.toString()).model).toBe("qwen3-canary");
      expect(JSON.parse(r.response?.body.toString() ?? "{}").model).toBe("qwen3");
    }
    const both = await ask("qwen3", [
      ["x-llm-d-model-name-rewrite", "qwen3"],
      ["x-gateway-model-name-rewrite", "qwen3-canary"],
    ]);
    expect(both.destination).toBe(engine(0));
  });

  it("a rule for the body's model decides over the header, as in the reference", async () => {
    rewrites([
      rewrite("r", "2026-01-01T00:00:00Z", [
        { matches: [{ model: { value: "qwen3" } }], targets: [{ modelRewrite: "qwen3" }] },
      ]),
    ]);
    expect((await ask("qwen3", [["x-llm-d-model-name-rewrite", "qwen3-canary"]])).destination).toBe(
      engine(0),
    );
    rewrites([]);
  });
});
