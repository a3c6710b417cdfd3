// proxy_get_property over the stream's dynamic metadata (host/properties.ts): a path names one
// value — metadata.filter_metadata.<ns>.<key>… — and gets it serialized as Envoy does; a path
// that leaves the metadata's maps (a missing key, indexing into a string or a list) is NotFound.
import { describe, expect, it } from "vitest";
import { WasmResult } from "../../host/abi/constants.ts";
import { marshalPairs } from "../../host/abi/memory.ts";
import type { HostCore } from "../../host/core.ts";
import { getProperty } from "../../host/properties.ts";
import type { HttpStream } from "../../host/stream.ts";

const metadata = {
  "envoy.lb.subset_hint": {
    "x-gateway-destination-endpoint-subset": ["10.0.0.1:8000", "10.0.0.2:8000"],
    joined: "10.0.0.1:8000,10.0.0.2:8000",
    nested: { weight: 2, on: true, none: null },
  },
};
const stream = { info: { dynamicMetadata: metadata } } as unknown as HttpStream;
const core = {} as HostCore;

function get(...path: string[]) {
  return getProperty(core, stream, path.join("\0"));
}

describe("get_property: dynamic metadata", () => {
  it("serializes a list as pairs of its elements, a string as its bytes, a map as pairs", () => {
    const ns = ["metadata", "filter_metadata", "envoy.lb.subset_hint"];
    expect(get(...ns, "x-gateway-destination-endpoint-subset")).toEqual({
      code: WasmResult.Ok,
      value: marshalPairs([
        ["10.0.0.1:8000", ""],
        ["10.0.0.2:8000", ""],
      ]),
    });
    expect(get(...ns, "joined").value).toEqual(new TextEncoder().encode("10.0.0.1:8000,10.0.0.2:8000"));
    expect(get(...ns, "nested")).toEqual({
      code: WasmResult.Ok,
      value: marshalPairs([
        ["weight", "2"],
        ["on", "true"],
        ["none", "null"],
      ]),
    });
    const weight = get(...ns, "nested", "weight").value as Uint8Array;
    expect(new DataView(weight.buffer, weight.byteOffset).getFloat64(0, true)).toBe(2);
    expect(get(...ns, "nested", "on").value).toEqual(new Uint8Array([1]));
  });

  it("is NotFound off the metadata's maps", () => {
    const ns = ["metadata", "filter_metadata", "envoy.lb.subset_hint"];
    for (const path of [
      [...ns, "absent"],
      ["metadata", "filter_metadata", "other.namespace", "key"],
      ["metadata", "typed_filter_metadata", "envoy.lb.subset_hint"],
      [...ns, "joined", "0"],
      [...ns, "x-gateway-destination-endpoint-subset", "0"],
      [...ns, "nested", "none"],
      [...ns, "nested", "none", "deeper"],
      [...ns, "nested", "toString"],
    ])
      expect(get(...path).code, path.join(".")).toBe(WasmResult.NotFound);
  });

  it("answers a trailing NUL like the path without it, and the whole namespace map", () => {
    const ns = ["metadata", "filter_metadata", "envoy.lb.subset_hint"];
    expect(getProperty(core, stream, `${ns.join("\0")}\0joined\0`)).toEqual(get(...ns, "joined"));
    const whole = get("metadata", "filter_metadata");
    expect(whole.code).toBe(WasmResult.Ok);
  });
});
