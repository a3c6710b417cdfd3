// Overload shedding and priority through the endpoint picker: fake engines report a waiting queue
// on /metrics, the control plane scrapes it into kvr.load, and the picker's embedded filter sheds
// (an ImmediateResponse 429 with Retry-After) when every slot is saturated for the request's
// priority. A GAIE InferenceObjective named in x-gateway-inference-objective maps to a level
// through epp.objectives (negative → sheddable, 0 → standard, positive → critical); critical still
// needs a trusted client, and kvroute's priority header never reaches the engine.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyObjective, levelOf } from "../../control-plane/src/epp/objective.ts";
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

const SECRET_HEADER = "x-kvroute-pin-secret";
const SECRET = "epp-Priority-secret-0123456789";
const OBJECTIVE = "x-gateway-inference-objective";
const LLM_D_OBJECTIVE = "x-llm-d-inference-objective";

let s: EppStack;
beforeAll(async () => {
  s = await startEppStack({
    engines: [[0, 1]],
    pools: (e) => [
      {
        name: "qwen",
        models: ["qwen3"],
        endpoints: [{ address: e[0]?.address, ranks: [0, 1] }],
        shedding: {
          enabled: true,
          retryAfterSeconds: 3,
          standard: { maxQueued: 2 },
          sheddable: { maxQueued: 0 },
        },
      },
    ],
    routing: { rankHeaderPolicy: { secretHeader: { name: SECRET_HEADER, value: SECRET } } },
    epp: {
      objectives: [
        { name: "batch", priority: -1 },
        { name: "chat", priority: 0 },
        { name: "premium", priority: 10 },
      ],
    },
  });
  await until(() => s.cp.ready(), "control plane ready");
  await eppSynced(s.cp);
}, 60_000);
afterAll(async () => s?.close());

/** Both ranks report `n` waiting; returns once the picker's filter holds a cache that shows it. */
async function waiting(n: number): Promise<void> {
  const engine = s.engines[0];
  if (engine === undefined) throw new Error("no engine");
  engine.waiting[0] = n;
  engine.waiting[1] = n;
  await until(() => s.cp.slots.present().every((sl) => s.cp.load.get(sl.id).waiting === n), `waiting ${n}`);
  await eppSynced(s.cp);
}

const ask = (headers: Array<[string, string]>) =>
  s.client.exchange(
    {
      path: "/v1/chat/completions",
      headers: [...JSON_HEADERS, ...headers],
      body: chatBody("p", `q ${Math.random()}`),
    },
    upstream,
  );

/** "routed" (and the engine never saw kvroute's priority header) or the immediate status. */
async function outcome(headers: Array<[string, string]>): Promise<string | number> {
  const r = await ask(headers);
  if (r.immediate !== undefined) {
    expect(header(r.immediate.headers, "retry-after")).toBe("3");
    expect(JSON.parse(r.immediate.body.toString()).error.code).toBe("overloaded");
    return r.immediate.status;
  }
  expect(header(r.upstreamHeaders, "x-kvroute-priority")).toBeUndefined();
  expect(header(r.upstreamHeaders, SECRET_HEADER)).toBeUndefined();
  return "routed";
}

describe("GAIE priorities", () => {
  it("map to levels by sign, like GAIE's sheddable negatives", () => {
    expect([-5, -1, 0, 1, 1000].map(levelOf)).toEqual([
      "sheddable",
      "sheddable",
      "standard",
      "critical",
      "critical",
    ]);
    const m = {
      objectiveHeaders: [OBJECTIVE],
      priorityHeader: "x-kvroute-priority",
      priorities: new Map([["a", 1]]),
    };
    // A listed objective replaces every client copy of the priority header.
    expect(
      applyObjective(
        [
          [OBJECTIVE, "a"],
          ["x-kvroute-priority", "sheddable"],
        ],
        m,
      ),
    ).toEqual({
      pairs: [
        [OBJECTIVE, "a"],
        ["x-kvroute-priority", "critical"],
      ],
      result: "mapped",
    });
    // Unknown, another case of the name, repeated: unchanged.
    for (const named of [["b"], ["A"], ["a", "a"]]) {
      const pairs = named.map((v) => [OBJECTIVE, v] as [string, string]);
      expect(applyObjective(pairs, m)).toEqual({ pairs, result: "unknown" });
    }
    expect(applyObjective([["x", "y"]], m).result).toBe("none");
  });
});

describe("shedding through the picker", () => {
  it("sheds sheddable objectives first, serves standard ones while their threshold holds", async () => {
    await waiting(1);
    expect(await outcome([[OBJECTIVE, "batch"]])).toBe(429);
    expect(await outcome([["x-kvroute-priority", "sheddable"]])).toBe(429);
    expect(await outcome([[OBJECTIVE, "chat"]])).toBe("routed");
    expect(await outcome([])).toBe("routed");
    // An objective the configuration does not list changes nothing: standard here.
    expect(await outcome([[OBJECTIVE, "unlisted"]])).toBe("routed");
    expect(s.cp.epp?.stats.objectives).toMatchObject({ mapped: 2 });
    expect(s.cp.epp?.stats.objectives.unknown).toBeGreaterThanOrEqual(1);
  });

  it("reads llm-d-router's x-llm-d-inference-objective first, the deprecated GAIE header when it is absent", async () => {
    await waiting(1);
    expect(await outcome([[LLM_D_OBJECTIVE, "batch"]])).toBe(429);
    expect(await outcome([[LLM_D_OBJECTIVE, "chat"]])).toBe("routed");
    // Both present: the current name decides, the deprecated one is not read.
    expect(
      await outcome([
        [LLM_D_OBJECTIVE, "chat"],
        [OBJECTIVE, "batch"],
      ]),
    ).toBe("routed");
    expect(
      await outcome([
        [LLM_D_OBJECTIVE, "batch"],
        [OBJECTIVE, "chat"],
      ]),
    ).toBe(429);
    await waiting(0);
  });

  it("all saturated for standard: 429, except a critical objective from a trusted client", async () => {
    await waiting(5);
    expect(await outcome([[OBJECTIVE, "chat"]])).toBe(429);
    expect(await outcome([[OBJECTIVE, "premium"]])).toBe(429); // no secret: not trusted, downgraded
    expect(
      await outcome([
        [OBJECTIVE, "premium"],
        [SECRET_HEADER, `${SECRET}x`],
      ]),
    ).toBe(429);
    expect(
      await outcome([
        [OBJECTIVE, "premium"],
        [SECRET_HEADER, SECRET],
      ]),
    ).toBe("routed");
    // The objective decides over the client's own claim.
    expect(
      await outcome([
        [OBJECTIVE, "chat"],
        ["x-kvroute-priority", "critical"],
        [SECRET_HEADER, SECRET],
      ]),
    ).toBe(429);
    const shed = Number(s.cp.epp?.filter.host.counter("kvroute.requests.shed") ?? 0);
    expect(shed).toBeGreaterThanOrEqual(6);
    await waiting(0);
    expect(await outcome([[OBJECTIVE, "batch"]])).toBe("routed");
  });
});
