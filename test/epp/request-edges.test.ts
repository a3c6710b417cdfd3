// Requests at the edges of the ext_proc protocol, each answered as llm-d-router (GAIE's reference
// picker) answers it or better (docs/gaie.md "Reference behaviour, point by point"): a body that
// ends with trailers instead of end_of_stream, and the body modes in which a routing decision
// cannot reach the gateway.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
