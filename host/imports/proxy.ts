// The env.proxy_* host functions of ABI 0.2.1, with the argument checks and result codes of
// proxy-wasm-cpp-host src/exports.cc and Envoy's Context (source/extensions/common/wasm/
// context.cc). Each function resolves contextOrEffectiveContext() first, like the C++ host.
import {
  BUFFER_TYPE_MAX,
  BufferType,
  HEADER_MAP_MAX,
  HeaderMapType,
  LogLevel,
  STREAM_TYPE_MAX,
  StreamType,
  WasmResult,
} from "../abi/constants.ts";
import { marshalPairs, unmarshalPairs } from "../abi/memory.ts";
import { HeaderMap } from "../header-map.ts";
import { startHttpCall } from "../http-call.ts";
import { getProperty, setProperty } from "../properties.ts";
import { type BodyBuffer, streamOf } from "../stream.ts";
import type { Ctx, WasmThread } from "../thread.ts";
import { restrictedGuard } from "./wasi.ts";

type Fn = (...a: Array<number | bigint>) => number | undefined;

/** A buffer with Envoy's Buffer::copyFrom rules; string-backed ones are immutable. */
class ConstBuffer implements BodyBuffer {
  constructor(private readonly data: Uint8Array) {}
  bytes(): Uint8Array {
    return this.data;
  }
  copyFrom(): number {
    return WasmResult.BadArgument;
  }
}
const EMPTY = new ConstBuffer(new Uint8Array(0));

/** Integer view of a guest argument (i32 or i64 as passed by the VM). */
const n = (x: number | bigint | undefined) => Number(x ?? 0) >>> 0;

/**
 * What the host functions resolve first, like the C++ host: the current context
 * (contextOrEffectiveContext), and the header maps and buffers it can see.
 */
function contextView(t: WasmThread) {
  const cur = (): Ctx => t.current();
  const rootIdOf = (c: Ctx): number => (c.kind === "stream" ? c.rootId : c.id);

  const callResponseMap = (type: number): HeaderMap | null => {
    const r = t.httpCallResponse;
    if (!r) return null;
    return new HeaderMap(type === HeaderMapType.HttpCallResponseHeaders ? r.headers : r.trailers);
  };
  // Context::getMap: only the four stream maps are writable, and only while they are alive.
  const getMap = (type: number): HeaderMap | null => streamOf(cur())?.getMap(type) ?? null;
  // Context::getConstMap: stream maps (or the access-log copies in on_log), http-call maps.
  const getConstMap = (type: number): HeaderMap | null => {
    if (type === HeaderMapType.HttpCallResponseHeaders || type === HeaderMapType.HttpCallResponseTrailers) {
      return callResponseMap(type);
    }
    return streamOf(cur())?.getConstMap(type) ?? null;
  };
  const modified = (type: number) => streamOf(cur())?.onHeadersModified(type);
  // add_ and replace_header_map_value: the same checks, in Envoy's order, then one edit.
  const writePair = (
    type: number | bigint,
    kPtr: number | bigint,
    kSize: number | bigint,
    vPtr: number | bigint,
    vSize: number | bigint,
    edit: (map: HeaderMap, key: string, value: string) => void,
  ): number => {
    if (n(type) > HEADER_MAP_MAX) return WasmResult.BadArgument;
    const key = t.mem.readString(n(kPtr), n(kSize));
    const value = t.mem.readString(n(vPtr), n(vSize));
    if (key === null || value === null) return WasmResult.InvalidMemoryAccess;
    const map = getMap(n(type));
    if (!map) return WasmResult.BadArgument;
    edit(map, key, value);
    modified(n(type));
    return WasmResult.Ok;
  };

  const getBuffer = (type: number): BodyBuffer | null => {
    const s = streamOf(cur());
    switch (type) {
      case BufferType.CallData:
        return EMPTY;
      case BufferType.VmConfiguration:
        return new ConstBuffer(t.core.vmConfig);
      case BufferType.PluginConfiguration:
        return t.configuringPlugin ? new ConstBuffer(t.configuringPlugin) : null;
      case BufferType.HttpRequestBody:
      case BufferType.HttpResponseBody:
        return s ? s.bodyBuffer(type) : EMPTY;
      case BufferType.HttpCallResponseBody:
        return t.httpCallResponse ? new ConstBuffer(t.httpCallResponse.body) : null;
      default:
        return EMPTY;
    }
  };

  return { cur, rootIdOf, getMap, getConstMap, modified, writePair, getBuffer };
}

type ContextView = ReturnType<typeof contextView>;

export function proxyImports(t: WasmThread): Record<string, Fn> {
  const v = contextView(t);
  const impl: Record<string, Fn> = {
    ...logAndStatus(t, v),
    ...propertiesAndLocalReplies(t, v),
    ...sharedDataAndQueues(t, v),
    ...headerMaps(t, v),
    ...buffers(t, v),
    ...calls(t, v),
    ...timeAndMetrics(t, v),
    ...contextControl(t, v),
  };
  const out: Record<string, Fn> = {
    pthread_equal: restrictedGuard(t, "env.pthread_equal", (a, b) => (n(a) === n(b) ? 1 : 0)),
    emscripten_notify_memory_growth: restrictedGuard(
      t,
      "env.emscripten_notify_memory_growth",
      () => undefined,
    ),
  };
  for (const [name, f] of Object.entries(impl))
    out[`proxy_${name}`] = restrictedGuard(t, `env.proxy_${name}`, f);
  return out;
}

/** Logging and the status of the last call (proxy_log, get_log_level, get_status). */
function logAndStatus(t: WasmThread, v: ContextView): Record<string, Fn> {
  const { cur } = v;
  return {
    log: (level, ptr, size) => {
      if (n(level) > LogLevel.critical) return WasmResult.BadArgument;
      const msg = t.mem.readString(n(ptr), n(size));
      if (msg === null) return WasmResult.InvalidMemoryAccess;
      t.core.log({ thread: t.name, level: n(level), message: msg, contextId: cur().id });
      return WasmResult.Ok;
    },
    get_log_level: (ptr) =>
      t.mem.writeU32(n(ptr), t.core.logLevel) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess,
    get_status: (codePtr, ptrPtr, sizePtr) => {
      if (!t.mem.writeU32(n(codePtr), t.statusCode)) return WasmResult.InvalidMemoryAccess;
      return t.mem.copyOut(t.statusMessage, n(ptrPtr), n(sizePtr))
        ? WasmResult.Ok
        : WasmResult.InvalidMemoryAccess;
    },
  };
}

/** Properties of the stream, connection and plugin; the local reply. */
function propertiesAndLocalReplies(t: WasmThread, v: ContextView): Record<string, Fn> {
  const { cur } = v;
  return {
    get_property: (pathPtr, pathSize, ptrPtr, sizePtr) => {
      const path = t.mem.readString(n(pathPtr), n(pathSize));
      if (path === null) return WasmResult.InvalidMemoryAccess;
      const r = getProperty(t.core, streamOf(cur()), path);
      if (r.code !== WasmResult.Ok) return r.code;
      return t.mem.copyOut(r.value as Uint8Array, n(ptrPtr), n(sizePtr))
        ? WasmResult.Ok
        : WasmResult.InvalidMemoryAccess;
    },
    set_property: (pathPtr, pathSize, valPtr, valSize) => {
      const path = t.mem.readString(n(pathPtr), n(pathSize));
      const value = t.mem.read(n(valPtr), n(valSize));
      if (path === null || value === null) return WasmResult.InvalidMemoryAccess;
      return setProperty(streamOf(cur()), path, value);
    },
    send_local_response: (code, dPtr, dSize, bPtr, bSize, hPtr, hSize, grpc) => {
      const details = t.mem.readString(n(dPtr), n(dSize));
      const body = t.mem.read(n(bPtr), n(bSize));
      const hdrs = t.mem.read(n(hPtr), n(hSize));
      if (details === null || body === null || hdrs === null) return WasmResult.InvalidMemoryAccess;
      streamOf(cur())?.sendLocalResponse(n(code), body, unmarshalPairs(hdrs), Number(grpc) | 0, details);
      t.stopNextIteration();
      return WasmResult.Ok;
    },
  };
}

/** Shared data (with a preemption point after every read) and shared queues. */
function sharedDataAndQueues(t: WasmThread, v: ContextView): Record<string, Fn> {
  const { cur, rootIdOf } = v;
  return {
    get_shared_data: (kPtr, kSize, ptrPtr, sizePtr, casPtr) => {
      const key = t.mem.readString(n(kPtr), n(kSize));
      if (key === null) return WasmResult.InvalidMemoryAccess;
      const v = t.core.sharedData.get(t.core.vmId, key, false);
      if (v === null) return WasmResult.NotFound;
      if (!t.mem.copyOut(v.value, n(ptrPtr), n(sizePtr))) return WasmResult.InvalidMemoryAccess;
      if (!t.mem.writeU32(n(casPtr), v.cas)) return WasmResult.InvalidMemoryAccess;
      t.core.scheduler.maybePreempt(t);
      return WasmResult.Ok;
    },
    set_shared_data: (kPtr, kSize, vPtr, vSize, cas) => {
      const key = t.mem.readString(n(kPtr), n(kSize));
      const value = t.mem.view(n(vPtr), n(vSize));
      if (key === null || value === null) return WasmResult.InvalidMemoryAccess;
      return t.core.sharedData.set(t.core.vmId, key, value, n(cas));
    },
    register_shared_queue: (namePtr, nameSize, tokenPtr) => {
      const name = t.mem.readString(n(namePtr), n(nameSize));
      if (name === null) return WasmResult.InvalidMemoryAccess;
      const token = t.core.queues.register(t.core.vmId, name, rootIdOf(cur()), {
        post: (task) => t.post(task),
        deliver: (ctxId, tok) => t.deliverQueueReady(ctxId, tok),
      });
      return t.mem.writeU32(n(tokenPtr), token) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    },
    resolve_shared_queue: (vmPtr, vmSize, namePtr, nameSize, tokenPtr) => {
      const vmId = t.mem.readString(n(vmPtr), n(vmSize));
      const name = t.mem.readString(n(namePtr), n(nameSize));
      if (vmId === null || name === null) return WasmResult.InvalidMemoryAccess;
      const token = t.core.queues.resolve(vmId === "" ? t.core.vmId : vmId, name);
      if (t.failed || token === 0) return WasmResult.NotFound;
      return t.mem.writeU32(n(tokenPtr), token) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    },
    dequeue_shared_queue: (token, ptrPtr, sizePtr) => {
      const r = t.core.queues.dequeue(n(token));
      if (r.code !== WasmResult.Ok) return r.code;
      return t.mem.copyOut(r.data as Uint8Array, n(ptrPtr), n(sizePtr))
        ? WasmResult.Ok
        : WasmResult.InvalidMemoryAccess;
    },
    enqueue_shared_queue: (token, ptr, size) => {
      const data = t.mem.read(n(ptr), n(size));
      if (data === null) return WasmResult.InvalidMemoryAccess;
      return t.core.queues.enqueue(n(token), data);
    },
  };
}

/** Header maps: the stream's four, the access-log copies in on_log, an http call's answer. */
function headerMaps(t: WasmThread, v: ContextView): Record<string, Fn> {
  const { cur, getMap, getConstMap, modified, writePair } = v;
  return {
    get_header_map_value: (type, kPtr, kSize, ptrPtr, sizePtr) => {
      if (n(type) > HEADER_MAP_MAX) return WasmResult.BadArgument;
      const key = t.mem.readString(n(kPtr), n(kSize));
      if (key === null) return WasmResult.InvalidMemoryAccess;
      const map = getConstMap(n(type));
      if (!map) return streamOf(cur())?.accessLogPhase ? WasmResult.NotFound : WasmResult.BadArgument;
      const v = map.get(key);
      if (v === undefined) return WasmResult.NotFound;
      return t.mem.copyOut(v, n(ptrPtr), n(sizePtr)) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    },
    get_header_map_pairs: (type, ptrPtr, sizePtr) => {
      if (n(type) > HEADER_MAP_MAX) return WasmResult.BadArgument;
      const map = getConstMap(n(type));
      const bytes = map && map.size > 0 ? marshal(map) : new Uint8Array(0);
      return t.mem.copyOut(bytes, n(ptrPtr), n(sizePtr)) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    },
    set_header_map_pairs: (type, ptr, size) => {
      if (n(type) > HEADER_MAP_MAX) return WasmResult.BadArgument;
      const data = t.mem.read(n(ptr), n(size));
      if (data === null) return WasmResult.InvalidMemoryAccess;
      const map = getMap(n(type));
      if (!map) return WasmResult.BadArgument;
      map.replaceAll(unmarshalPairs(data));
      modified(n(type));
      return WasmResult.Ok;
    },
    get_header_map_size: (type, ptr) => {
      if (n(type) > HEADER_MAP_MAX) return WasmResult.BadArgument;
      const map = getMap(n(type));
      if (!map) return WasmResult.BadArgument;
      return t.mem.writeU32(n(ptr), map.byteSize()) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    },
    add_header_map_value: (type, kPtr, kSize, vPtr, vSize) =>
      writePair(type, kPtr, kSize, vPtr, vSize, (map, key, value) => map.add(key, value)),
    replace_header_map_value: (type, kPtr, kSize, vPtr, vSize) =>
      writePair(type, kPtr, kSize, vPtr, vSize, (map, key, value) => map.set(key, value)),
    remove_header_map_value: (type, kPtr, kSize) => {
      if (n(type) > HEADER_MAP_MAX) return WasmResult.BadArgument;
      const key = t.mem.readString(n(kPtr), n(kSize));
      if (key === null) return WasmResult.InvalidMemoryAccess;
      const map = getMap(n(type));
      if (!map) return WasmResult.BadArgument;
      map.remove(key);
      modified(n(type));
      return WasmResult.Ok;
    },
  };
}

/** Buffers: bodies, configurations, an http call's answer body. */
function buffers(t: WasmThread, v: ContextView): Record<string, Fn> {
  const { getBuffer } = v;
  return {
    get_buffer_status: (type, lenPtr, flagsPtr) => {
      if (n(type) > BUFFER_TYPE_MAX) return WasmResult.BadArgument;
      const b = getBuffer(n(type));
      if (!b) return WasmResult.NotFound;
      return t.mem.writeU32(n(lenPtr), b.bytes().length) && t.mem.writeU32(n(flagsPtr), 0)
        ? WasmResult.Ok
        : WasmResult.InvalidMemoryAccess;
    },
    get_buffer_bytes: (type, start, length, ptrPtr, sizePtr) => {
      if (n(type) > BUFFER_TYPE_MAX) return WasmResult.BadArgument;
      const b = getBuffer(n(type));
      if (!b) return WasmResult.NotFound;
      const data = b.bytes();
      const s = n(start);
      let len = n(length);
      if (s > data.length) len = 0;
      else if (s + len > data.length) len = data.length - s;
      return t.mem.copyOut(data.subarray(s, s + len), n(ptrPtr), n(sizePtr))
        ? WasmResult.Ok
        : WasmResult.InvalidMemoryAccess;
    },
    set_buffer_bytes: (type, start, length, ptr, size) => {
      if (n(type) > BUFFER_TYPE_MAX) return WasmResult.BadArgument;
      const b = getBuffer(n(type));
      if (!b) return WasmResult.NotFound;
      const data = t.mem.read(n(ptr), n(size));
      if (data === null) return WasmResult.InvalidMemoryAccess;
      return b.copyFrom(n(start), n(length), data);
    },
  };
}

/** Outgoing calls: HTTP through the cluster table; gRPC is not offered. */
function calls(t: WasmThread, v: ContextView): Record<string, Fn> {
  const { cur, rootIdOf } = v;
  return {
    http_call: (uPtr, uSize, hPtr, hSize, bPtr, bSize, trPtr, trSize, timeout, tokenPtr) => {
      const cluster = t.mem.readString(n(uPtr), n(uSize));
      const body = t.mem.read(n(bPtr), n(bSize));
      const hdrs = t.mem.read(n(hPtr), n(hSize));
      const trailers = t.mem.read(n(trPtr), n(trSize));
      if (cluster === null || body === null || hdrs === null || trailers === null) {
        return WasmResult.InvalidMemoryAccess;
      }
      if (!t.mem.writeU32(n(tokenPtr), 0)) return WasmResult.InvalidMemoryAccess;
      const r = startHttpCall(
        t,
        rootIdOf(cur()),
        cluster,
        unmarshalPairs(hdrs),
        body,
        unmarshalPairs(trailers),
        Number(timeout) | 0,
      );
      if (r.code === WasmResult.Ok) t.mem.writeU32(n(tokenPtr), r.token as number);
      return r.code;
    },
    grpc_call: () => WasmResult.Unimplemented,
    grpc_stream: () => WasmResult.Unimplemented,
    grpc_close: () => WasmResult.NotFound,
    grpc_cancel: () => WasmResult.NotFound,
    grpc_send: () => WasmResult.NotFound,
  };
}

/** The tick timer, the clock and metrics. */
function timeAndMetrics(t: WasmThread, v: ContextView): Record<string, Fn> {
  const { cur, rootIdOf } = v;
  return {
    set_tick_period_milliseconds: (ms) => {
      // ContextBase::setTimerPeriod: the timer of the caller's root context.
      t.setTickPeriod(rootIdOf(cur()), n(ms));
      return WasmResult.Ok;
    },
    get_current_time_nanoseconds: (ptr) =>
      t.mem.writeU64(n(ptr), msToNs(t.core.now())) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess,
    define_metric: (type, namePtr, nameSize, idPtr) => {
      const name = t.mem.readString(n(namePtr), n(nameSize));
      if (name === null) return WasmResult.InvalidMemoryAccess;
      const r = t.metrics.define(n(type), name);
      if (r.code !== WasmResult.Ok) return r.code;
      return t.mem.writeU32(n(idPtr), r.id as number) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    },
    increment_metric: (id, offset) => t.metrics.increment(n(id), BigInt.asIntN(64, BigInt(offset ?? 0))),
    record_metric: (id, value) => t.metrics.record(n(id), BigInt.asUintN(64, BigInt(value ?? 0))),
    get_metric: (id, ptr) => {
      const r = t.metrics.get(n(id));
      if (r.code !== WasmResult.Ok) return r.code;
      return t.mem.writeU64(n(ptr), r.value as bigint) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    },
  };
}

/** Context control: the effective context, proxy_done, foreign functions, continuing and closing streams. */
function contextControl(t: WasmThread, v: ContextView): Record<string, Fn> {
  const { cur } = v;
  return {
    set_effective_context: (id) => t.setEffective(n(id)),
    // WasmBase::done: only a root context whose on_done returned false may call it.
    done: () => {
      const c = cur();
      return c.kind === "root" ? t.done(c.id) : WasmResult.NotFound;
    },
    call_foreign_function: (namePtr, nameSize, argsPtr, argsSize) => {
      const name = t.mem.readString(n(namePtr), n(nameSize));
      if (name === null || t.mem.read(n(argsPtr), n(argsSize)) === null)
        return WasmResult.InvalidMemoryAccess;
      if (name === "clear_route_cache") {
        streamOf(cur())?.clearRouteCache();
        return WasmResult.Ok;
      }
      return WasmResult.NotFound;
    },
    continue_stream: (type) => {
      if (n(type) > STREAM_TYPE_MAX) return WasmResult.BadArgument;
      const s = streamOf(cur());
      if (s) return s.continueStream(n(type));
      return n(type) === StreamType.Upstream ? WasmResult.Unimplemented : WasmResult.Ok;
    },
    close_stream: (type) => {
      if (n(type) > STREAM_TYPE_MAX) return WasmResult.BadArgument;
      streamOf(cur())?.closeStream(n(type));
      return WasmResult.Ok;
    },
  };
}

/** Wall-clock ms (possibly fractional) as integer ns, keeping the sub-millisecond part. */
function msToNs(ms: number): bigint {
  const whole = Math.floor(ms);
  return BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1_000_000));
}

function marshal(map: HeaderMap): Uint8Array {
  return marshalPairs(map.pairs());
}
