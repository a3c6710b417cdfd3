// proxy_get_property as Envoy resolves it (context.cc Context::getProperty/findValue and the CEL
// attribute vocabulary of filters/common/expr): the path is NUL-separated; the first segment picks
// a top-level attribute, later segments index into maps/messages. Strings come back as bytes,
// integers as 8-byte little-endian int64/uint64, booleans as one byte, maps as serialized pairs.
// Unknown attributes → NotFound. Stream attributes (request.*, response.*, source.*,
// destination.*, upstream.*) exist only when the context has a stream; plugin_* and node work in
// root contexts too. proxy_set_property stores a value in the stream's filter state under
// "wasm.<path>" (root contexts → NotFound) and get_property reads it back by its top-level name.
import { type Pairs, WasmResult } from "./abi/constants.ts";
import { encodeUtf8, marshalPairs } from "./abi/memory.ts";
import type { HostCore } from "./core.ts";
import { formatIpPort } from "./forwarded-for.ts";
import type { HttpStream } from "./stream.ts";

type Value = string | bigint | boolean | number | Uint8Array | Pairs | Map<string, Value> | CelList | null;

/** A list value (a Struct's ListValue): Envoy serializes it as pairs, each element a key, values empty. */
class CelList {
  constructor(readonly items: Value[]) {}
}

/** A google.protobuf.Value as JSON → the CEL value Envoy's metadata lookup yields. */
function fromJson(v: unknown): Value {
  if (v === null || v === undefined) return null;
  if (typeof v === "string" || typeof v === "boolean" || typeof v === "number") return v;
  if (Array.isArray(v)) return new CelList(v.map(fromJson));
  if (typeof v === "object") {
    const m = new Map<string, Value>();
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) m.set(k, fromJson(x));
    return m;
  }
  return null;
}

const decoder = new TextDecoder("latin1");

const int64 = (v: bigint): Uint8Array => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigInt64(0, v, true);
  return b;
};

function serialize(v: Value): Uint8Array | null {
  if (v === null) return null;
  if (typeof v === "string") return encodeUtf8(v);
  if (typeof v === "bigint") return int64(v);
  if (typeof v === "boolean") return new Uint8Array([v ? 1 : 0]);
  if (typeof v === "number") {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, v, true);
    return b;
  }
  if (v instanceof Uint8Array) return v;
  if (v instanceof CelList) {
    // context.cc serializeValue (kList): every element serialized, as the key of a pair.
    const pairs: Pairs = v.items.map((x) => {
      const b = serialize(x);
      return [b === null ? "" : typeof x === "string" ? x : decoder.decode(b), ""];
    });
    return marshalPairs(pairs);
  }
  if (v instanceof Map) {
    const pairs: Pairs = [];
    for (const [k, x] of v) pairs.push([k, typeof x === "string" ? x : String(x)]);
    return marshalPairs(pairs);
  }
  return marshalPairs(v);
}

function headersMap(pairs: Pairs | undefined): Map<string, Value> | null {
  if (!pairs) return null;
  const m = new Map<string, Value>();
  // CEL header maps join repeated headers with ","
  for (const [k, v] of pairs) m.set(k, m.has(k) ? `${m.get(k)},${v}` : v);
  return m;
}

function top(core: HostCore, stream: HttpStream | null, name: string): Value | undefined {
  switch (name) {
    case "plugin_name":
      return core.pluginName;
    case "plugin_root_id":
      return core.rootId;
    case "plugin_vm_id":
      return core.vmId;
    case "node": {
      const m = new Map<string, Value>();
      if (core.node.id !== undefined) m.set("id", core.node.id);
      if (core.node.cluster !== undefined) m.set("cluster", core.node.cluster);
      const md = new Map<string, Value>();
      for (const [k, v] of Object.entries(core.node.metadata ?? {})) md.set(k, v);
      m.set("metadata", md);
      return m;
    }
  }
  if (!stream) return undefined;
  const info = stream.info;
  switch (name) {
    case "request": {
      // The header maps are copied only for the paths that read them, as Envoy looks up only
      // the attribute a path names: metadata or upstream lookups cost no header copy.
      const req = stream.requestHeadersForProperties();
      const m = new Map<string, Value>();
      const h = (k: string) => req?.find((e) => e[0] === k)?.[1];
      const path = h(":path");
      if (path !== undefined) {
        m.set("path", path);
        const q = path.indexOf("?");
        m.set("url_path", q < 0 ? path : path.slice(0, q));
        m.set("query", q < 0 ? "" : path.slice(q + 1));
      }
      for (const [attr, key] of [
        ["method", ":method"],
        ["host", ":authority"],
        ["scheme", ":scheme"],
        ["referer", "referer"],
        ["useragent", "user-agent"],
        ["id", "x-request-id"],
      ] as const) {
        const v = h(key);
        if (v !== undefined) m.set(attr, v);
      }
      m.set("protocol", info.protocol);
      m.set("time", BigInt(info.startTimeMs) * 1_000_000n);
      m.set("size", BigInt(info.requestBodyBytes));
      if (info.endTimeMs !== undefined)
        m.set("duration", BigInt(info.endTimeMs - info.startTimeMs) * 1_000_000n);
      const hm = headersMap(req ?? undefined);
      if (hm) m.set("headers", hm);
      return m;
    }
    case "response": {
      const resp = stream.responseHeadersForProperties();
      const m = new Map<string, Value>();
      if (info.responseCode !== undefined) m.set("code", BigInt(info.responseCode));
      if (info.responseCodeDetails !== undefined) m.set("code_details", info.responseCodeDetails);
      m.set("size", BigInt(info.responseBodyBytes));
      const hm = headersMap(resp ?? undefined);
      if (hm) m.set("headers", hm);
      return m;
    }
    case "source":
      return new Map<string, Value>([
        ["address", formatIpPort(info.sourceAddress, info.sourcePort)],
        ["port", BigInt(info.sourcePort)],
      ]);
    case "destination":
      return new Map<string, Value>([
        ["address", formatIpPort(info.destinationAddress, info.destinationPort)],
        ["port", BigInt(info.destinationPort)],
      ]);
    case "connection":
      return new Map<string, Value>([["id", BigInt(info.connectionId)]]);
    case "connection_id":
      return BigInt(info.connectionId);
    case "upstream":
      if (info.upstreamAddress === undefined) return undefined;
      return new Map<string, Value>([
        ["address", info.upstreamAddress],
        ["port", BigInt(info.upstreamAddress.slice(info.upstreamAddress.lastIndexOf(":") + 1))],
      ]);
    case "cluster_name":
      return info.clusterName;
    case "metadata": {
      // Dynamic metadata (envoy.config.core.v3.Metadata): metadata.filter_metadata.<ns>.<key>.
      const ns = new Map<string, Value>();
      for (const [k, v] of Object.entries(info.dynamicMetadata ?? {})) ns.set(k, fromJson(v));
      return new Map<string, Value>([["filter_metadata", ns]]);
    }
    default: {
      const fs = stream.filterState.get(`wasm.${name}`);
      return fs === undefined ? undefined : fs;
    }
  }
}

export function getProperty(
  core: HostCore,
  stream: HttpStream | null,
  path: string,
): { code: number; value?: Uint8Array } {
  const parts = path.split("\0");
  if (parts.length > 0 && parts[parts.length - 1] === "") parts.pop();
  if (parts.length === 0) return { code: WasmResult.NotFound };
  if (parts[0] === "metadata" && parts.length > 1 && stream !== null) return metadataAt(stream, parts);
  let v: Value | undefined = top(core, stream, parts[0] as string);
  if (v === undefined) return { code: WasmResult.NotFound };
  for (const part of parts.slice(1)) {
    if (v instanceof Map) {
      v = (v as Map<string, Value>).get(part);
      if (v === undefined) return { code: WasmResult.NotFound };
    } else return { code: WasmResult.NotFound };
  }
  const bytes = serialize(v);
  if (bytes === null) return { code: WasmResult.NotFound };
  return { code: WasmResult.Ok, value: bytes };
}

/**
 * A path into the stream's dynamic metadata (metadata.filter_metadata.<ns>.<key>…), looked up the
 * way Envoy does it — only the attribute the path names, no copy of the rest: the same answer as
 * converting the whole metadata and indexing it (top()), without building every namespace's maps
 * on each call (a filter asks on every request, and Envoy's lookup costs a few map probes).
 */
function metadataAt(stream: HttpStream, parts: string[]): { code: number; value?: Uint8Array } {
  if (parts[1] !== "filter_metadata") return { code: WasmResult.NotFound };
  let v: unknown = stream.info.dynamicMetadata ?? {};
  for (let i = 2; i < parts.length; i++) {
    if (v === null || typeof v !== "object" || Array.isArray(v)) return { code: WasmResult.NotFound };
    const key = parts[i] as string;
    if (!Object.hasOwn(v, key)) return { code: WasmResult.NotFound };
    v = (v as Record<string, unknown>)[key];
  }
  const bytes = serialize(fromJson(v));
  return bytes === null ? { code: WasmResult.NotFound } : { code: WasmResult.Ok, value: bytes };
}

export function setProperty(stream: HttpStream | null, path: string, value: Uint8Array): number {
  if (!stream) return WasmResult.NotFound;
  stream.filterState.set(`wasm.${path}`, value.slice());
  return WasmResult.Ok;
}
