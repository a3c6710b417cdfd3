// The picker's gRPC surface: health states as GAIE gateways and probes read them (NOT_SERVING
// until the embedded filter holds this run's index, liveness always, unknown names refused), and
// malformed or out-of-order ext_proc streams ended with INVALID_ARGUMENT — never a crash, and
// the next stream is served.
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServingStatus } from "../../control-plane/src/epp/messages.ts";
import { EnvoyExtProc } from "./envoy-ext-proc.ts";
import { chatBody, type EppStack, eppSynced, JSON_HEADERS, startEppStack, until, upstream } from "./stack.ts";

let s: EppStack;
beforeAll(async () => {
  // ranks: auto, and the engine's /metrics answers 503 at first: the control plane cannot know
  // its ranks, so it is not ready.
  s = await startEppStack({
    engines: [[0, 1]],
    pools: (e) => [
      { name: "qwen", models: ["qwen3"], endpoints: [{ address: e[0]?.address, ranks: "auto" }] },
    ],
    beforeStart: (engines) => {
      for (const e of engines) e.up = false;
    },
  });
}, 60_000);
afterAll(async () => s?.close());

const ready = ["", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"];

describe("gRPC health", () => {
  it("before the first index: NOT_SERVING for readiness, the server and ext_proc; liveness SERVING; a request gets 503", async () => {
    for (const name of ready)
      expect(await s.client.check(name), name).toEqual({ status: ServingStatus.NOT_SERVING });
    expect(await s.client.check("liveness")).toEqual({ status: ServingStatus.SERVING });
    const r = await s.client.exchange(
      { path: "/v1/chat/completions", headers: JSON_HEADERS, body: chatBody("cold", "q") },
      upstream,
    );
    expect(r.immediate?.status).toBe(503);
  });

  it("unknown names — also near misses — are NOT_FOUND", async () => {
    for (const name of [
      "Readiness",
      "readiness ",
      "readines",
      "liveness/",
      "envoy.service.ext_proc.v3",
      "grpc.health.v1.Health",
    ])
      expect(await s.client.check(name), name).toEqual({ code: status.NOT_FOUND });
  });

  it("Watch reports NOT_SERVING, then SERVING once the engine answers and the filter synced", async () => {
    // biome-ignore lint/suspicious/noExplicitAny: generated client
    const health = (s.client as any).health;
    const seen: number[] = [];
    const call = health.Watch({ service: "readiness" });
    call.on("data", (m: { status?: number }) => seen.push(m.status ?? 0));
    call.on("error", () => {});
    const unknown = health.Watch({ service: "nope" });
    const unknownSeen: number[] = [];
    unknown.on("data", (m: { status?: number }) => unknownSeen.push(m.status ?? 0));
    unknown.on("error", () => {});
    await until(() => seen.length > 0 && unknownSeen.length > 0, "first watch answers");
    expect(seen[0]).toBe(ServingStatus.NOT_SERVING);
    expect(unknownSeen).toEqual([ServingStatus.SERVICE_UNKNOWN]);
    const engine = s.engines[0];
    if (engine !== undefined) engine.up = true;
    await until(() => s.cp.ready(), "control plane ready", 15_000);
    await eppSynced(s.cp);
    await until(() => seen.at(-1) === ServingStatus.SERVING, "watch says SERVING");
    call.cancel();
    unknown.cancel();
    for (const name of ready)
      expect(await s.client.check(name), name).toEqual({ status: ServingStatus.SERVING });
    const r = await s.client.exchange(
      { path: "/v1/chat/completions", headers: JSON_HEADERS, body: chatBody("warm", "q") },
      upstream,
    );
    expect(r.immediate, JSON.stringify(r.immediate?.body.toString())).toBeUndefined();
    expect(r.served).toBe(s.engines[0]?.address);
  });
});

/** Writes messages on a fresh stream and returns the status the server ended it with. */
async function ended(
  write: (c: ReturnType<EnvoyExtProc["openRaw"]>) => void,
): Promise<{ code: number; details: string }> {
  const call = s.client.openRaw();
  const done = new Promise<{ code: number; details: string }>((resolve) => {
    call.on("error", (e: { code: number; details: string }) => resolve({ code: e.code, details: e.details }));
    call.on("status", (st: { code: number; details: string }) => {
      if (st.code === status.OK) resolve({ code: st.code, details: st.details });
    });
  });
  call.on("data", () => {});
  write(call);
  return done;
}

const hdrs = (pairs: Array<[string, string]>) => ({
  headers: { headers: pairs.map(([key, v]) => ({ key, raw_value: Buffer.from(v) })) },
});
const POST: Array<[string, string]> = [
  [":method", "POST"],
  [":path", "/v1/chat/completions"],
];

describe("malformed ext_proc streams end with INVALID_ARGUMENT", () => {
  beforeAll(async () => {
    for (const e of s.engines) e.up = true;
    await until(() => s.cp.ready(), "control plane ready", 15_000);
    await eppSynced(s.cp);
  }, 30_000);

  it("bytes that are no ProcessingRequest", async () => {
    const call = s.client.openBytes();
    const st = await new Promise<{ code: number; details: string }>((resolve) => {
      call.on("error", (e: { code: number; details: string }) => resolve(e));
      call.on("data", () => {});
      call.write(Buffer.from([0x12, 0xff, 0xff, 0xff, 0x0f, 0x01]));
    });
    expect(st.code).toBe(status.INVALID_ARGUMENT);
    expect(st.details).toMatch(/malformed ProcessingRequest/);
  });

  it("a message with none of the request kinds", async () => {
    const st = await ended((c) => c.write({ observability_mode: false }));
    expect(st.code).toBe(status.INVALID_ARGUMENT);
  });

  it("a body, trailers or a response before the request headers", async () => {
    for (const m of [
      { request_body: { body: Buffer.from("{}"), end_of_stream: true } },
      { request_trailers: { trailers: { headers: [] } } },
      { response_headers: hdrs([[":status", "200"]]) },
      { response_body: { body: Buffer.from("x"), end_of_stream: true } },
    ]) {
      const st = await ended((c) => c.write(m));
      expect(st.code, JSON.stringify(Object.keys(m))).toBe(status.INVALID_ARGUMENT);
    }
  });

  it("request headers without :method or :path, and request headers twice", async () => {
    for (const pairs of [[[":path", "/v1/chat/completions"]], [[":method", "POST"]], []] as Array<
      Array<[string, string]>
    >) {
      const st = await ended((c) => c.write({ request_headers: hdrs(pairs) }));
      expect(st.code, JSON.stringify(pairs)).toBe(status.INVALID_ARGUMENT);
    }
    const st = await ended((c) => {
      c.write({ request_headers: { ...hdrs(POST), end_of_stream: false } });
      c.write({ request_headers: { ...hdrs(POST), end_of_stream: false } });
    });
    expect(st.code).toBe(status.INVALID_ARGUMENT);
  });

  it("a response body before the response headers", async () => {
    const st = await ended((c) => {
      c.write({
        request_headers: {
          ...hdrs([
            [":method", "GET"],
            [":path", "/v1/models"],
          ]),
          end_of_stream: true,
        },
      });
      c.write({ response_body: { body: Buffer.from("x"), end_of_stream: true } });
    });
    expect(st.code).toBe(status.INVALID_ARGUMENT);
  });

  it("a health check that does not decode", async () => {
    const raw = new EnvoyExtProc(s.cp.epp?.address ?? "");
    // biome-ignore lint/suspicious/noExplicitAny: generic client call
    const client = (raw as any).health;
    const st = await new Promise<number>((resolve) =>
      client.makeUnaryRequest(
        "/grpc.health.v1.Health/Check",
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0x0b]),
        (err: { code: number } | null) => resolve(err?.code ?? status.OK),
      ),
    );
    raw.close();
    expect(st).toBe(status.INVALID_ARGUMENT);
  });

  it("after all of that the picker still routes", async () => {
    await until(() => s.cp.ready(), "ready");
    const r = await s.client.exchange(
      { path: "/v1/chat/completions", headers: JSON_HEADERS, body: chatBody("after", "q") },
      upstream,
    );
    expect(r.response?.status).toBe(200);
  });
});
