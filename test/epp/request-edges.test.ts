// Requests at the edges of the ext_proc protocol, each answered as llm-d-router (GAIE's reference
// picker) answers it or better (docs/gaie.md "Reference behaviour, point by point"): a body that
// ends with trailers instead of end_of_stream, and the body modes in which a routing decision
// cannot reach the gateway.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ProcessingResponse } from "../../control-plane/src/epp/messages.ts";
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
beforeAll(async () => {
  s = await startEppStack({
    engines: [
      [0, 1],
      [0, 1],
    ],
  });
  await until(() => s.cp.ready(), "control plane ready");
  await eppSynced(s.cp);
}, 60_000);
afterAll(async () => s?.close());

const engineAddresses = () => s.engines.map((e) => e.address);

describe("a request body that ends with trailers", () => {
  for (const mode of ["FULL_DUPLEX_STREAMED", "BUFFERED"] as const) {
    it(`${mode}: is routed as one that ends with end_of_stream, body intact, trailers answered`, async () => {
      const body = chatBody("trailers ".repeat(3000), "question");
      const r = await s.client.exchange(
        { path: "/v1/chat/completions", headers: JSON_HEADERS, body },
        upstream,
        {
          mode,
          chunkBytes: 8 * 1024,
          trailers: [["x-checksum", "abc"]],
        },
      );
      expect(r.immediate).toBeUndefined();
      expect(engineAddresses()).toContain(r.destination?.split(",")[0]);
      expect(header(r.upstreamHeaders, "x-gateway-destination-endpoint")).toBe(r.destination);
      expect(r.upstreamBody.toString()).toBe(body);
      expect(r.answers).toContain("request_trailers");
      expect(r.response?.status).toBe(200);
    });
  }
});

describe("request body modes that cannot carry the decision", () => {
  // STREAMED: Envoy sends the body only after the headers answer and applies no header mutation
  // from a body answer; NONE: no body at all; BUFFERED_PARTIAL, GRPC: not what GAIE gateways use.
  it.each([
    ["STREAMED", 1],
    ["NONE", 0],
    ["BUFFERED_PARTIAL", 3],
    ["GRPC", 5],
  ])(
    "%s is refused at the first message: a 500 naming the setting, counted, nothing forwarded",
    async (name, mode) => {
      const before = s.cp.epp?.stats.unsupportedBodyMode[name] ?? 0;
      const call = s.client.openRaw();
      const first = new Promise<ProcessingResponse>((resolve, reject) => {
        call.once("data", resolve);
        call.once("error", reject);
      });
      call.write({
        request_headers: {
          headers: {
            headers: [[":method", "POST"], [":path", "/v1/chat/completions"], ...JSON_HEADERS].map(
              ([key, v]) => ({ key: key as string, raw_value: Buffer.from(v as string) }),
            ),
          },
          end_of_stream: false,
        },
        protocol_config: { request_body_mode: mode, response_body_mode: mode },
      });
      const r = await first;
      call.end();
      expect(r.request_headers).toBeUndefined();
      expect(r.immediate_response?.status.code).toBe(500);
      const err = JSON.parse(Buffer.from(r.immediate_response?.body ?? []).toString()).error;
      expect(err.code).toBe("unsupported_body_mode");
      expect(err.message).toContain(name);
      expect(err.message).toContain("FULL_DUPLEX_STREAMED");
      expect(r.immediate_response?.details).toBe("kvroute_epp_unsupported_body_mode");
      expect(s.cp.epp?.stats.unsupportedBodyMode[name]).toBe(before + 1);
    },
  );
});

describe("a body that is not JSON", () => {
  for (const mode of ["FULL_DUPLEX_STREAMED", "BUFFERED"] as const) {
    it(`${mode}: an inference request gets 400 with a JSON error body, counted; nothing is forwarded`, async () => {
      for (const body of [
        '{"model": "qwen3", "messages": [',
        '{"model":"qwen3"}\u0000',
        "\u0000\u0001garbage",
      ]) {
        const before = s.cp.epp?.stats.invalidJson ?? 0;
        const r = await s.client.exchange(
          { path: "/v1/chat/completions", headers: JSON_HEADERS, body },
          upstream,
          {
            mode,
          },
        );
        expect(r.immediate?.status, body).toBe(400);
        expect(header(r.immediate?.headers ?? [], "content-type")).toBe("application/json");
        expect(JSON.parse(r.immediate?.body.toString() ?? "{}").error.code).toBe("invalid_json");
        expect(r.immediate?.details).toBe("kvroute_epp_invalid_json");
        expect(s.cp.epp?.stats.invalidJson).toBe(before + 1);
      }
    });
  }

  it("requests the filter does not route keep routing: a GET, and a non-JSON body on another path", async () => {
    const get = await s.client.exchange({ method: "GET", path: "/v1/models" }, upstream);
    expect(get.immediate).toBeUndefined();
    expect(engineAddresses()).toContain(get.destination);
    const other = await s.client.exchange(
      { path: "/v1/upload", headers: [["content-type", "text/plain"]], body: "not json" },
      upstream,
    );
    expect(other.immediate).toBeUndefined();
    expect(engineAddresses()).toContain(other.destination);
  });

  it("a request the filter does not route is answered at its first body chunk, not held for the rest", async () => {
    const call = s.client.openRaw();
    const answers: ProcessingResponse[] = [];
    call.on("data", (m: ProcessingResponse) => answers.push(m));
    call.on("error", () => {});
    call.write({
      request_headers: {
        headers: {
          headers: [
            [":method", "POST"],
            [":path", "/v1/upload"],
            ["content-type", "application/octet-stream"],
          ].map(([key, v]) => ({ key: key as string, raw_value: Buffer.from(v as string) })),
        },
        end_of_stream: false,
      },
      protocol_config: { request_body_mode: 4, response_body_mode: 4 },
    });
    call.write({ request_body: { body: Buffer.alloc(8192, 1), end_of_stream: false } });
    // The rest of the upload has not been sent: the destination must not wait for it.
    await until(() => answers.some((a) => a.request_headers !== undefined), "the headers answer");
    expect(engineAddresses()).toContain(
      answers.find((a) => a.dynamic_metadata !== undefined)?.dynamic_metadata?.fields?.["envoy.lb"]
        ?.structValue?.fields?.["x-gateway-destination-endpoint"]?.stringValue,
    );
    call.write({ request_body: { body: Buffer.alloc(8192, 2), end_of_stream: true } });
    call.end();
  });

  it("valid JSON keeps routing after invalid JSON on the same picker", async () => {
    const r = await s.client.exchange(
      { path: "/v1/chat/completions", headers: JSON_HEADERS, body: chatBody("ok", "q") },
      upstream,
    );
    expect(r.immediate).toBeUndefined();
    expect(engineAddresses()).toContain(r.destination?.split(",")[0]);
  });
});

describe("a body longer than the filter's maxBodyBytes", () => {
  let small: EppStack;
  beforeAll(async () => {
    small = await startEppStack({ engines: [[0, 1]], routing: { maxBodyBytes: 16 * 1024 } });
    await until(() => small.cp.ready(), "control plane ready");
    await eppSynced(small.cp);
  }, 60_000);
  afterAll(async () => small?.close());

  // The picker holds the body until the filter's limit, then shows it what it holds and passes
  // the rest through once the filter decided: the filter routes on the part it read, as inline.
  for (const mode of ["FULL_DUPLEX_STREAMED", "BUFFERED"] as const)
    it(`${mode}: is routed, and the whole body reaches the engine in order`, async () => {
      const body = chatBody("long ".repeat(12_000), "question");
      expect(body.length).toBeGreaterThan(3 * 16 * 1024);
      const r = await small.client.exchange(
        { path: "/v1/chat/completions", headers: JSON_HEADERS, body },
        upstream,
        { mode, chunkBytes: 8 * 1024 },
      );
      expect(r.immediate).toBeUndefined();
      expect(small.engines[0]?.address).toBe(r.destination?.split(",")[0]);
      expect(r.upstreamBody.toString()).toBe(body);
      expect(r.response?.status).toBe(200);
    });
});
