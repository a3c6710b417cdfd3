// The endpoint picker speaks Envoy's ext_proc protocol as GAIE gateways use it: message order
// and chunking in FULL_DUPLEX_STREAMED and BUFFERED, the destination as header and `envoy.lb`
// metadata, immediate responses with the filter's own answers, and the response phase driving
// the filter's in-flight accounting. The client behaves like Envoy's ext_proc filter.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STREAMED_CHUNK_BYTES } from "../../control-plane/src/epp/responses.ts";
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
// Engines 0-1: pool qwen (vLLM internal LB, ranks 0-1 each); engine 2: pool "down", never healthy.
beforeAll(async () => {
  s = await startEppStack({
    engines: [[0, 1], [0, 1], [0]],
    pools: (e) => [
      {
        name: "qwen",
        models: ["qwen3"],
        endpoints: [
          { address: e[0]?.address, ranks: [0, 1] },
          { address: e[1]?.address, ranks: [0, 1] },
        ],
      },
      { name: "down", models: ["down"], endpoints: [{ address: e[2]?.address, ranks: [0] }] },
    ],
  });
  const down = s.engines[2];
  if (down !== undefined) down.up = false;
  await until(() => s.cp.ready(), "control plane ready");
  await until(
    () => s.cp.slots.present().some((sl) => sl.pool === "down" && !s.cp.load.get(sl.id).healthy),
    "the down pool unhealthy",
  );
  await eppSynced(s.cp);
}, 60_000);
afterAll(async () => s?.close());

const engineAddresses = () => [s.engines[0]?.address, s.engines[1]?.address];

describe("FULL_DUPLEX_STREAMED", () => {
  it("holds the headers answer until the body is in, then sends mutations, metadata and the body in 62,000-byte chunks", async () => {
    const body = chatBody("system ".repeat(20_000), "question");
    expect(body.length).toBeGreaterThan(2 * STREAMED_CHUNK_BYTES);
    const r = await s.client.exchange(
      {
        path: "/v1/chat/completions",
        headers: [
          ...JSON_HEADERS,
          // A client's own routing headers: the filter drops them (SSRF, GPU pinning).
          ["x-gateway-destination-endpoint", "10.9.9.9:1"],
          ["x-data-parallel-rank", "1"],
        ],
        body,
      },
      upstream,
      { chunkBytes: 8192 },
    );
    expect(r.immediate).toBeUndefined();
    const chunks = Math.ceil(body.length / STREAMED_CHUNK_BYTES);
    expect(r.answers).toEqual([
      "request_headers",
      ...Array(chunks).fill("request_body"),
      "response_headers",
      "response_body",
    ]);
    expect(r.streamedChunks.slice(0, -1).every((n) => n === STREAMED_CHUNK_BYTES)).toBe(true);
    expect(r.upstreamBody.toString()).toBe(body);
    expect(r.clearRouteCache).toBe(true);
    const dest = header(r.upstreamHeaders, "x-gateway-destination-endpoint");
    // Best first, then the other endpoint with the same rank (the picker's fallback list).
    expect(dest?.split(",").sort()).toEqual([...engineAddresses()].sort());
    // Header and metadata agree (the protocol forbids two values).
    expect(r.destination).toBe(dest);
    expect(r.upstreamHeaders.filter(([k]) => k === "x-gateway-destination-endpoint")).toHaveLength(1);
    // The rank header is the filter's, not the client's: the client's was removed, then set anew.
    expect(["0", "1"]).toContain(header(r.upstreamHeaders, "x-data-parallel-rank"));
    expect(r.response?.status).toBe(200);
    expect(JSON.parse(r.response?.body.toString() ?? "{}").engine).toBe(dest?.split(",")[0]);
  });

  it("a bodiless request is decided at header time: here the filter's 503 (no model, two pools, no default)", async () => {
    const r = await s.client.exchange({ path: "/v1/chat/completions", headers: JSON_HEADERS }, upstream);
    expect(r.answers).toEqual(["immediate_response"]);
    expect(r.immediate?.status).toBe(503);
    expect(r.immediate?.details).toBe("kvroute_fail_closed");
  });

  it("routes requests the filter does not route (GET /v1/models) to a ready endpoint", async () => {
    const r = await s.client.exchange({ method: "GET", path: "/v1/models" }, upstream);
    expect(r.immediate).toBeUndefined();
    expect(engineAddresses()).toContain(r.destination);
    expect(header(r.upstreamHeaders, "x-gateway-destination-endpoint")).toBe(r.destination);
  });
});

describe("BUFFERED", () => {
  it("answers the headers empty, then puts mutations, metadata and route-cache clearing on the body answer", async () => {
    const body = chatBody("buffered system", "question");
    const r = await s.client.exchange(
      {
        path: "/v1/chat/completions",
        headers: [...JSON_HEADERS, ["x-dynamo-worker-instance-id", "7"]],
        body,
      },
      upstream,
      { mode: "BUFFERED" },
    );
    expect(r.answers).toEqual(["request_headers", "request_body", "response_headers", "response_body"]);
    const dest = header(r.upstreamHeaders, "x-gateway-destination-endpoint");
    expect(engineAddresses()).toContain(dest?.split(",")[0]);
    expect(r.destination).toBe(dest);
    expect(r.clearRouteCache).toBe(true);
    expect(header(r.upstreamHeaders, "x-dynamo-worker-instance-id")).toBeUndefined();
    expect(r.upstreamBody.toString()).toBe(body);
    expect(r.response?.status).toBe(200);
  });

  it("without protocol_config the configured default mode (FULL_DUPLEX_STREAMED) applies", async () => {
    const body = chatBody("no protocol config", "q");
    const r = await s.client.exchange(
      { path: "/v1/chat/completions", headers: JSON_HEADERS, body },
      upstream,
      {
        protocolConfig: false,
      },
    );
    expect(r.answers.slice(0, 2)).toEqual(["request_headers", "request_body"]);
    expect(r.response?.status).toBe(200);
  });
});

describe("a slow upload", () => {
  // The filter waits two ticks for a body it was promised; the picker must not start that wait
  // before the body is in, or a slow client (or a loaded gateway) gets routed without its body —
  // here, with two pools and no default, a 503 for want of a model.
  const fourTicks = async () => {
    const cas = () => s.cp.epp?.filter.host.sharedData("kvr.lease")?.cas ?? -1;
    for (let seen = 0, last = cas(); seen < 4; ) {
      await new Promise((r) => setTimeout(r, 5));
      const now = cas();
      if (now !== last) {
        seen++;
        last = now;
      }
    }
  };
  for (const mode of ["BUFFERED", "FULL_DUPLEX_STREAMED"] as const)
    it(`${mode}: a body that comes four filter ticks after the headers is still routed by its model`, async () => {
      const body = chatBody("slow upload", "question");
      const r = await s.client.exchange(
        { path: "/v1/chat/completions", headers: JSON_HEADERS, body },
        upstream,
        {
          mode,
          beforeBody: fourTicks,
        },
      );
      expect(r.immediate).toBeUndefined();
      expect(engineAddresses()).toContain(
        header(r.upstreamHeaders, "x-gateway-destination-endpoint")?.split(",")[0],
      );
      expect(r.upstreamBody.toString()).toBe(body);
      expect(r.response?.status).toBe(200);
    });
});

describe("immediate responses", () => {
  for (const mode of ["FULL_DUPLEX_STREAMED", "BUFFERED"] as const) {
    it(`${mode}: a model no pool serves gets the filter's 404, with its JSON body and content type`, async () => {
      const r = await s.client.exchange(
        { path: "/v1/chat/completions", headers: JSON_HEADERS, body: chatBody("x", "y", "gpt-nope") },
        upstream,
        { mode },
      );
      expect(r.immediate?.status).toBe(404);
      expect(header(r.immediate?.headers ?? [], "content-type")).toBe("application/json");
      expect(JSON.parse(r.immediate?.body.toString() ?? "{}").error.code).toBe("model_not_found");
      expect(r.immediate?.details).toBe("kvroute_model_not_found");
    });

    it(`${mode}: a pool without a healthy endpoint gets 503 (no ready endpoint)`, async () => {
      const r = await s.client.exchange(
        { path: "/v1/chat/completions", headers: JSON_HEADERS, body: chatBody("x", "y", "down") },
        upstream,
        { mode },
      );
      expect(r.immediate?.status).toBe(503);
      expect(JSON.parse(r.immediate?.body.toString() ?? "{}").error.code).toBe("no_healthy_upstream");
    });
  }

  it("a subset hint that is empty, or names no pod of the pool, gets 503", async () => {
    // By IP (the default): an entry's port does not matter, its IP does (subset-ip.test.ts).
    for (const list of [[], ["10.0.0.1:8000"], [`127.0.0.10:${s.engines[0]?.address.split(":")[1]}`]]) {
      const r = await s.client.exchange(
        { path: "/v1/chat/completions", headers: JSON_HEADERS, body: chatBody("subset", "q") },
        upstream,
        {
          metadata: {
            "envoy.lb.subset_hint": {
              fields: {
                "x-gateway-destination-endpoint-subset": {
                  listValue: { values: list.map((v) => ({ stringValue: v })) },
                },
              },
            },
          },
        },
      );
      expect(r.immediate?.status, JSON.stringify(list)).toBe(503);
    }
  });

  it("a subset hint naming every endpoint changes nothing", async () => {
    const r = await s.client.exchange(
      { path: "/v1/chat/completions", headers: JSON_HEADERS, body: chatBody("subset all", "q") },
      upstream,
      {
        metadata: {
          "envoy.lb.subset_hint": {
            fields: {
              "x-gateway-destination-endpoint-subset": {
                listValue: { values: engineAddresses().map((v) => ({ stringValue: v as string })) },
              },
            },
          },
        },
      },
    );
    expect(r.immediate).toBeUndefined();
    expect(engineAddresses()).toContain(r.served);
  });
});

describe("bodies the filter cannot parse", () => {
  // Invalid JSON is answered 400 (request-edges.test.ts); a valid body without a model is the
  // filter's case.
  it("a body that names no model, with two pools and no default pool, gets the filter's 503", async () => {
    const r = await s.client.exchange(
      { path: "/v1/chat/completions", headers: JSON_HEADERS, body: "{}" },
      upstream,
    );
    expect(r.immediate?.status).toBe(503);
    expect(r.immediate?.details).toBe("kvroute_fail_closed");
  });
});

describe("the response phase", () => {
  it("runs the filter's accounting: in flight while the response streams, reported to the control plane, down after the end", async () => {
    const epp = s.cp.epp;
    if (epp === null) throw new Error("no epp");
    let slotBusy = -1;
    const r = await s.client.exchange(
      { path: "/v1/chat/completions", headers: JSON_HEADERS, body: chatBody("inflight", "q") },
      async (h, b) => {
        const answer = await upstream(h, b);
        const dest = header(h, "x-gateway-destination-endpoint")?.split(",")[0];
        // The embedded filter's leader reports its in-flight count like any gateway's.
        await until(() => {
          for (const sl of s.cp.slots.present())
            if (sl.address === dest && s.cp.load.get(sl.id).inflight > 0) {
              slotBusy = sl.id;
              return true;
            }
          return false;
        }, "in-flight reported");
        return answer;
      },
    );
    expect(r.response?.status).toBe(200);
    await until(() => s.cp.load.get(slotBusy).inflight === 0, "in-flight back to 0 after the stream");
  });

  it("a stream the gateway cancels mid-response still ends the filter's request (on_log)", async () => {
    const call = s.client.openRaw();
    const errors: unknown[] = [];
    call.on("error", (e) => errors.push(e));
    const answers: unknown[] = [];
    call.on("data", (m) => answers.push(m));
    const body = Buffer.from(chatBody("cancelled", "q"));
    call.write({
      request_headers: {
        headers: {
          headers: [
            { key: ":method", raw_value: Buffer.from("POST") },
            { key: ":path", raw_value: Buffer.from("/v1/chat/completions") },
          ],
        },
      },
    });
    call.write({ request_body: { body, end_of_stream: true } });
    await until(() => answers.length >= 2, "request answered");
    const busy = () => s.cp.slots.present().filter((sl) => s.cp.load.get(sl.id).inflight > 0).length;
    await until(() => busy() > 0, "in flight");
    call.cancel();
    await until(() => busy() === 0, "in flight released by the cancelled stream");
  });
});
