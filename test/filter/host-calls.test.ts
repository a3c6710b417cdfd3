// The request path's host calls by Proxy-Wasm function, counted at the host's imports through the
// shipped module (not timed): the headers phase reads the request's headers once and strips only
// the routing headers a client actually sent; the decision reads no header of its own. A change
// that brings back a call per header name fails here.
import { afterEach, describe, expect, it } from "vitest";
import { countHostCalls } from "../../bench/lib/host-call-counter.ts";
import { chat, ShippedFilter } from "../filter-core/shipped-filter.ts";

const calls = new Map<string, number>();
let counting = false;
countHostCalls((name) => {
  if (counting) calls.set(name, (calls.get(name) ?? 0) + 1);
});

function counted<T>(run: () => T): { result: T; calls: Map<string, number> } {
  calls.clear();
  counting = true;
  try {
    return { result: run(), calls: new Map(calls) };
  } finally {
    counting = false;
  }
}

const headerCalls = (c: Map<string, number>) =>
  ["get_header_map_value", "get_header_map_pairs", "remove_header_map_value", "replace_header_map_value"]
    .map((k) => `${k} ${c.get(`proxy_${k}`) ?? 0}`)
    .join(", ");

let f: ShippedFilter;
afterEach(() => f?.close());

const SYSTEM = "You are a careful assistant. ".repeat(40);

describe("host calls per request", () => {
  it("reads the request's headers once and writes only the destination and the rank", () => {
    f = new ShippedFilter({ routing: { sessionHeader: "x-session-id" } });
    f.hold(chat(SYSTEM, "q"), 1);
    f.publish();
    f.tick();
    const { result, calls: c } = counted(() =>
      f.route(chat(SYSTEM, "q"), { headers: [["x-session-id", "s-1"]] }),
    );
    expect(result.outcome).toBe("prefix_hit");
    expect(headerCalls(c)).toBe(
      "get_header_map_value 0, get_header_map_pairs 1, remove_header_map_value 0, replace_header_map_value 2",
    );
  });

  it("strips a client's routing headers, one removal per header it sent", () => {
    f = new ShippedFilter();
    f.publish();
    f.tick();
    const { result, calls: c } = counted(() =>
      f.route(chat(SYSTEM, "q"), {
        headers: [
          ["x-gateway-destination-endpoint", "169.254.169.254:80"],
          ["x-dynamo-worker-instance-id", "7"],
        ],
      }),
    );
    expect(headerCalls(c)).toBe(
      "get_header_map_value 0, get_header_map_pairs 1, remove_header_map_value 2, replace_header_map_value 2",
    );
    // Stripped, and kvroute's own destination written.
    expect(result.forwarded?.get("x-gateway-destination-endpoint")).not.toBe("169.254.169.254:80");
    expect(result.forwarded?.get("x-dynamo-worker-instance-id")).toBeUndefined();
  });

  it("strips every copy of a routing header and leaves a look-alike name alone (near miss)", () => {
    f = new ShippedFilter();
    f.publish();
    f.tick();
    const { result, calls: c } = counted(() =>
      f.route(chat(SYSTEM, "q"), {
        headers: [
          ["x-gateway-destination-endpoint", "169.254.169.254:80"],
          ["x-gateway-destination-endpoint", "10.9.9.9:80"],
          ["x-gateway-destination-endpoints", "kept"],
        ],
      }),
    );
    // One removal takes both copies; the look-alike is not a routing header and travels on.
    expect(headerCalls(c)).toBe(
      "get_header_map_value 0, get_header_map_pairs 1, remove_header_map_value 1, replace_header_map_value 2",
    );
    const dest = result.forwarded?.get("x-gateway-destination-endpoint");
    expect(dest === "169.254.169.254:80" || dest === "10.9.9.9:80").toBe(false);
    expect(result.forwarded?.get("x-gateway-destination-endpoints")).toBe("kept");
  });

  it("records the decision's histograms with the request's end, not on its way to the engine", () => {
    f = new ShippedFilter();
    f.hold(chat(SYSTEM, "q"), 1);
    f.publish();
    f.tick();
    const before = f.host.histogram("kvroute.decision_us")?.count ?? 0;
    const routed = counted(() => f.route(chat(SYSTEM, "q")));
    expect(routed.result.outcome).toBe("prefix_hit");
    expect(routed.calls.get("proxy_record_metric") ?? 0).toBe(0);
    expect(f.host.histogram("kvroute.decision_us")?.count ?? 0).toBe(before);
    const ended = counted(() => f.finish(routed.result));
    expect(ended.calls.get("proxy_record_metric")).toBe(2);
    expect(f.host.histogram("kvroute.decision_us")?.count).toBe(before + 1);
    const ratio = f.host.histogram("kvroute.cached_ratio_permille");
    expect(Number(ratio?.values.at(-1))).toBeGreaterThan(500);
  });
});
