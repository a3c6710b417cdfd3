// The filter's plugin configuration, loaded by the real module in the host: a bad value in any
// field makes on_configure fail with one log line naming the field, so Envoy rejects the config
// instead of running with a default the operator did not ask for.
import { describe, expect, it } from "vitest";
import { createHost, type LogRecord } from "../../host/index.ts";
import { counter, passThrough, startStack, synced, until } from "./harness.ts";

const WASM = new URL("../../build/kvroute.wasm", import.meta.url).pathname;

/** null when the configuration loads; else the error log line. */
function load(config: string): string | null {
  const logs: LogRecord[] = [];
  try {
    const host = createHost({
      wasm: WASM,
      mainThread: false,
      pluginConfig: config,
      logSink: (r) => logs.push(r),
    });
    host.close();
    return null;
  } catch {
    const line = logs.find((l) => l.message.startsWith("kvroute: invalid plugin configuration"));
    return line?.message ?? "rejected without a log line";
  }
}

const cp = (extra: Record<string, unknown>) => JSON.stringify({ controlPlane: { cluster: "c", ...extra } });

describe("plugin configuration", () => {
  it("loads an empty configuration, and every field at a good value", () => {
    expect(load("")).toBeNull();
    expect(
      load(
        JSON.stringify({
          controlPlane: {
            cluster: "kvroute_control_plane",
            authority: "cp.example:9090",
            syncPath: "/v1/sync",
            reportPath: "/v1/report",
            token: "t0ken",
            timeoutMs: 30000,
          },
          tickMs: 100,
          reportMs: 500,
          maxBodyBytes: 4194304,
          usageScanBytes: 0,
          usageScanStreamSample: 1,
          failMode: "closed",
          inferencePaths: ["/v1/completions", "/v1/chat/completions"],
          gatewayId: "gw-1",
          requestIdHeader: "X-Request-Id",
          destinationFallbacks: 7,
        }),
      ),
    ).toBeNull();
  });

  it.each([
    // [what, configuration, field the log line names]
    ["not JSON", "{tickMs: 1}", "key"],
    ["not an object", "[1]", "a JSON object"],
    ["trailing text", '{"tickMs":100} x', "trailing"],
    ["an unknown field", '{"tickMS":100}', "tickMS: unknown field"],
    ["a field twice", '{"tickMs":100,"tickMs":200}', "tickMs: given twice"],
    ["failMode misspelt", '{"failMode":"closd"}', 'failMode: expected "open" or "closed"'],
    ["failMode in another case", '{"failMode":"Closed"}', "failMode"],
    ["failMode not a string", '{"failMode":false}', "failMode"],
    [
      "a nested field twice",
      cp({ token: "a", token2: "b" }).replace("token2", "token"),
      "controlPlane.token: given twice",
    ],
    ["tickMs zero", '{"tickMs":0}', "tickMs"],
    ["tickMs negative", '{"tickMs":-5}', "tickMs"],
    ["tickMs fractional", '{"tickMs":1.5}', "tickMs"],
    ["tickMs as a string", '{"tickMs":"100"}', "tickMs"],
    ["tickMs too large", '{"tickMs":60001}', "tickMs"],
    ["reportMs zero", '{"reportMs":0}', "reportMs"],
    ["reportMs too large", '{"reportMs":600001}', "reportMs"],
    ["maxBodyBytes zero", '{"maxBodyBytes":0}', "maxBodyBytes"],
    ["usageScanBytes past 1 GiB", '{"usageScanBytes":1073741825}', "usageScanBytes"],
    ["usageScanBytes negative", '{"usageScanBytes":-1}', "usageScanBytes"],
    ["usageScanBytes as a string", '{"usageScanBytes":"16"}', "usageScanBytes"],
    [
      "usageScanStreamSample zero",
      '{"usageScanStreamSample":0}',
      "usageScanStreamSample: must be at least 1",
    ],
    ["usageScanStreamSample past 2^20", '{"usageScanStreamSample":1048577}', "usageScanStreamSample"],
    ["maxBodyBytes past 64 MiB", '{"maxBodyBytes":67108865}', "maxBodyBytes: at most 67108864"],
    ["maxBodyBytes past 32 bits", '{"maxBodyBytes":4294967296}', "maxBodyBytes"],
    ["maxBodyBytes in exponent form", '{"maxBodyBytes":4e6}', "maxBodyBytes"],
    ["inferencePaths not an array", '{"inferencePaths":"/v1/completions"}', "inferencePaths"],
    ["inferencePaths empty", '{"inferencePaths":[]}', "inferencePaths: at least one path"],
    ["an inference path without /", '{"inferencePaths":["v1/completions"]}', "inferencePaths[0]"],
    ["an inference path with a query", '{"inferencePaths":["/v1/completions?x=1"]}', "inferencePaths[0]"],
    ["an inference path that is not a string", '{"inferencePaths":["/a",7]}', "inferencePaths[1]"],
    ["gatewayId not a string", '{"gatewayId":7}', "gatewayId"],
    ["gatewayId with a line break", '{"gatewayId":"gw\\r\\nx-evil: 1"}', "gatewayId"],
    ["requestIdHeader not a header name", '{"requestIdHeader":"x request id"}', "requestIdHeader"],
    ["requestIdHeader with a colon", '{"requestIdHeader":":path"}', "requestIdHeader"],
    ["destinationFallbacks past 7", '{"destinationFallbacks":8}', "destinationFallbacks"],
    ["destinationFallbacks negative", '{"destinationFallbacks":-1}', "destinationFallbacks"],
    ["destinationFallbacks as a string", '{"destinationFallbacks":"3"}', "destinationFallbacks"],
    ["controlPlane not an object", '{"controlPlane":"c"}', "controlPlane"],
    ["controlPlane unknown field", cp({ clustr: "c" }), "controlPlane.clustr: unknown field"],
    ["cluster empty", cp({ cluster: "" }), "controlPlane.cluster"],
    ["authority empty", cp({ authority: "" }), "controlPlane.authority"],
    ["authority with a path", cp({ authority: "cp:9090/x" }), "controlPlane.authority"],
    ["syncPath without /", cp({ syncPath: "v1/sync" }), "controlPlane.syncPath"],
    ["reportPath without /", cp({ reportPath: "v1/report" }), "controlPlane.reportPath"],
    ["token not a string", cp({ token: 12345 }), "controlPlane.token"],
    ["token with a line break", cp({ token: "abc\ndef" }), "controlPlane.token"],
    ["timeoutMs zero", cp({ timeoutMs: 0 }), "controlPlane.timeoutMs"],
    ["timeoutMs too large", cp({ timeoutMs: 3600001 }), "controlPlane.timeoutMs"],
  ] as const)("rejects %s, naming the field", (_what, config, field) => {
    const line = load(config);
    expect(line, config).not.toBeNull();
    expect(line).toContain(field);
  });
});

// maxBodyBytes is bounded by what the VM's memory holds: Envoy's V8 caps it at 1 GiB, as the host
// does (host/memory-cap.ts), and a trap there is an outage. filter/core/plugin-config.ts
// MAX_BODY_BYTES has the measurements behind 64 MiB.
describe("maxBodyBytes: at most what routes within Envoy's 1 GiB VM memory cap", () => {
  const MIB = 1024 * 1024;
  const CAP = 64 * MIB;

  it("takes the cap, refuses one byte more and the old bound of 1 GiB, naming the reason", () => {
    expect(load(JSON.stringify({ maxBodyBytes: CAP }))).toBeNull();
    expect(load(JSON.stringify({ maxBodyBytes: CAP + 1 }))).toContain("maxBodyBytes: at most 67108864");
    // The old bound (2^30) took this configuration, and a chat body of exactly 1 GiB then trapped
    // the VM (503, the VM failed): the copy alone is past AssemblyScript's largest block, and
    // bodies of 256 MiB already run out of the 1 GiB. Now on_configure refuses it.
    const line = load(JSON.stringify({ maxBodyBytes: 1024 * MIB }));
    expect(line).toContain("maxBodyBytes: at most 67108864 (64 MiB)");
    expect(line).toContain("1 GiB");
  });

  it("a burst of chat bodies of exactly the cap routes, rendered and hashed, without a trap", async () => {
    const stack = await startStack({
      threads: 1,
      pluginConfig: { maxBodyBytes: CAP },
      gateway: { bufferLimitBytes: CAP + MIB },
    });
    try {
      await until(() => stack.cp.ready(), "control plane ready");
      await synced(stack);
      const head = '{"model":"qwen3","messages":[{"role":"user","content":"';
      const tail = '"}],"max_tokens":4}';
      const body = head + "a".repeat(CAP - head.length - tail.length) + tail;
      expect(body.length).toBe(CAP);
      const thread = stack.gateway.host.threads[0];
      // Back to back, no tick between: each body's copy must be gone before the next arrives (when
      // the GC held them, the VM held several at once, and at 128 MiB the 13th of a burst trapped).
      for (let i = 0; i < 14; i++) {
        const p = passThrough(stack, { body });
        expect([p.status, thread?.failed], `request ${i}`).toEqual([0, false]);
        expect(p.forwarded?.some(([k]) => k === "x-gateway-destination-endpoint")).toBe(true);
      }
      // Not cut at the limit and routed by load: rendered and hashed, so every later one found the
      // first one's speculative chunks.
      // One body at a time: its copy, its rendered stream (up to 2n) and the working set — under
      // 6n, where a collector that freed bodies late needed 8.5–9.5n.
      expect(thread?.mem.size).toBeLessThan(6 * CAP);
      expect(counter(stack, "kvroute.body_too_large")).toBe(0);
      expect(counter(stack, "kvroute.requests.speculative_hit")).toBe(13);
    } finally {
      await stack.close();
    }
  }, 60_000);
});
