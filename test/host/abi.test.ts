// The rest of the ABI with exact result codes: shared data (CAS), shared queues, properties,
// metrics, logging, time, WASI, proxy_http_call to real loopback servers.
import { afterEach, describe, expect, it } from "vitest";
import type { Pairs } from "../../host/abi/constants.ts";
import { createHost, type Host, type HostOptions, headers } from "../../host/host.ts";
import type { WasmThread } from "../../host/thread.ts";
import { UpstreamCluster } from "../../host/upstream-cluster.ts";
import { moduleFile, RecordingSink, settle, startUpstream, type Upstream, waitFor } from "./testing.ts";

let host: Host | null = null;
const upstreams: Upstream[] = [];
afterEach(async () => {
  host?.close();
  host = null;
  for (const u of upstreams.splice(0)) await u.close();
});

function make(o: Partial<HostOptions> = {}): Host {
  host = createHost({ wasm: moduleFile("abi"), threads: 2, ...o });
  return host;
}

function probe(
  h: Host,
  t: WasmThread,
  name: string,
  extra: Pairs = [],
): { line: string; sink: RecordingSink } {
  const sink = new RecordingSink();
  const s = h.newStream(t, sink, { sourceAddress: "10.1.2.3", sourcePort: 5555, destinationPort: 8080 });
  s.decodeHeaders(
    headers([
      [":method", "GET"],
      [":path", "/probe?q=1"],
      [":authority", "gw"],
      ["x-probe", name],
      ["x-request-id", "rid-1"],
      ...extra,
    ]),
    true,
  );
  const prefix = `probe:${name} `;
  const line = h.logs((m) => m.startsWith(prefix)).at(-1) ?? "";
  return { line: line.slice(prefix.length), sink };
}

const w = (h: Host, k: number): WasmThread => h.threads[k] as WasmThread;

describe("shared data", () => {
  it("follows Envoy's CAS rules", () => {
    const h = make();
    const { line } = probe(h, w(h, 0), "shared", [["x-key", "a"]]);
    expect(line).toBe("miss=1 set0=0 get=0:v1 bad=8 ok=0 get2=v2 casgrew=1 stale=8 uncond=0 final=v4");
  });

  it("is one store for all threads of a vm_id, with one global cas counter", () => {
    const h = make({ vmId: "vm-a" });
    probe(h, w(h, 0), "shared", [["x-key", "x"]]);
    const first = h.sharedData("k-x");
    probe(h, w(h, 1), "shared", [["x-key", "y"]]);
    const second = h.sharedData("k-y");
    expect(Buffer.from(first?.value ?? []).toString()).toBe("v4");
    expect(second?.cas).toBeGreaterThan(first?.cas ?? Number.POSITIVE_INFINITY);
    // Shared data has no delete: keys only accumulate.
    expect(h.sharedDataKeys().sort()).toEqual(["k-x", "k-y"]);
  });
});

describe("shared queues", () => {
  it("one token per name; on_queue_ready goes later to the last registrant's root context", async () => {
    const h = make();
    // Start order: main, worker_0, worker_1 — each registered "probe-queue" in on_configure.
    const regs = h.core.logs
      .filter((r) => r.message.startsWith("cfg:queue"))
      .map((r) => `${r.thread} ${r.message}`);
    expect(regs).toEqual([
      "main cfg:queue 0 1 root=1",
      "worker_0 cfg:queue 0 1 root=1",
      "worker_1 cfg:queue 0 1 root=1",
    ]);
    const { line } = probe(h, w(h, 0), "queue", [["x-item", "one"]]);
    expect(line).toBe("resolve=0 same=1 missing=1 enq=0 enq_bad=1 deq_bad=1");
    // Not delivered inline.
    expect(h.logs((m) => m.startsWith("queue_ready"))).toEqual([]);
    await waitFor(() => h.logs((m) => m.startsWith("queue_ready")).length > 0);
    const ready = h.core.logs.filter((r) => r.message.startsWith("queue_ready"));
    expect(ready.map((r) => [r.thread, r.message])).toEqual([
      ["worker_1", "queue_ready root=1 token=1 deq=0:item-one again=7"],
    ]);
  });
});

describe("shared queues registered from a stream context", () => {
  it("deliver on_queue_ready to that stream's root context", async () => {
    const h = make({ threads: 1, mainThread: false });
    const { line } = probe(h, w(h, 0), "qreg");
    expect(line).toBe("register=0 enq=0");
    await waitFor(() => h.logs((m) => m.startsWith("queue_ready")).length > 0);
    expect(h.logs((m) => m.startsWith("queue_ready"))[0]).toMatch(
      /^queue_ready root=1 token=\d+ deq=0:from-stream again=7$/,
    );
  });
});

describe("properties", () => {
  it("resolves NUL-separated paths; ints are 8-byte little-endian; unknown → NotFound", () => {
    const h = make({
      pluginName: "kvroute",
      rootId: "kvroute_root",
      vmId: "kvroute_vm",
      node: { id: "envoy-1", metadata: { zone: "z1" } },
    });
    const { line } = probe(h, w(h, 0), "props");
    expect(line).toBe(
      "path=/probe?q=1 method=GET hdr=props id=rid-1 proto=HTTP/1.1 src=10.1.2.3:5555 srcport=i5555 dst=127.0.0.1:8080 name=kvroute root=kvroute_root vm=kvroute_vm node=envoy-1 meta=z1 nope=E1 set=0 get=my-value",
    );
  });
});

describe("metrics", () => {
  it("uses Envoy's ids and rules, and is process-wide by name", () => {
    const h = make();
    const a = probe(h, w(h, 0), "metrics").line;
    expect(a).toBe(
      "ids=4,5,6 bad=1002 inc=0 inc0=2 incneg=2 ctr=2 gauge_inc=0 gauge_dec=0 gauge=3 hist_rec=0 hist_inc=2 hist_get=E2 unknown=1 gauge_set=0 gauge2=100",
    );
    // A second thread defines the same names: its own ids, the same stats.
    const b = probe(h, w(h, 1), "metrics").line;
    expect(b).toContain("ids=4,5,6");
    expect(b).toContain("ctr=4");
    expect(h.counter("probe_requests")).toBe(4n);
    expect(h.gauge("probe_gauge")).toBe(100n);
    expect(h.histogram("probe_hist")?.count).toBe(2);
    expect(h.stats()).toContain("wasmcustom.probe_requests: 4");
    expect(h.core.stats.prometheus()).toContain("probe_requests{} 4");
    // Defining a name again on the same VM returns the same id.
    expect(probe(h, w(h, 0), "metrics").line).toContain("ids=4,5,6");
  });
});

describe("logging, time, WASI, argument checks", () => {
  it("returns what Envoy returns", () => {
    const h = make({ vmConfig: "the-vm-config", logLevel: 1 });
    const { line } = probe(h, w(h, 0), "misc");
    expect(line).toBe(
      [
        "loglevel=0:1",
        "badlog=2",
        "time=0:sane",
        "random=0",
        "random_big=28",
        "clock=0",
        "clock_bad=58",
        "eff_bad=2",
        "foreign=1",
        "done=1",
        "hm_bad=2",
        // byteSize of the request headers: sum of key and value lengths
        "hm_size=0:65",
        "buf_bad=2",
        "cs_bad=2",
        "cs_up=12",
        "vmcfg=0:the-vm-config",
        "plugincfg=1",
        "calldata=0",
        "callbody=1",
        "fd_write=0:20",
        "fd_bad=8",
      ].join(" "),
    );
    const fd = h.core.logs.find((r) => r.message === "hello from fd_write");
    expect(fd?.level).toBe(2); // stdout → info, trailing newline dropped
  });
});

describe("proxy_http_call", () => {
  it("calls a loopback cluster and answers the root context; headers/body readable there", async () => {
    const side = await startUpstream((req, body, res) => {
      res.writeHead(201, { "x-side": "yes" });
      res.end(`got ${req.method} ${req.url} ${req.headers.host} ${req.headers["x-from"]} ${body}`);
    });
    upstreams.push(side);
    const h = make({ clusters: { side: side.address } });
    const { line, sink } = probe(h, w(h, 0), "httpcall", [["x-cluster", "side"]]);
    // Tokens are the VM's callout counter: 4, 8, … (WasmBase::nextHttpCallId).
    expect(line).toBe("call=0 token=4 missing=2 unknown=2");
    expect(sink.of("reqHeaders")).toHaveLength(0); // stopped until the answer
    await waitFor(() => sink.of("reqHeaders").length > 0);
    const resp = h.core.logs.find((r) => r.message.startsWith("call_response"));
    expect(resp?.thread).toBe("worker_0");
    expect(resp?.message).toMatch(
      /^call_response root=1 token=4 nh=\d+ bs=39 nt=0 status=0:201 body=0:got POST \/side\?x=1 side.local wasm ping get_status=0:0: eff=0 add=0 cont=0$/,
    );
    expect(sink.of("reqHeaders")[0]?.headers).toContainEqual(["x-call-status", "201"]);
    expect(side.requests[0]?.headers["content-length"]).toBe("4");
  });

  it("a reset after the response started → sizes 0 and get_status (11, reset)", async () => {
    const side = await startUpstream((_req, _body, res) => {
      res.writeHead(200, { "content-length": "100" });
      res.write("partial");
      setTimeout(() => res.socket?.destroy(), 10);
    });
    upstreams.push(side);
    const h = make({ clusters: { side: side.address } });
    probe(h, w(h, 0), "httpcall", [["x-cluster", "side"]]);
    await waitFor(() => h.logs((m) => m.startsWith("call_response")).length > 0);
    expect(h.logs((m) => m.startsWith("call_response"))[0]).toContain(
      "nh=0 bs=0 nt=0 status=2: body=1: get_status=0:11:reset",
    );
    // Envoy never resets status_code_ on success: the next good answer still reports 11, no message.
    const good = await startUpstream();
    upstreams.push(good);
    h.core.clusters.set("good", new UpstreamCluster("good", { host: "127.0.0.1", port: good.port }));
    probe(h, w(h, 0), "httpcall", [["x-cluster", "good"]]);
    await waitFor(() => h.logs((m) => m.startsWith("call_response")).length > 1);
    expect(h.logs((m) => m.startsWith("call_response"))[1]).toContain(
      "status=0:200 body=0:echo:ping get_status=0:11: ",
    );
  });

  it("a refused connection is the router's 503; a timeout is 504", async () => {
    const dead = await startUpstream();
    const deadAddr = dead.address;
    await dead.close();
    const slow = await startUpstream((_q, _b, res) => setTimeout(() => res.end("late"), 500));
    upstreams.push(slow);
    const h = make({ clusters: { dead: deadAddr, slow: slow.address } });
    probe(h, w(h, 0), "httpcall", [["x-cluster", "dead"]]);
    probe(h, w(h, 1), "httpcall", [
      ["x-cluster", "slow"],
      ["x-timeout", "50"],
    ]);
    await waitFor(() => h.logs((m) => m.startsWith("call_response")).length === 2);
    const lines = h.logs((m) => m.startsWith("call_response"));
    expect(lines.find((l) => l.includes("status=0:503"))).toMatch(/body=0:upstream connect error/);
    expect(lines.find((l) => l.includes("status=0:504"))).toContain(
      "body=0:upstream request timeout get_status=0:0:",
    );
    await settle(10);
  });
});
