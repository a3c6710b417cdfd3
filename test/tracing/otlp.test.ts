// kvroute's OpenTelemetry traces through a real OTLP/HTTP receiver (otlp-receiver.ts decodes the
// official protos): the SDK started as `kvroute control-plane` starts it, from OTEL_* variables,
// then a control plane with its endpoint picker, a simulated vLLM worker (real KV events) and an
// inline gateway (build/kvroute.wasm in the Node host). An ext_proc request carrying a W3C
// traceparent gets a decision span in that trace; the gateways' syncs and reports, the filter
// decisions their reports carry and the KV-event batches applied each get theirs.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tracedEventSink } from "../../control-plane/src/tracing/kv-batches.ts";
import { startTracing, type Tracing, tracingWanted } from "../../control-plane/src/tracing/sdk.ts";
import type { BatchMeta, KvEvent } from "../../control-plane/src/vocabulary/kv-events.ts";
import { forward } from "../epp/envoy-ext-proc.ts";
import { MODEL, type SimStack, startSimStack } from "../epp/sim-stack.ts";
import { header } from "../epp/stack.ts";
import { until } from "../until.ts";
import { OtlpReceiver } from "./otlp-receiver.ts";

const receiver = new OtlpReceiver();
let tracing: Tracing | null = null;
let s: SimStack;

beforeAll(async () => {
  await receiver.start();
  // The standard variables an operator sets; a short batch delay so spans arrive while we wait.
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
  process.env.OTEL_BSP_SCHEDULE_DELAY = "20";
  process.env.OTEL_SERVICE_NAME = "kvroute-under-test";
  tracing = await startTracing(process.env);
  s = await startSimStack({ workers: 1, ranks: 2, config: { tracing: { kvEventBatchRatio: 1 } } });
  await until("control plane ready", () => s.cp.ready());
  await until("the picker's filter holds the routing cache", () => s.cp.epp?.filter.cacheVersion() != null);
}, 60_000);

afterAll(async () => {
  await s?.close();
  await tracing?.shutdown();
  await receiver.close();
});

async function ask(headers: Array<[string, string]>, user: string) {
  const body = JSON.stringify({
    model: MODEL,
    messages: [
      { role: "system", content: "You are a tracing test. ".repeat(40) },
      { role: "user", content: user },
    ],
    max_tokens: 4,
  });
  return s.client.exchange(
    { path: "/v1/chat/completions", headers: [["content-type", "application/json"], ...headers], body },
    forward,
  );
}

const decisionFor = (requestId: string) =>
  receiver.named("kvroute.epp.decision").find((x) => x.attributes["kvroute.request_id"] === requestId);

describe("OpenTelemetry traces through an OTLP receiver", () => {
  it("tracing stays off without an exporter or endpoint in the environment", async () => {
    expect(tracingWanted({})).toBe(false);
    expect(tracingWanted({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url })).toBe(
      false,
    );
    expect(tracingWanted({ OTEL_SDK_DISABLED: "true", OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url })).toBe(
      false,
    );
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces` })).toBe(true);
    expect(tracingWanted({ OTEL_TRACES_EXPORTER: "otlp" })).toBe(true);
    expect(await startTracing({})).toBeNull();
  });

  it("an endpoint-picker decision continues the gateway's trace (W3C traceparent)", async () => {
    const traceId = randomBytes(16).toString("hex");
    const parentId = randomBytes(8).toString("hex");
    const r = await ask(
      [
        ["traceparent", `00-${traceId}-${parentId}-01`],
        ["x-request-id", "traced-1"],
      ],
      "Which rank?",
    );
    expect(r.response?.status).toBe(200);
    await until("the decision span", () => decisionFor("traced-1") !== undefined);
    const span = decisionFor("traced-1");
    expect(span).toMatchObject({ traceId, parentSpanId: parentId, service: "kvroute-under-test" });
    expect(span?.attributes["kvroute.destination"]).toBe(r.destination);
    expect(span?.attributes["kvroute.rank"]).toBe(header(r.upstreamHeaders, "x-data-parallel-rank"));
    expect(span?.attributes["url.path"]).toBe("/v1/chat/completions");
  });

  it("a malformed or unsampled traceparent does not hand the decision to that trace", async () => {
    const traceId = randomBytes(16).toString("hex");
    const parentId = randomBytes(8).toString("hex");
    // Version ff is invalid by the W3C spec; a trace id of zeros is invalid.
    await ask(
      [
        ["traceparent", `ff-${traceId}-${parentId}-01`],
        ["x-request-id", "bad-version"],
      ],
      "a",
    );
    await ask(
      [
        ["traceparent", `00-${"0".repeat(32)}-${parentId}-01`],
        ["x-request-id", "zero-trace"],
      ],
      "b",
    );
    await ask([["x-request-id", "no-parent"]], "c");
    await until("three decision spans", () =>
      ["bad-version", "zero-trace", "no-parent"].every((id) => decisionFor(id) !== undefined),
    );
    for (const id of ["bad-version", "zero-trace", "no-parent"]) {
      expect(decisionFor(id)?.parentSpanId, id).toBe("");
      expect(decisionFor(id)?.traceId, id).not.toBe(traceId);
    }
    // Sampled flag off: the parent-based sampler records nothing for this decision.
    await ask(
      [
        ["traceparent", `00-${traceId}-${parentId}-00`],
        ["x-request-id", "unsampled"],
      ],
      "d",
    );
    await until("the next decision after it", async () => {
      await ask([["x-request-id", "after-unsampled"]], "e");
      return decisionFor("after-unsampled") !== undefined;
    });
    expect(decisionFor("unsampled")).toBeUndefined();
  });

  it("a span per sync and report each gateway makes, with its id and the answer's status", async () => {
    await until("sync and report spans of both gateways", () => {
      const gateways = (name: string) =>
        new Set(receiver.named(name).map((x) => x.attributes["kvroute.gateway"]));
      return ["kvroute.sync", "kvroute.report"].every(
        (n) => gateways(n).has("inline-gateway") && gateways(n).size >= 2,
      );
    });
    // A sync that brought pages answers 200; a report is accepted with 204.
    for (const [name, status] of [
      ["kvroute.sync", 200],
      ["kvroute.report", 204],
    ] as const) {
      const spans = receiver.named(name).filter((x) => x.attributes["kvroute.gateway"] === "inline-gateway");
      expect(
        spans.some((x) => x.attributes["http.response.status_code"] === status),
        name,
      ).toBe(true);
      for (const span of spans) expect(span.endNs, name).toBeGreaterThanOrEqual(span.startNs);
    }
  });

  it("the embedded filter's decisions in the report stream become spans under their report's span", async () => {
    await until("the decision of request traced-1 from the report stream", () =>
      receiver
        .named("kvroute.filter.decision")
        .some((x) => x.attributes["kvroute.request_id"] === "traced-1"),
    );
    const decision = receiver
      .named("kvroute.filter.decision")
      .find((x) => x.attributes["kvroute.request_id"] === "traced-1");
    const report = receiver.named("kvroute.report").find((x) => x.spanId === decision?.parentSpanId);
    expect(report?.traceId).toBe(decision?.traceId);
    const picked = decisionFor("traced-1")?.attributes["kvroute.destination"];
    const slot = String(decision?.attributes["kvroute.slot"]);
    // The slot the picker chose: the pool's key of that endpoint and the rank it sent.
    const rank = decisionFor("traced-1")?.attributes["kvroute.rank"];
    expect(slot).toBe(`qwen/${picked}#${rank}`);
    expect(decision?.attributes).toMatchObject({ "kvroute.pool": "qwen", "http.response.status_code": 200 });
    expect(["load_only", "prefix_hit", "speculative_hit"]).toContain(decision?.attributes["kvroute.outcome"]);
    expect(Number(decision?.attributes["kvroute.prompt_bytes"])).toBeGreaterThan(0);
  });

  it("a span per KV-event batch applied (ratio 1 here), naming the slot and what it stored", async () => {
    await until("a batch span that stored blocks", () =>
      receiver
        .named("kvroute.kv_events.batch")
        .some((x) => Number(x.attributes["kvroute.stored_blocks"]) > 0),
    );
    const slots = new Set(s.cp.slots.present().map((x) => x.key));
    for (const span of receiver.named("kvroute.kv_events.batch"))
      expect(slots.has(String(span.attributes["kvroute.slot"]))).toBe(true);
    expect(receiver.requests.every((r) => r.path === "/v1/traces")).toBe(true);
  });

  it("a sink without the fast path: one span per batch however many events it delivers, sampled by ratio", async () => {
    const delivered: string[] = [];
    const inner = { event: (_: string, e: KvEvent) => delivered.push(e.type), rankReset() {} };
    const meta = (seq: number): BatchMeta => ({ seq, ts: 0, receivedAt: 0, replayed: false });
    const cleared: KvEvent = { type: "AllBlocksCleared" };
    const removed: KvEvent = {
      type: "BlockRemoved",
      hashes: [1n],
      medium: "GPU",
      groupIdx: null,
      locality: null,
      ownership: null,
    };
    // Draws 0.4 then 0.6 against a ratio of 0.5: the first batch traced, the second not, the third traced.
    const draws = [0.4, 0.6, 0.1];
    const sink = tracedEventSink(inner, 0.5, () => draws.shift() ?? 1);
    const b1 = meta(901);
    sink.event("unit/slot#0", removed, b1);
    sink.event("unit/slot#0", removed, b1);
    sink.event("unit/slot#0", cleared, b1);
    await Promise.resolve(); // the batch ends when its synchronous delivery does
    const b2 = meta(902);
    sink.event("unit/slot#0", removed, b2);
    await Promise.resolve();
    sink.event("unit/slot#0", cleared, meta(903));
    expect(delivered).toEqual([
      "BlockRemoved",
      "BlockRemoved",
      "AllBlocksCleared",
      "BlockRemoved",
      "AllBlocksCleared",
    ]);
    const unit = () =>
      receiver.named("kvroute.kv_events.batch").filter((x) => x.attributes["kvroute.slot"] === "unit/slot#0");
    await until("the two sampled batches", () => unit().length === 2);
    expect(unit().map((x) => [x.attributes["kvroute.seq"], x.attributes["kvroute.events"]])).toEqual([
      [901, 3],
      [903, 1],
    ]);
  });
});
