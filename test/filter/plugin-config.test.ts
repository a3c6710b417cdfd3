// The filter's plugin configuration, loaded by the real module in the host: a bad value in any
// field makes on_configure fail with one log line naming the field, so Envoy rejects the config
// instead of running with a default the operator did not ask for.
import { describe, expect, it } from "vitest";
import { createHost, type LogRecord } from "../../host/index.ts";

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
    ["maxBodyBytes past 1 GiB", '{"maxBodyBytes":1073741825}', "maxBodyBytes"],
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
