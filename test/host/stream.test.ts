// HTTP stream callbacks in Envoy's order and with Envoy's return-code mapping, header-map
// lifetime, body buffering, buffer limit, local replies and continue_stream — driven step by step
// the way Envoy's connection manager drives a filter.
import { afterEach, describe, expect, it } from "vitest";
import { createHost, type Host, headers } from "../../host/host.ts";
import type { HttpStream } from "../../host/stream.ts";
import { callbacks, moduleFile, RecordingSink, settle, waitFor } from "./testing.ts";

let host: Host | null = null;
afterEach(() => {
  host?.close();
  host = null;
});

function setup(
  pluginConfig: string,
  extra: { bufferLimitBytes?: number; allowOnHeadersStopIteration?: boolean } = {},
) {
  host = createHost({ wasm: moduleFile("lifecycle"), pluginConfig, mainThread: false, ...extra });
  const t = host.threads[0];
  if (!t) throw new Error("no thread");
  const sink = new RecordingSink();
  const stream: HttpStream = host.newStream(t, sink);
  const before = callbacks(host.logs()).length;
  const cbs = () => callbacks((host as Host).logs()).slice(before);
  return { host, t, sink, stream, cbs };
}

const POST = () =>
  headers([
    [":method", "POST"],
    [":path", "/v1/chat"],
    [":authority", "gw"],
  ]);

describe("callback order and header lifetime", () => {
  it("runs create → request → response → on_log → on_done → on_delete; maps die after Continue", () => {
    const { stream, sink, cbs } = setup("");
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("abc"), true);
    stream.encodeHeaders(headers([[":status", "200"]]), false);
    stream.encodeData(Buffer.from("out"), true);
    expect(cbs()).toEqual([
      "create 2 1",
      "req_headers 2 3 0 path=0:/v1/chat plugincfg=1",
      // request headers were continued: reading them now is BadArgument (2)
      "req_body 2 3 1 hdr=2 buf=0:3",
      // response headers alive (add Ok), request headers gone: BadArgument / empty pairs
      "resp_headers 2 1 0 status=0:200 reqhdr=2 add=0 addreq=2 reqpairs=0",
      "resp_body 2 3 1 buf=0:out",
      // access-log phase: final maps readable, not writable
      "log 2 path=0:/v1/chat status=0:200 write=2",
      "done 2 path=2",
      "delete 2",
    ]);
    expect(sink.of("reqData")).toEqual([{ kind: "reqData", data: "abc", eos: true }]);
    expect(sink.of("respHeaders")[0]?.headers).toContainEqual(["x-wasm-thread-ctx", "2"]);
    expect(sink.events.at(-1)).toEqual({ kind: "done" });
  });

  it("gives each stream a new context id and never reuses one", () => {
    const { host, t, cbs } = setup("");
    for (let k = 0; k < 3; k++) {
      const s = host.newStream(t, new RecordingSink());
      s.decodeHeaders(POST(), true);
      s.encodeHeaders(headers([[":status", "204"]]), true);
    }
    // setup() already allocated context 2 for its own stream.
    expect(cbs().filter((c) => c.startsWith("create"))).toEqual(["create 3 1", "create 4 1", "create 5 1"]);
  });

  it("delivers request and response trailers", () => {
    const { stream, sink, cbs } = setup("");
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("x"), false);
    stream.decodeTrailers(headers([["grpc-foo", "1"]]));
    stream.encodeHeaders(headers([[":status", "200"]]), false);
    stream.encodeTrailers(headers([["grpc-status", "0"]]));
    expect(cbs().filter((c) => c.includes("trailers"))).toEqual(["req_trailers 2 1", "resp_trailers 2 1"]);
    expect(sink.of("reqTrailers")).toHaveLength(1);
    expect(sink.of("respTrailers")).toHaveLength(1);
  });
});

describe("body buffering", () => {
  it("StopIterationAndBuffer: later chunks are appended and size is cumulative; one forward", () => {
    const { stream, sink, cbs } = setup("reqBody=1,1,0");
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("aaaaa"), false);
    stream.decodeData(Buffer.from("bbbbb"), false);
    expect(sink.of("reqData")).toHaveLength(0);
    stream.decodeData(Buffer.from("ccccc"), true);
    expect(cbs().filter((c) => c.startsWith("req_body"))).toEqual([
      "req_body 2 5 0 hdr=2 buf=0:5",
      "req_body 2 10 0 hdr=2 buf=0:10",
      "req_body 2 15 1 hdr=2 buf=0:15",
    ]);
    expect(sink.of("reqData")).toEqual([{ kind: "reqData", data: "aaaaabbbbbccccc", eos: true }]);
  });

  it("set_buffer_bytes replaces the buffered body that goes upstream", () => {
    const { stream, sink } = setup("reqBody=1,0;rewriteBody=1");
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("part1-"), false);
    stream.decodeData(Buffer.from("part2"), true);
    expect(sink.of("reqData")).toEqual([{ kind: "reqData", data: "rewritten:part1-part2", eos: true }]);
  });

  it("over the buffer limit → 413 local reply, response callbacks run for it, nothing goes upstream", () => {
    const { stream, sink, cbs } = setup("reqBody=1", { bufferLimitBytes: 8 });
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("12345"), false);
    stream.decodeData(Buffer.from("67890"), false);
    expect(sink.of("reqData")).toHaveLength(0);
    const rh = sink.of("respHeaders")[0];
    expect(rh?.headers).toContainEqual([":status", "413"]);
    expect(sink.of("respData")).toEqual([{ kind: "respData", data: "Payload Too Large", eos: true }]);
    expect(cbs().slice(-5)).toEqual([
      "resp_headers 2 3 0 status=0:413 reqhdr=2 add=0 addreq=2 reqpairs=0",
      "resp_body 2 17 1 buf=0:Payload Too Large",
      "log 2 path=0:/v1/chat status=0:413 write=2",
      "done 2 path=2",
      "delete 2",
    ]);
    expect(stream.info.responseCodeDetails).toBe("request_payload_too_large");
  });

  it("headers returning 1 become StopAllIterationAndWatermark (no 413); 3 buffers with the limit", () => {
    const a = setup("reqHeaders=1", { bufferLimitBytes: 4 });
    a.stream.decodeHeaders(POST(), false);
    a.stream.decodeData(Buffer.from("0123456789"), true);
    expect(a.sink.of("respHeaders")).toHaveLength(0);
    a.host.close();
    const b = setup("reqHeaders=3", { bufferLimitBytes: 4 });
    b.stream.decodeHeaders(POST(), false);
    b.stream.decodeData(Buffer.from("0123456789"), true);
    expect(b.sink.of("respHeaders")[0]?.headers).toContainEqual([":status", "413"]);
  });
});

/** Records Envoy's readDisable calls too (flow control). */
class FlowSink extends RecordingSink {
  readonly flow: boolean[] = [];
  readDisable(disabled: boolean) {
    this.flow.push(disabled);
  }
}

function flowSetup(pluginConfig: string, bufferLimitBytes: number, allowOnHeadersStopIteration = false) {
  host = createHost({
    wasm: moduleFile("lifecycle"),
    pluginConfig,
    mainThread: false,
    bufferLimitBytes,
    allowOnHeadersStopIteration,
  });
  const t = host.threads[0] as NonNullable<(typeof host.threads)[0]>;
  const sink = new FlowSink();
  return { host, sink, stream: host.newStream(t, sink) };
}

describe("the listener buffer limit (FilterManager watermark buffer)", () => {
  it("buffer mode: 413 only once the buffered body passes the limit (the limit itself fits)", () => {
    const at = flowSetup("reqBody=1", 8);
    at.stream.decodeHeaders(POST(), false);
    at.stream.decodeData(Buffer.from("1234"), false);
    at.stream.decodeData(Buffer.from("5678"), false);
    expect(at.sink.of("respHeaders")).toHaveLength(0);
    at.stream.decodeData(Buffer.from("9"), false);
    expect(at.sink.of("respHeaders")[0]?.headers).toContainEqual([":status", "413"]);
    expect(at.sink.flow).toEqual([]);
    expect(at.stream.info.responseCodeDetails).toBe("request_payload_too_large");
  });

  it("headers StopAllIterationAndWatermark: past the limit the client is read-disabled, never a 413; draining re-enables it", async () => {
    const { stream, sink } = flowSetup("reqHeaders=1;tick=10", 4);
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("0123"), false);
    expect(sink.flow).toEqual([]); // exactly at the limit
    stream.decodeData(Buffer.from("4"), false);
    expect(sink.flow).toEqual([true]);
    stream.decodeData(Buffer.from("56789"), true);
    expect(sink.flow).toEqual([true]);
    expect(sink.of("respHeaders")).toHaveLength(0);
    // The filter continues on its tick: the buffered body moves on and the client may send again.
    await waitFor(() => sink.of("reqData").length > 0);
    expect(sink.flow).toEqual([true, false]);
    expect(
      sink
        .of("reqData")
        .map((e) => e.data)
        .join(""),
    ).toBe("0123456789");
  });

  it("body StopIterationAndWatermark is watermark mode too: backpressure, not 413", () => {
    const { stream, sink } = flowSetup("reqBody=2", 4);
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("0123456789"), false);
    expect(sink.flow).toEqual([true]);
    expect(sink.of("respHeaders")).toHaveLength(0);
  });

  it("allow_on_headers_stop_iteration + StopIterationAndBuffer (kvroute's pattern) answers 413 past the limit", () => {
    const { stream, sink } = flowSetup("reqHeaders=1;reqBody=1", 8, true);
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("12345678"), false);
    expect(sink.of("respHeaders")).toHaveLength(0);
    stream.decodeData(Buffer.from("9"), false);
    expect(sink.of("respHeaders")[0]?.headers).toContainEqual([":status", "413"]);
    expect(sink.of("reqHeaders")).toHaveLength(0);
  });
});

describe("local reply headers (Http::Utility::sendLocalReply)", () => {
  // The test module appends x-wasm-thread-ctx in on_response_headers: the reply passes the filter.
  const sent = (sink: RecordingSink) =>
    (sink.of("respHeaders")[0]?.headers ?? []).filter(([k]) => k !== "x-wasm-thread-ctx");

  it("come as :status, the filter's headers in order, content-length, then content-type text/plain", () => {
    const { stream, sink } = setup("local=req_headers");
    stream.decodeHeaders(POST(), false);
    expect(sink.of("respHeaders")[0]?.headers.at(-1)?.[0]).toBe("x-wasm-thread-ctx");
    expect(sent(sink)).toEqual([
      [":status", "403"],
      ["x-wasm", "local"],
      ["content-length", "14"],
      ["content-type", "text/plain"],
    ]);
  });

  it("keep a content-type the filter gave; without a body carry neither content-length nor content-type", () => {
    const a = setup("");
    a.stream.decodeHeaders(POST(), false);
    a.stream.localReply(400, Buffer.from('{"e":1}'), [["content-type", "application/json"]], "x");
    expect(sent(a.sink)).toEqual([
      [":status", "400"],
      ["content-type", "application/json"],
      ["content-length", "7"],
    ]);
    a.host.close();
    const b = setup("");
    b.stream.decodeHeaders(POST(), false);
    b.stream.localReply(
      503,
      new Uint8Array(0),
      [
        ["content-type", "application/json"],
        ["x-a", "1"],
      ],
      "y",
    );
    expect(sent(b.sink)).toEqual([
      [":status", "503"],
      ["x-a", "1"],
    ]);
    expect(b.sink.of("respHeaders")[0]?.eos).toBe(true);
    expect(b.sink.of("respData")).toEqual([]);
  });
});

describe("allow_on_headers_stop_iteration (Envoy >= 1.35)", () => {
  it("keeps a 1 from request headers as StopIteration: the body reaches the filter while headers wait", () => {
    const { stream, sink, cbs } = setup("reqHeaders=1;reqBody=1,0", { allowOnHeadersStopIteration: true });
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("01234"), false);
    expect(sink.of("reqHeaders")).toHaveLength(0);
    stream.decodeData(Buffer.from("56789"), true);
    // Continue from the body: the held headers go first, then the whole buffered body.
    expect(sink.of("reqHeaders")).toHaveLength(1);
    expect(sink.of("reqData")).toEqual([{ kind: "reqData", data: "0123456789", eos: true }]);
    expect(
      cbs()
        .filter((c) => c.startsWith("req_body"))
        .map((c) => c.split(" ").slice(0, 4).join(" ")),
    ).toEqual(["req_body 2 5 0", "req_body 2 10 1"]);
  });

  it("without it, the same filter never sees the body until it continues the stream", () => {
    const { stream, sink, cbs } = setup("reqHeaders=1;reqBody=1,0");
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("0123456789"), true);
    expect(sink.of("reqHeaders")).toHaveLength(0);
    expect(cbs().filter((c) => c.startsWith("req_body"))).toEqual([]);
  });
});

describe("response buffering limit", () => {
  it("before response headers went out → 500 local reply; after → the stream is reset", () => {
    const a = setup("respHeaders=3", { bufferLimitBytes: 4 });
    a.stream.decodeHeaders(POST(), true);
    a.stream.encodeHeaders(headers([[":status", "200"]]), false);
    a.stream.encodeData(Buffer.from("0123456789"), true);
    expect(a.sink.of("respHeaders").map((e) => e.headers[0])).toEqual([[":status", "500"]]);
    expect(a.stream.info.responseCodeDetails).toBe("response_payload_too_large");
    a.host.close();
    const b = setup("respBody=1", { bufferLimitBytes: 4 });
    b.stream.decodeHeaders(POST(), true);
    b.stream.encodeHeaders(headers([[":status", "200"]]), false);
    b.stream.encodeData(Buffer.from("0123456789"), false);
    expect(b.sink.of("respHeaders").map((e) => e.headers[0])).toEqual([[":status", "200"]]);
    expect(b.sink.of("reset")).toEqual([{ kind: "reset", reason: "response_payload_too_large" }]);
    expect(b.cbs().slice(-3)).toEqual([
      "log 2 path=0:/v1/chat status=0:200 write=2",
      "done 2 path=2",
      "delete 2",
    ]);
  });
});

describe("continue_stream and local replies", () => {
  it("a stopped request resumes from the root context (tick) via set_effective_context", async () => {
    const { stream, sink, cbs } = setup("reqHeaders=1;tick=10;tickWrite=1");
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("later"), true);
    expect(sink.of("reqHeaders")).toHaveLength(0);
    await waitFor(() => sink.of("reqHeaders").length > 0);
    expect(cbs()).toContain("tick resume 2 eff=0 cont=0 add=0");
    // Held headers were still writable from the root (effective context); the write cleared the route cache.
    expect(sink.of("reqHeaders")[0]?.headers).toContainEqual(["x-added-on-tick", "yes"]);
    expect(stream.info.routeCacheClears).toBe(1);
    // StopAllIteration: the body buffered meanwhile then passes through the filter.
    await waitFor(() => sink.of("reqData").length > 0);
    expect(cbs().filter((c) => c.startsWith("req_body"))).toEqual(["req_body 2 5 1 hdr=2 buf=0:5"]);
    expect(sink.of("reqData")).toEqual([{ kind: "reqData", data: "later", eos: true }]);
  });

  it("send_local_response takes effect when the callback returns; the request never goes upstream", () => {
    const { stream, sink, cbs } = setup("local=req_headers");
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("ignored"), true);
    expect(sink.of("reqHeaders")).toHaveLength(0);
    expect(sink.of("reqData")).toHaveLength(0);
    const h = sink.of("respHeaders")[0]?.headers ?? [];
    expect(h).toContainEqual([":status", "403"]);
    expect(h).toContainEqual(["x-wasm", "local"]);
    expect(sink.of("respData")[0]?.data).toBe("denied by wasm");
    expect(cbs()).toEqual([
      "create 2 1",
      "req_headers 2 3 0 path=0:/v1/chat plugincfg=1 local=0",
      "resp_headers 2 4 0 status=0:403 reqhdr=2 add=0 addreq=2 reqpairs=0",
      "resp_body 2 14 1 buf=0:denied by wasm",
      "log 2 path=0:/v1/chat status=0:403 write=2",
      "done 2 path=2",
      "delete 2",
    ]);
    expect(stream.info.responseCodeDetails).toBe("test_module_reply");
  });

  it("a local reply from the last body chunk wins over the Continue the callback returned", () => {
    const { stream, sink } = setup("local=req_body");
    stream.decodeHeaders(POST(), false);
    stream.decodeData(Buffer.from("x"), true);
    expect(sink.of("reqData")).toHaveLength(0);
    expect(sink.of("respHeaders")[0]?.headers).toContainEqual([":status", "401"]);
  });

  it("a stopped response resumes on continue_stream(Response)", async () => {
    const { stream, sink } = setup("respHeaders=1;tick=10;resumeResponse=1");
    stream.decodeHeaders(POST(), true);
    stream.encodeHeaders(headers([[":status", "200"]]), false);
    stream.encodeData(Buffer.from("held"), true);
    expect(sink.of("respHeaders")).toHaveLength(0);
    await waitFor(() => sink.of("done").length > 0);
    expect(
      sink
        .of("respData")
        .map((d) => d.data)
        .join(""),
    ).toBe("held");
    await settle();
  });
});
