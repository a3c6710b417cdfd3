// The endpoint that served, as the gateway reports it (envoy.lb /
// x-gateway-destination-endpoint-served in the response phase's metadata): the picker hands it
// to the embedded filter as Envoy's `upstream.address`, and the filter moves the request's
// in-flight count and its finished-request report to that slot — when it is one the fallback
// list could have named. A gateway that walks the list therefore loads the control plane's view
// of the endpoint that really works on the request, not of the one that refused it.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ProcessingResponse } from "../../control-plane/src/epp/messages.ts";
import { chatBody, type EppStack, eppSynced, startEppStack, until } from "./stack.ts";

let s: EppStack;
beforeAll(async () => {
  s = await startEppStack({
    engines: [[0], [1], [2]],
    pools: (e) => [
      {
        name: "ext",
        models: ["ext"],
        dpMode: "external",
        endpoints: [0, 1, 2].map((i) => ({ address: e[i]?.address, ranks: [i] })),
      },
    ],
  });
  await until(() => s.cp.ready(), "control plane ready");
  await eppSynced(s.cp);
}, 60_000);
afterAll(async () => s?.close());

const hdr = (pairs: Array<[string, string]>) => ({
  headers: { headers: pairs.map(([key, v]) => ({ key, raw_value: Buffer.from(v) })) },
});
const slotAt = (address: string) => {
  const slot = s.cp.slots.present().find((sl) => sl.address === address);
  if (slot === undefined) throw new Error(`no slot at ${address}`);
  return slot;
};
const inflight = (address: string) => s.cp.load.get(slotAt(address).id).inflight;

interface Status {
  recentDecisions: Array<{ requestId: string; slotKey: string | null; status: number }>;
}
async function finishedSlot(requestId: string): Promise<string | null> {
  let key: string | null = null;
  await until(async () => {
    const st = (await (await fetch(`${s.cp.url}/v1/status`)).json()) as Status;
    key = st.recentDecisions.find((d) => d.requestId === requestId)?.slotKey ?? null;
    return key !== null;
  }, `finished report of ${requestId}`);
  return key;
}

/**
 * One request through the picker, driven by hand like Envoy in FULL_DUPLEX_STREAMED: the request
 * phase, then response headers reporting `served(list)` as the endpoint that served; the
 * response body is held until `finish` is called, so the test sees the request in flight.
 */
async function request(served: (list: string[]) => string) {
  const requestId = randomUUID();
  const call = s.client.openRaw();
  const answers: ProcessingResponse[] = [];
  call.on("data", (m: ProcessingResponse) => answers.push(m));
  call.on("error", () => {});
  const ended = new Promise<void>((r) => call.on("end", () => r()));
  call.write({
    request_headers: hdr([
      [":method", "POST"],
      [":path", "/v1/chat/completions"],
      ["content-type", "application/json"],
      ["x-request-id", requestId],
    ]),
  });
  call.write({
    request_body: { body: Buffer.from(chatBody("served", `q ${requestId}`, "ext")), end_of_stream: true },
  });
  await until(
    () =>
      answers.some((a) => a.request_body?.response?.body_mutation?.streamed_response?.end_of_stream === true),
    "request phase answered",
  );
  const dest =
    answers[0]?.dynamic_metadata?.fields?.["envoy.lb"]?.structValue?.fields?.[
      "x-gateway-destination-endpoint"
    ]?.stringValue ?? "";
  const list = dest.split(",");
  expect(list).toHaveLength(3);
  const meta = {
    metadata_context: {
      filter_metadata: {
        "envoy.lb": { fields: { "x-gateway-destination-endpoint-served": { stringValue: served(list) } } },
      },
    },
  };
  call.write({ response_headers: hdr([[":status", "200"]]), ...meta });
  await until(() => answers.some((a) => a.response_headers !== undefined), "response headers answered");
  return {
    requestId,
    list,
    async finish() {
      call.write({ response_body: { body: Buffer.from('{"ok":true}'), end_of_stream: true }, ...meta });
      await until(() => answers.some((a) => a.response_body !== undefined), "response body answered");
      call.end();
      await ended;
    },
  };
}

describe("the served endpoint takes the request's accounting", () => {
  it("a retry down the list: in flight and the finished report land on the endpoint that served", async () => {
    const r = await request((list) => list[1] as string);
    const [first, second, third] = r.list as [string, string, string];
    await until(() => inflight(second) === 1, "in flight on the served endpoint");
    expect(inflight(first)).toBe(0);
    expect(inflight(third)).toBe(0);
    await r.finish();
    expect(await finishedSlot(r.requestId)).toBe(slotAt(second).key);
    await until(() => inflight(second) === 0, "in flight released on the served endpoint");
    expect(inflight(first)).toBe(0);
  });

  it("the last of the list serves: the same", async () => {
    const r = await request((list) => list[2] as string);
    await until(() => inflight(r.list[2] as string) === 1, "in flight on the last endpoint");
    expect(inflight(r.list[0] as string)).toBe(0);
    await r.finish();
    expect(await finishedSlot(r.requestId)).toBe(slotAt(r.list[2] as string).key);
  });

  it("the first of the list serves: nothing moves", async () => {
    const r = await request((list) => list[0] as string);
    await until(() => inflight(r.list[0] as string) === 1, "in flight on the pick");
    await r.finish();
    expect(await finishedSlot(r.requestId)).toBe(slotAt(r.list[0] as string).key);
  });

  it("a served endpoint that is no slot of the pool (another port, a prefix, a suffix, no address) leaves it on the pick", async () => {
    for (const bogus of [
      // Address-shaped: the filter sees them as upstream.address, finds no slot, counts them.
      (l: string[]) => `${(l[1] as string).split(":")[0]}:1`,
      (l: string[]) => (l[1] as string).slice(0, -1),
      // Not an address as Envoy writes one (a port of six digits, text): never passed on.
      (l: string[]) => `${l[1]}0`,
      () => "not an address",
    ]) {
      const r = await request(bogus);
      await until(() => inflight(r.list[0] as string) === 1, "in flight on the pick");
      expect(inflight(r.list[1] as string)).toBe(0);
      await r.finish();
      expect(await finishedSlot(r.requestId)).toBe(slotAt(r.list[0] as string).key);
    }
    const unknown = s.cp.epp?.filter.host.counter("kvroute.requests.served_unknown");
    expect(unknown).toBe(2n);
    expect(s.cp.epp?.filter.host.counter("kvroute.requests.served_elsewhere")).toBe(2n);
  });
});
