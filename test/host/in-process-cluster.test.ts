// proxy_http_call to a cluster served in-process (HostOptions.clusterHandlers): the handler sees
// the call, answers when it likes, and the answer reaches the calling root asynchronously, as a
// socket's would.
import { afterEach, describe, expect, it } from "vitest";
import type { InProcessAnswer, InProcessCall } from "../../host/core.ts";
import { createHost, type Host, headers } from "../../host/host.ts";
import type { WasmThread } from "../../host/thread.ts";
import { moduleFile, RecordingSink } from "./testing.ts";

let host: Host | null = null;
afterEach(() => {
  host?.close();
  host = null;
});

/** Starts the abi module's http-call probe on worker 0 (it calls cluster `x-cluster`). */
function callFrom(h: Host, cluster: string): { line: string; sink: RecordingSink } {
  const sink = new RecordingSink();
  const s = h.newStream(h.threads[0] as WasmThread, sink);
  s.decodeHeaders(
    headers([
      [":method", "GET"],
      [":path", "/probe"],
      [":authority", "gw"],
      ["x-probe", "httpcall"],
      ["x-cluster", cluster],
    ]),
    true,
  );
  const line = h.logs((m) => m.startsWith("probe:httpcall ")).at(-1) ?? "";
  return { line: line.slice("probe:httpcall ".length), sink };
}

const drain = (h: Host) => {
  for (const t of h.vms()) while (t.runOneTask());
};

describe("in-process cluster handlers", () => {
  it("hand the call to the handler and deliver its later answer to the calling root", () => {
    const calls: InProcessCall[] = [];
    const held: { respond?: (a: InProcessAnswer) => void } = {};
    host = createHost({
      wasm: moduleFile("abi"),
      clusterHandlers: {
        sim: (call, respond) => {
          calls.push(call);
          held.respond = respond;
        },
      },
    });
    const h = host;
    const { line, sink } = callFrom(h, "sim");
    expect(line).toBe("call=0 token=4 missing=2 unknown=2");
    expect(calls).toHaveLength(1);
    expect(calls[0]?.headers).toContainEqual([":path", "/side?x=1"]);
    expect(calls[0]?.headers).toContainEqual([":authority", "side.local"]);
    expect(Buffer.from(calls[0]?.body ?? []).toString()).toBe("ping");
    // Nothing arrives until the handler answers, and not inline when it does.
    drain(h);
    expect(h.logs((m) => m.startsWith("call_response"))).toHaveLength(0);
    held.respond?.({ headers: [[":status", "201"]], body: Buffer.from("from sim"), trailers: [] });
    expect(h.logs((m) => m.startsWith("call_response"))).toHaveLength(0);
    drain(h);
    expect(h.logs((m) => m.startsWith("call_response"))[0]).toMatch(
      /^call_response root=1 token=4 nh=1 bs=8 nt=0 status=0:201 body=0:from sim /,
    );
    expect(sink.of("reqHeaders")[0]?.headers).toContainEqual(["x-call-status", "201"]);
  });

  it("a null answer is a reset (sizes 0, get_status 11); a second answer is ignored", () => {
    const held: { respond?: (a: InProcessAnswer) => void } = {};
    host = createHost({
      wasm: moduleFile("abi"),
      clusterHandlers: {
        sim: (_c, r) => {
          held.respond = r;
        },
      },
    });
    const h = host;
    callFrom(h, "sim");
    held.respond?.(null);
    held.respond?.(null);
    drain(h);
    const lines = h.logs((m) => m.startsWith("call_response"));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("nh=0 bs=0 nt=0 status=2: body=1: get_status=0:11:reset");
  });

  it("an unknown cluster is still BadArgument, and a handler wins over an address of the same name", () => {
    let called = 0;
    host = createHost({
      wasm: moduleFile("abi"),
      clusters: { sim: "127.0.0.1:9" },
      clusterHandlers: { sim: () => called++ },
    });
    expect(callFrom(host, "nowhere").line).toMatch(/^call=2 /);
    expect(callFrom(host, "sim").line).toMatch(/^call=0 /);
    expect(called).toBe(1);
  });
});
