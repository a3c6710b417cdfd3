// A client's routing headers never steer the gateway behind the picker. Behind a GAIE gateway
// whose InferencePool cluster is ORIGINAL_DST reading x-gateway-destination-endpoint, a client's
// copy of that header that reaches the router names any address (server-side request forgery).
// So every answer of the picker that lets a request go upstream removes the client's routing
// headers (control-plane/src/epp/client-headers.ts, the filter's own lists) — on routed requests,
// on requests the filter does not route (GET, unknown paths), and in the request headers answer
// sent before the filter decided, which a gateway failing open forwards as it stands — and the
// `envoy.lb` metadata names only the picker's endpoints. Near misses: the header in another case,
// twice with different values (against an Envoy whose setCopy replaces only the first copy), the
// `-served` variant.
import { readFileSync } from "node:fs";
import type { ClientDuplexStream } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENT_ROUTING_HEADERS } from "../../control-plane/src/epp/client-headers.ts";
import type { ProcessingRequest, ProcessingResponse } from "../../control-plane/src/epp/messages.ts";
import { applyMutation, type ExchangeOptions, type ExchangeResult, type SetCopy } from "./envoy-ext-proc.ts";
import { chatBody, type EppStack, eppSynced, JSON_HEADERS, startEppStack, until, upstream } from "./stack.ts";

type Pairs = Array<[string, string]>;
const DEST = "x-gateway-destination-endpoint";
const FORGED = "169.254.169.254:80";
const FORGED_2 = "10.0.0.1:22";

/** Every value of `name` the upstream request carries, whatever the case of its key. */
function values(pairs: Pairs, name: string): string[] {
  return pairs.filter(([k]) => k.toLowerCase() === name).map(([, v]) => v);
}

/** Header names the request phase's mutations removed (lower case). */
function removals(r: ExchangeResult): string[] {
  return r.requestMutations.flatMap((m) => (m.remove_headers ?? []).map((h) => h.toLowerCase()));
}

/** The destination the picker chose is one of its endpoints and reached the router alone. */
function expectPickerDestination(r: ExchangeResult, endpoints: string[]): void {
  expect(r.immediate).toBeUndefined();
  expect(removals(r)).toContain(DEST);
  const dest = values(r.upstreamHeaders, DEST);
  expect(dest).toHaveLength(1);
  for (const d of (dest[0] ?? "").split(",")) expect(endpoints).toContain(d);
  // The `envoy.lb` metadata names the same pick, never the client's address.
  expect(r.destination).toBe(dest[0]);
  expect(JSON.stringify(r.dynamicMetadata)).not.toContain(FORGED);
  expect(JSON.stringify(r.dynamicMetadata)).not.toContain(FORGED_2);
}

describe("the filter's client header lists", () => {
  it("are the picker's: every header filter/assembly/stream.ts strips is in CLIENT_ROUTING_HEADERS, and no other", () => {
    const src = readFileSync(new URL("../../filter/assembly/stream.ts", import.meta.url), "utf8");
    const list = (name: string): string[] => {
      const m = new RegExp(`const ${name}: string\\[\\] = \\[([^\\]]*)\\]`).exec(src);
      if (m === null) throw new Error(`${name} not found in filter/assembly/stream.ts`);
      return [...(m[1] as string).matchAll(/"([^"]+)"/g)].map((x) => x[1] as string);
    };
    const filter = [...list("ROUTING_HEADERS"), ...list("RANK_HEADERS"), ...list("PREFILL_RANK_HEADERS")];
    expect(filter.length).toBeGreaterThanOrEqual(11);
    expect([...CLIENT_ROUTING_HEADERS].sort()).toEqual([...filter].sort());
  });
});

describe("a routed pool", () => {
  let s: EppStack;
  let endpoints: string[];
  beforeAll(async () => {
    s = await startEppStack({
      engines: [
        [0, 1],
        [0, 1],
      ],
    });
    endpoints = s.engines.map((e) => e.address);
    await until(() => s.cp.ready(), "control plane ready");
    await eppSynced(s.cp);
  }, 60_000);
  afterAll(async () => s?.close());

  for (const mode of ["FULL_DUPLEX_STREAMED", "BUFFERED"] as const) {
    describe(mode, () => {
      const o = (setCopy: SetCopy = "replace-all"): ExchangeOptions => ({ mode, setCopy });

      it("a forged destination on a GET (not routed by the filter) is removed, and the picker's endpoint set", async () => {
        const r = await s.client.exchange(
          { method: "GET", path: "/v1/models", headers: [[DEST, FORGED]] },
          upstream,
          o(),
        );
        expectPickerDestination(r, endpoints);
        expect(r.response?.status).toBe(200);
      });

      it("a forged destination on an unknown path is removed", async () => {
        const r = await s.client.exchange(
          { path: "/v1/embeddings", headers: [...JSON_HEADERS, [DEST, FORGED]], body: '{"input":"x"}' },
          upstream,
          o(),
        );
        expectPickerDestination(r, endpoints);
      });

      it("a forged destination on a routed request is removed", async () => {
        const r = await s.client.exchange(
          {
            path: "/v1/chat/completions",
            headers: [...JSON_HEADERS, [DEST, FORGED]],
            body: chatBody("routed", `forged ${mode}`),
          },
          upstream,
          o(),
        );
        expectPickerDestination(r, endpoints);
      });

      it("near miss: the header in another case is removed as the same header", async () => {
        for (const req of [
          { method: "GET", path: "/v1/models" },
          { path: "/v1/chat/completions", body: chatBody("case", `case ${mode}`) },
        ]) {
          const r = await s.client.exchange(
            { ...req, headers: [...JSON_HEADERS, ["X-Gateway-Destination-Endpoint", FORGED]] },
            upstream,
            o(),
          );
          expectPickerDestination(r, endpoints);
        }
      });

      it("near miss: the header twice with different values leaves no copy, even where Envoy's setCopy replaces only the first", async () => {
        for (const req of [
          { method: "GET", path: "/v1/models" },
          { path: "/v1/embeddings", body: '{"input":"x"}' },
          { path: "/v1/chat/completions", body: chatBody("twice", `twice ${mode}`) },
        ]) {
          const r = await s.client.exchange(
            {
              ...req,
              headers: [[DEST, FORGED], ...JSON_HEADERS, [DEST, FORGED_2]],
            },
            upstream,
            o("first-only"),
          );
          expectPickerDestination(r, endpoints);
        }
      });

      it("near miss: the -served variant from a client is not the served endpoint, and the destination is still the picker's", async () => {
        const before = s.cp.epp?.stats.servedElsewhere;
        const r = await s.client.exchange(
          {
            path: "/v1/chat/completions",
            headers: [
              ...JSON_HEADERS,
              [DEST, FORGED],
              [`${DEST}-served`, FORGED_2],
              [`${DEST}-subset`, FORGED_2],
            ],
            body: chatBody("served", `served ${mode}`),
          },
          upstream,
          o(),
        );
        expectPickerDestination(r, endpoints);
        // Neither is a routing header for the gateway; the filter passes both on, and so does the
        // picker: the served endpoint and the subset come from Envoy's metadata only.
        expect(values(r.upstreamHeaders, `${DEST}-served`)).toEqual([FORGED_2]);
        expect(values(r.upstreamHeaders, `${DEST}-subset`)).toEqual([FORGED_2]);
        expect(s.cp.epp?.stats.servedElsewhere).toBe(before);
      });
    });
  }

  // The request body mode where the headers answer goes out before the filter decided: BUFFERED
  // (2). STREAMED (1) and NONE (0), which a gateway may announce in protocol_config, are refused
  // with an immediate response (request-edges.test.ts): nothing is forwarded there.
  it.each([["BUFFERED", 2]])(
    "fail-open: the %s request headers answer, sent before the filter decides, already removes every client routing header",
    async (_name, bodyMode) => {
      // A gateway with failure_mode_allow that loses the picker after this answer forwards the
      // headers as they stand: none of the client's routing headers may be left in them.
      const headers: Pairs = [
        [":method", "POST"],
        [":path", "/v1/chat/completions"],
        [":authority", "gateway.example"],
        [":scheme", "http"],
        ...JSON_HEADERS,
        [DEST, FORGED],
        ["X-Gateway-Destination-Endpoint", FORGED_2],
        ["x-dynamo-worker-instance-id", "7"],
        ["x-data-parallel-rank", "1"],
        ["x-prefill-dp-rank", "0"],
        [`${DEST}-served`, FORGED_2],
      ];
      const call = s.client.openRaw() as ClientDuplexStream<ProcessingRequest, ProcessingResponse>;
      const answer = new Promise<ProcessingResponse>((resolve, reject) => {
        call.once("data", resolve);
        call.once("error", reject);
      });
      call.write({
        request_headers: {
          headers: { headers: headers.map(([key, v]) => ({ key, raw_value: Buffer.from(v) })) },
          end_of_stream: false,
        },
        protocol_config: { request_body_mode: bodyMode, response_body_mode: 2 },
      });
      const first = await answer;
      call.cancel();
      call.on("error", () => {});
      expect(first.request_headers).toBeDefined();
      const m = first.request_headers?.response?.header_mutation;
      const forwarded = applyMutation(headers, m, "first-only");
      for (const name of CLIENT_ROUTING_HEADERS) expect(values(forwarded, name)).toEqual([]);
      expect(first.dynamic_metadata).toBeUndefined();
      // What the filter passes on unchanged stays.
      expect(values(forwarded, `${DEST}-served`)).toEqual([FORGED_2]);
      expect(values(forwarded, "content-type")).toEqual(["application/json"]);
    },
  );
});

describe("no healthy endpoint (the filter fails closed, the picker has nothing to fall back on)", () => {
  let s: EppStack;
  beforeAll(async () => {
    s = await startEppStack({
      engines: [[0]],
      beforeStart: (e) => {
        for (const x of e) x.up = false;
      },
    });
    await until(() => s.cp.epp?.filter.cacheVersion()?.epoch === s.cp.epoch, "the picker's first sync");
    // A slot starts healthy and turns unhealthy only after failed scrapes: wait for them, and for
    // the picker to hold that load image (on a loaded machine the first sync can come first, and
    // a request then goes to the down engine).
    await until(
      () => s.cp.slots.all().every((x) => !s.cp.load.get(x.id).healthy),
      "every slot unhealthy in the control plane",
    );
    s.cp.publish();
    const want = BigInt(s.cp.log.version);
    await until(
      () => (s.cp.epp?.filter.cacheVersion()?.version ?? -1n) >= want,
      "the picker's sync of that load",
    );
  }, 60_000);
  afterAll(async () => s?.close());

  const never = async (): Promise<never> => {
    throw new Error("nothing may reach an upstream");
  };

  it("a GET with a forged destination is answered 503 by the picker, never forwarded", async () => {
    for (const mode of ["FULL_DUPLEX_STREAMED", "BUFFERED"] as const) {
      const r = await s.client.exchange(
        { method: "GET", path: "/v1/models", headers: [[DEST, FORGED]] },
        never,
        { mode },
      );
      expect(r.immediate?.status).toBe(503);
      expect(r.upstreamHeaders).toEqual([]);
    }
  });

  it("an inference request with a forged destination: 503, and in BUFFERED the headers answer before it removed the header", async () => {
    for (const mode of ["FULL_DUPLEX_STREAMED", "BUFFERED"] as const) {
      const r = await s.client.exchange(
        {
          path: "/v1/chat/completions",
          headers: [...JSON_HEADERS, [DEST, FORGED], [DEST, FORGED_2]],
          body: chatBody("down", "q"),
        },
        never,
        { mode },
      );
      expect(r.immediate?.status).toBe(503);
      if (mode === "BUFFERED") {
        expect(r.answers).toEqual(["request_headers", "immediate_response"]);
        expect(removals(r)).toContain(DEST);
      } else expect(r.answers).toEqual(["immediate_response"]);
    }
  });
});
