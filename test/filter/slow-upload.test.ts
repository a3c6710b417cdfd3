// A body that is slow to come. The filter holds the headers until the body is in; without
// allow_on_headers_stop_iteration Envoy withholds the body while headers wait, so the root's tick
// routes such a stream by load after two ticks. Once a configuration's streams were seen getting
// their body while headers waited, the flag is on and a late body is a slow upload: waited for,
// and routed by its model and prefix. Two pools and no default pool: a request routed without
// its body has no model and goes out without a destination, so the difference shows.
import { afterEach, describe, expect, it } from "vitest";
import { headers } from "../../host/host.ts";
import { RecordingSink } from "../host/testing.ts";
import { chatBody, counter, type Stack, startStack, synced, until } from "./harness.ts";

let s: Stack | undefined;
afterEach(async () => {
  await s?.close();
  s = undefined;
});

async function twoPools(allow: boolean): Promise<Stack> {
  const stack = await startStack({
    engines: [[0, 1], [0]],
    threads: 1,
    pools: (e) => [
      { name: "qwen", models: ["qwen3"], endpoints: [{ address: e[0]?.address, ranks: [0, 1] }] },
      { name: "other", models: ["other"], endpoints: [{ address: e[1]?.address, ranks: [0] }] },
    ],
    gateway: { allowOnHeadersStopIteration: allow },
  });
  await synced(stack);
  return stack;
}

/** Resolves after the filter's leader renewed its lease `n` times (one renewal per tick). */
async function ticks(stack: Stack, n: number): Promise<void> {
  const cas = () => stack.gateway.host.sharedData("kvr.lease")?.cas ?? -1;
  for (let seen = 0, last = cas(); seen < n; ) {
    await new Promise((r) => setTimeout(r, 5));
    const now = cas();
    if (now !== last) {
      seen++;
      last = now;
    }
  }
}

/** One request whose body reaches the gateway `lateTicks` filter ticks after its headers. */
async function upload(stack: Stack, lateTicks: number): Promise<{ status: number; destination: string }> {
  const host = stack.gateway.host;
  const thread = host.threads[0];
  if (thread === undefined) throw new Error("no worker thread");
  const sink = new RecordingSink();
  const stream = host.newStream(thread, sink, { sourceAddress: "127.0.0.1", sourcePort: 40000 });
  stream.decodeHeaders(
    headers([
      [":method", "POST"],
      [":path", "/v1/chat/completions"],
      [":authority", "gw"],
      ["content-type", "application/json"],
    ]),
    false,
  );
  if (lateTicks > 0) await ticks(stack, lateTicks);
  // Without the flag the rescue already let the headers through; the body follows them.
  stream.decodeData(new TextEncoder().encode(chatBody("slow upload", "question")), true);
  // Decided now (the body was in the filter), or at a later tick (the rescue).
  await until(() => sink.of("reqHeaders").length + sink.of("respHeaders").length > 0, "a decision");
  const forwarded = sink.of("reqHeaders")[0];
  const status =
    forwarded === undefined
      ? Number(sink.of("respHeaders")[0]?.headers.find(([k]) => k === ":status")?.[1])
      : 0;
  if (forwarded !== undefined) {
    stream.encodeHeaders(headers([[":status", "200"]]), false);
    stream.encodeData(new TextEncoder().encode("ok"), true);
  } else if (!stream.completed) stream.reset("test_end");
  const destination = forwarded?.headers.find(([k]) => k === "x-gateway-destination-endpoint")?.[1] ?? "";
  return { status, destination };
}

describe("a body slow to come", () => {
  it("with allow_on_headers_stop_iteration, once a body was seen reaching waiting headers, a body four ticks late is routed by its model", async () => {
    s = await twoPools(true);
    const qwen = s.engines[0]?.address;
    expect(await upload(s, 0)).toEqual({ status: 0, destination: qwen });
    expect(await upload(s, 4)).toEqual({ status: 0, destination: qwen });
    expect(counter(s, "kvroute.requests.no_body_access")).toBe(0);
  });

  it("without the flag the body never reaches waiting headers: the tick lets it through unrouted (here: no model, two pools, no destination), and keeps doing so", async () => {
    s = await twoPools(false);
    // No model in hand, two pools, no default: fail open, no destination (the route's cluster).
    expect(await upload(s, 4)).toEqual({ status: 0, destination: "" });
    expect(await upload(s, 0)).toEqual({ status: 0, destination: "" });
    expect(counter(s, "kvroute.requests.no_body_access")).toBe(2);
  });
});
