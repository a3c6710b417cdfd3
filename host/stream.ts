// One HTTP stream through Envoy's filter chain [wasm filter → router], reproducing both the Wasm
// Context (source/extensions/common/wasm/context.cc: decodeHeaders/decodeData/…, getMap,
// getBuffer, continueStream, sendLocalResponse, failStream, log, onDestroy) and the parts of
// Envoy's FilterManager it relies on (buffering while stopped, the listener's buffer limit → 413/500
// local replies or, in watermark mode, read-disabling the client, local replies encoded through
// the filter, resume on continue).
//
// Callback order: on_context_create(S, R) before the first request callback → request headers →
// body chunks → trailers → response headers/body/trailers → on_log → on_done → on_delete.
// Header maps are alive only while a callback holds them (Envoy nulls request_headers_ when the
// callback returns Continue, and on continue_stream): afterwards reads give BadArgument and
// get_header_map_pairs an empty list; in on_log the final maps are readable, not writable.
import {
  BufferType,
  DataStatus,
  HeaderMapType,
  HeadersStatus,
  StreamType,
  WasmResult,
} from "./abi/constants.ts";
import { HeaderMap } from "./header-map.ts";
import type { Ctx, StreamContext, WasmThread } from "./thread.ts";

export interface BodyBuffer {
  bytes(): Uint8Array;
  copyFrom(start: number, length: number, data: Uint8Array): number;
}

/** Envoy's Buffer::copyFrom on a live Buffer::Instance: replace all, prepend or append only. */
class MutableBuffer implements BodyBuffer {
  constructor(public data: Uint8Array) {}
  bytes(): Uint8Array {
    return this.data;
  }
  append(more: Uint8Array): void {
    this.data = Buffer.concat([this.data, more]);
  }
  copyFrom(start: number, length: number, data: Uint8Array): number {
    const size = this.data.length;
    if (start === 0) {
      if (length === 0) this.data = Buffer.concat([data, this.data]);
      else if (length >= size) this.data = data.slice();
      else return WasmResult.BadArgument;
      return WasmResult.Ok;
    }
    if (start >= size) {
      this.append(data);
      return WasmResult.Ok;
    }
    return WasmResult.BadArgument;
  }
}

/** buffer_.set(nullptr): size 0, and writes fall through to BufferBase → BadArgument. */
const NO_BUFFER: BodyBuffer = { bytes: () => new Uint8Array(0), copyFrom: () => WasmResult.BadArgument };

export interface StreamInfo {
  protocol: string;
  startTimeMs: number;
  endTimeMs?: number;
  sourceAddress: string;
  sourcePort: number;
  destinationAddress: string;
  destinationPort: number;
  connectionId: number;
  requestBodyBytes: number;
  responseBodyBytes: number;
  responseCode?: number;
  responseCodeDetails?: string;
  upstreamAddress?: string;
  clusterName?: string;
  /** The route the router picked (after the filter's header writes re-picked it). */
  routeName?: string;
  /** How often the route cache was cleared (request-header writes do it for ABI 0.2.1). */
  routeCacheClears: number;
  /** The ORIGINAL_DST header held no single literal ip:port (Envoy's original_dst_host_invalid stat). */
  originalDstHostInvalid?: boolean;
  /**
   * The stream's dynamic metadata (StreamInfo::dynamicMetadata().filter_metadata): namespace →
   * Struct as JSON values. What earlier filters (ext_authz, set_metadata, a GAIE data plane's
   * subset hint) left for this one; read as the `metadata` property.
   */
  dynamicMetadata?: Record<string, Record<string, unknown>>;
}

/** What surrounds the Wasm filter: the router on the request path, the client on the response path. */
export interface FilterChainSink {
  requestHeaders(h: HeaderMap, endStream: boolean): void;
  requestData(d: Uint8Array, endStream: boolean): void;
  requestTrailers(t: HeaderMap): void;
  /** A local reply or reset ended the stream: drop any upstream request. */
  abortUpstream(): void;
  responseHeaders(h: HeaderMap, endStream: boolean): void;
  responseData(d: Uint8Array, endStream: boolean): void;
  responseTrailers(t: HeaderMap): void;
  resetDownstream(reason: string): void;
  /**
   * Flow control (Envoy's readDisable on the downstream stream): true while the request data the
   * filter chain buffers in watermark mode is above the listener's buffer limit, false once it
   * drained. Optional: a sink that cannot pause its client just keeps buffering.
   */
  readDisable?(disabled: boolean): void;
  /** The stream is over (after on_log/on_done/on_delete). */
  done(): void;
}

type Stop = "none" | "headers" | "data" | "trailers";
type HStatus = "continue" | "stopBuffer" | "stopWatermark" | "stopIteration";
type DStatus = "continue" | "buffer" | "watermark" | "nobuffer";

interface Direction {
  stopped: Stop;
  mode: "buffer" | "watermark" | "nobuffer";
  headers: HeaderMap | null;
  headersEos: boolean;
  buffered: MutableBuffer | null;
  eos: boolean;
  trailers: HeaderMap | null;
  addedTrailers: HeaderMap | null;
  headersPassed: boolean;
  /** Headers returned plain StopIteration (allow_on_headers_stop_iteration): held, while data still reaches the filter. */
  headersHeld: boolean;
  /** Watermark mode went over the buffer limit and the client is read-disabled. */
  aboveHighWatermark: boolean;
  ended: boolean;
}

const fresh = (): Direction => ({
  stopped: "none",
  mode: "buffer",
  headers: null,
  headersEos: false,
  buffered: null,
  eos: false,
  trailers: null,
  addedTrailers: null,
  headersPassed: false,
  headersHeld: false,
  aboveHighWatermark: false,
  ended: false,
});

/** A stream's context in its thread's table, with the stream it belongs to. */
export interface HttpStreamContext extends StreamContext {
  stream: HttpStream;
}

/** The stream of a context: every stream context in a thread's table is an HttpStream's. */
export function streamOf(c: Ctx): HttpStream | null {
  return c.kind === "stream" ? (c as HttpStreamContext).stream : null;
}

export class HttpStream {
  readonly ctx: HttpStreamContext;
  readonly filterState = new Map<string, Uint8Array>();
  accessLogPhase = false;
  completed = false;
  private contextCreated = false;
  private destroyed = false;
  private failureLocalReplySent = false;
  private streamFailed = false;
  // Envoy Context's live pointers.
  private reqHeaders: HeaderMap | null = null;
  private reqTrailers: HeaderMap | null = null;
  private respHeaders: HeaderMap | null = null;
  private respTrailers: HeaderMap | null = null;
  private reqBody: MutableBuffer | null = null;
  private respBody: MutableBuffer | null = null;
  private bufferingReq = false;
  private bufferingResp = false;
  private endOfStream = false;
  private dec: Direction = fresh();
  private enc: Direction = fresh();
  private finalResp: HeaderMap | null = null;
  private finalRespTrailers: HeaderMap | null = null;
  private inFilter = 0;
  private readonly pending: Array<() => void> = [];

  constructor(
    readonly thread: WasmThread,
    readonly info: StreamInfo,
    private readonly sink: FilterChainSink,
  ) {
    const root = thread.root;
    if (!root) throw new Error("thread has no root context");
    this.ctx = { kind: "stream", id: thread.allocContextId(), rootId: root.id, stream: this };
    thread.contexts.set(this.ctx.id, this.ctx);
  }

  get id(): number {
    return this.ctx.id;
  }

  // ---- maps and buffers as host calls see them -------------------------------------------

  getMap(type: number): HeaderMap | null {
    switch (type) {
      case HeaderMapType.RequestHeaders:
        return this.reqHeaders;
      case HeaderMapType.RequestTrailers:
        if (!this.reqTrailers && this.reqBody && this.endOfStream && !this.dec.ended) {
          this.reqTrailers = new HeaderMap();
          this.dec.addedTrailers = this.reqTrailers;
        }
        return this.reqTrailers;
      case HeaderMapType.ResponseHeaders:
        return this.respHeaders;
      case HeaderMapType.ResponseTrailers:
        if (!this.respTrailers && this.respBody && this.endOfStream && !this.enc.ended) {
          this.respTrailers = new HeaderMap();
          this.enc.addedTrailers = this.respTrailers;
        }
        return this.respTrailers;
      default:
        return null;
    }
  }

  getConstMap(type: number): HeaderMap | null {
    switch (type) {
      case HeaderMapType.RequestHeaders:
        return this.accessLogPhase ? this.dec.headers : this.reqHeaders;
      case HeaderMapType.RequestTrailers:
        return this.accessLogPhase ? null : this.reqTrailers;
      case HeaderMapType.ResponseHeaders:
        return this.accessLogPhase ? this.finalResp : this.respHeaders;
      case HeaderMapType.ResponseTrailers:
        return this.accessLogPhase ? this.finalRespTrailers : this.respTrailers;
      default:
        return null;
    }
  }

  bodyBuffer(type: number): BodyBuffer {
    if (type === BufferType.HttpRequestBody)
      return (this.bufferingReq ? this.dec.buffered : this.reqBody) ?? NO_BUFFER;
    return (this.bufferingResp ? this.enc.buffered : this.respBody) ?? NO_BUFFER;
  }

  /** For properties: request headers stay known for the whole stream (stream info keeps them). */
  requestHeadersForProperties() {
    return this.dec.headers?.pairs() ?? null;
  }
  responseHeadersForProperties() {
    return (this.respHeaders ?? this.finalResp)?.pairs() ?? null;
  }

  onHeadersModified(type: number): void {
    // ABI 0.2.1: writing request headers clears the route cache, so a new destination re-routes.
    if (type === HeaderMapType.RequestHeaders) this.clearRouteCache();
  }

  clearRouteCache(): void {
    this.info.routeCacheClears++;
  }

  // ---- host calls that steer the stream ---------------------------------------------------

  continueStream(type: number): number {
    if (type === StreamType.Request)
      this.thread.addAfterVmCallAction(() => this.schedule(() => this.resumeDecoding()));
    else if (type === StreamType.Response)
      this.thread.addAfterVmCallAction(() => this.schedule(() => this.resumeEncoding()));
    else if (type === StreamType.Downstream) return WasmResult.Ok;
    else if (type === StreamType.Upstream) return WasmResult.Unimplemented;
    else return WasmResult.BadArgument;
    // Context::continueStream drops the request maps for either direction.
    this.reqHeaders = null;
    this.reqBody = null;
    this.reqTrailers = null;
    return WasmResult.Ok;
  }

  closeStream(type: number): void {
    if (type !== StreamType.Request && type !== StreamType.Response) return;
    if (this.info.responseCodeDetails === undefined) this.info.responseCodeDetails = "wasm_close_stream";
    this.thread.addAfterVmCallAction(() => this.schedule(() => this.reset("wasm_close_stream")));
  }

  sendLocalResponse(
    code: number,
    body: Uint8Array,
    headers: Array<[string, string]>,
    _grpc: number,
    details: string,
  ) {
    const d = details.replace(/\s/g, "_");
    this.thread.addAfterVmCallAction(() => this.schedule(() => this.localReply(code, body, headers, d)));
  }

  // ---- request path (decoder) --------------------------------------------------------------

  decodeHeaders(h: HeaderMap, eos: boolean): void {
    if (this.completed) return;
    this.dec.headers = h;
    this.dec.headersEos = eos;
    this.onCreate();
    this.filterCall(() => {
      this.reqHeaders = h;
      this.endOfStream = eos;
      const s = this.runHeaders("proxy_on_request_headers", h.size, eos);
      if (this.dec.ended) return;
      if (s === "continue") {
        this.reqHeaders = null;
        this.passRequestHeaders(eos);
      } else if (s === "stopIteration") {
        // Envoy FilterManager: headers wait, later data still goes through this filter, and the
        // header map stays writable until the filter continues.
        this.dec.headersHeld = true;
      } else {
        this.dec.stopped = "headers";
        this.dec.mode = s === "stopBuffer" ? "buffer" : "watermark";
      }
    });
  }

  /** Passes held headers before the first data/trailers that continue (StopIteration semantics). */
  private releaseHeldRequestHeaders(): void {
    if (!this.dec.headersHeld) return;
    this.dec.headersHeld = false;
    this.reqHeaders = null;
    this.passRequestHeaders(false);
  }

  decodeData(chunk: Uint8Array, eos: boolean): void {
    if (this.completed || this.dec.ended) return;
    this.info.requestBodyBytes += chunk.length;
    if (!this.contextCreated || (this.thread.failed && this.core().failurePolicy === "FAIL_OPEN")) {
      this.sink.requestData(chunk, eos);
      return;
    }
    if (this.dec.stopped === "headers" || this.dec.stopped === "trailers") {
      this.fmBuffer(this.dec, chunk, eos, true);
      return;
    }
    this.filterCall(() => this.dataToFilter(chunk, eos));
  }

  decodeTrailers(t: HeaderMap): void {
    if (this.completed || this.dec.ended) return;
    if (!this.contextCreated) {
      this.sink.requestTrailers(t);
      return;
    }
    if (this.dec.stopped === "headers") {
      this.dec.trailers = t;
      return;
    }
    this.filterCall(() => this.trailersToFilter(t));
  }

  private dataToFilter(chunk: Uint8Array, eos: boolean): void {
    if (this.bufferingReq && this.dec.buffered) {
      // FilterManager::addDecodedData: the new chunk joins the buffered body first.
      if (!this.fmBuffer(this.dec, chunk, eos, true)) return;
      this.reqBody = this.dec.buffered;
    } else this.reqBody = new MutableBuffer(chunk);
    this.endOfStream = eos;
    const body = this.reqBody;
    const s = this.runData("proxy_on_request_body", body.bytes().length, eos);
    this.bufferingReq = false;
    if (this.dec.ended) return;
    if (s === "continue") {
      const data = body.bytes();
      this.reqBody = null;
      this.dec.buffered = null;
      this.dec.stopped = "none";
      const trailers = this.dec.addedTrailers;
      this.releaseHeldRequestHeaders();
      this.passRequestData(data, eos && !trailers);
      if (eos && trailers) this.passRequestTrailers(trailers);
    } else if (s === "nobuffer") {
      this.dec.stopped = "data";
      this.dec.mode = "nobuffer";
      this.dec.eos = eos;
    } else {
      this.bufferingReq = true;
      this.dec.stopped = "data";
      this.dec.mode = s === "buffer" ? "buffer" : "watermark";
      this.dec.eos = eos;
      if (this.dec.buffered !== body) {
        this.dec.buffered = body;
        this.overLimit(this.dec, true);
      }
    }
  }

  private trailersToFilter(t: HeaderMap): void {
    this.reqTrailers = t;
    const s = this.runTrailers("proxy_on_request_trailers", t.size);
    if (this.dec.ended) return;
    if (s === "continue") {
      this.reqTrailers = null;
      this.releaseHeldRequestHeaders();
      if (this.dec.stopped === "data") {
        this.dec.stopped = "none";
        const data = this.dec.buffered?.bytes() ?? new Uint8Array(0);
        this.dec.buffered = null;
        this.bufferingReq = false;
        this.reqBody = null;
        if (data.length > 0) this.passRequestData(data, false);
      }
      this.passRequestTrailers(t);
    } else {
      this.dec.stopped = "trailers";
      this.dec.trailers = t;
    }
  }

  private resumeDecoding(): void {
    if (this.completed || this.dec.ended) return;
    const d = this.dec;
    const stopped = d.stopped;
    d.stopped = "none";
    if (d.headersHeld && stopped !== "headers") {
      this.releaseHeldRequestHeaders();
      if (d.headersEos) return;
    }
    if (stopped === "headers") {
      const buffered = d.buffered;
      const trailers = d.trailers;
      d.buffered = null;
      d.trailers = null;
      this.passRequestHeaders(d.headersEos);
      if (d.headersEos) return;
      // StopAllIteration: the buffered body (and trailers) go through this filter again.
      if (buffered) this.filterCall(() => this.dataToFilter(buffered.bytes(), d.eos && !trailers));
      if (trailers && !this.dec.ended && this.dec.stopped === "none")
        this.filterCall(() => this.trailersToFilter(trailers));
      else if (trailers) this.dec.trailers = trailers;
    } else if (stopped === "data") {
      const data = d.buffered?.bytes() ?? new Uint8Array(0);
      d.buffered = null;
      this.bufferingReq = false;
      this.reqBody = null;
      const trailers = d.trailers ?? d.addedTrailers;
      d.trailers = null;
      if (data.length > 0 || d.eos) this.passRequestData(data, d.eos && !trailers);
      if (trailers && d.eos) this.passRequestTrailers(trailers);
    } else if (stopped === "trailers" && d.trailers) {
      const data = d.buffered?.bytes();
      d.buffered = null;
      if (data && data.length > 0) this.passRequestData(data, false);
      const t = d.trailers;
      d.trailers = null;
      this.passRequestTrailers(t);
    }
  }

  private passRequestHeaders(eos: boolean): void {
    this.dec.headersPassed = true;
    this.sink.requestHeaders(this.dec.headers as HeaderMap, eos);
  }
  private passRequestData(d: Uint8Array, eos: boolean): void {
    // The buffered body moved on: the buffer drained below its low watermark.
    this.belowLowWatermark();
    this.sink.requestData(d, eos);
  }
  private passRequestTrailers(t: HeaderMap): void {
    this.sink.requestTrailers(t);
  }

  // ---- response path (encoder) -------------------------------------------------------------

  encodeHeaders(h: HeaderMap, eos: boolean): void {
    if (this.completed) return;
    this.enc.headers = h;
    this.enc.headersEos = eos;
    this.finalResp = h;
    this.info.responseCode = Number(h.get(":status") ?? 0);
    if (!this.contextCreated || this.failureLocalReplySent) {
      this.sendHeadersDownstream(h, eos);
      return;
    }
    this.filterCall(() => {
      this.respHeaders = h;
      this.endOfStream = eos;
      const s = this.runHeaders("proxy_on_response_headers", h.size, eos);
      if (this.enc.ended || this.completed) return;
      if (s === "continue") {
        this.respHeaders = null;
        this.sendHeadersDownstream(h, eos);
      } else {
        this.enc.stopped = "headers";
        this.enc.mode = s === "stopBuffer" ? "buffer" : "watermark";
      }
    });
  }

  encodeData(chunk: Uint8Array, eos: boolean): void {
    if (this.completed || this.enc.ended) return;
    this.info.responseBodyBytes += chunk.length;
    if (!this.contextCreated || this.failureLocalReplySent) {
      this.sendDataDownstream(chunk, eos);
      return;
    }
    if (this.enc.stopped === "headers" || this.enc.stopped === "trailers") {
      this.fmBuffer(this.enc, chunk, eos, false);
      return;
    }
    this.filterCall(() => this.respDataToFilter(chunk, eos));
  }

  encodeTrailers(t: HeaderMap): void {
    if (this.completed || this.enc.ended) return;
    this.finalRespTrailers = t;
    if (!this.contextCreated || this.failureLocalReplySent) {
      this.sendTrailersDownstream(t);
      return;
    }
    if (this.enc.stopped === "headers") {
      this.enc.trailers = t;
      return;
    }
    this.filterCall(() => {
      this.respTrailers = t;
      const s = this.runTrailers("proxy_on_response_trailers", t.size);
      if (this.enc.ended || this.completed) return;
      if (s === "continue") {
        this.respTrailers = null;
        this.flushEncBuffered(false);
        this.sendTrailersDownstream(t);
      } else {
        this.enc.stopped = "trailers";
        this.enc.trailers = t;
      }
    });
  }

  private respDataToFilter(chunk: Uint8Array, eos: boolean): void {
    if (this.bufferingResp && this.enc.buffered) {
      if (!this.fmBuffer(this.enc, chunk, eos, false)) return;
      this.respBody = this.enc.buffered;
    } else this.respBody = new MutableBuffer(chunk);
    this.endOfStream = eos;
    const body = this.respBody;
    const s = this.runData("proxy_on_response_body", body.bytes().length, eos);
    this.bufferingResp = false;
    if (this.enc.ended || this.completed) return;
    if (s === "continue") {
      const data = body.bytes();
      this.respBody = null;
      this.enc.buffered = null;
      this.enc.stopped = "none";
      const trailers = this.enc.addedTrailers;
      this.sendDataDownstream(data, eos && !trailers);
      if (eos && trailers) this.sendTrailersDownstream(trailers);
    } else if (s === "nobuffer") {
      this.enc.stopped = "data";
      this.enc.mode = "nobuffer";
      this.enc.eos = eos;
    } else {
      this.bufferingResp = true;
      this.enc.stopped = "data";
      this.enc.mode = s === "buffer" ? "buffer" : "watermark";
      this.enc.eos = eos;
      if (this.enc.buffered !== body) {
        this.enc.buffered = body;
        this.overLimit(this.enc, false);
      }
    }
  }

  private flushEncBuffered(eos: boolean): void {
    const data = this.enc.buffered?.bytes();
    this.enc.buffered = null;
    this.bufferingResp = false;
    this.respBody = null;
    if (data && data.length > 0) this.sendDataDownstream(data, eos);
  }

  private resumeEncoding(): void {
    if (this.completed || this.enc.ended) return;
    const e = this.enc;
    const stopped = e.stopped;
    e.stopped = "none";
    if (stopped === "headers") {
      const buffered = e.buffered;
      const trailers = e.trailers;
      e.buffered = null;
      e.trailers = null;
      this.respHeaders = null;
      this.sendHeadersDownstream(e.headers as HeaderMap, e.headersEos);
      if (e.headersEos) return;
      if (buffered) this.filterCall(() => this.respDataToFilter(buffered.bytes(), e.eos && !trailers));
      if (trailers) this.encodeTrailers(trailers);
    } else if (stopped === "data") {
      const trailers = e.trailers ?? e.addedTrailers;
      e.trailers = null;
      const data = e.buffered?.bytes() ?? new Uint8Array(0);
      e.buffered = null;
      this.bufferingResp = false;
      this.respBody = null;
      if (data.length > 0 || e.eos) this.sendDataDownstream(data, e.eos && !trailers);
      if (trailers && e.eos) this.sendTrailersDownstream(trailers);
    } else if (stopped === "trailers" && e.trailers) {
      this.flushEncBuffered(false);
      const t = e.trailers;
      e.trailers = null;
      this.sendTrailersDownstream(t);
    }
  }

  private sendHeadersDownstream(h: HeaderMap, eos: boolean): void {
    this.enc.headersPassed = true;
    this.sink.responseHeaders(h, eos);
    if (eos) this.finish();
  }
  private sendDataDownstream(d: Uint8Array, eos: boolean): void {
    this.sink.responseData(d, eos);
    if (eos) this.finish();
  }
  private sendTrailersDownstream(t: HeaderMap): void {
    this.finalRespTrailers = t;
    this.sink.responseTrailers(t);
    this.finish();
  }

  // ---- FilterManager pieces ---------------------------------------------------------------

  /** Buffers data while the filter is stopped; false when the 413/500 limit reply fired. */
  private fmBuffer(d: Direction, chunk: Uint8Array, eos: boolean, request: boolean): boolean {
    if (d.buffered) d.buffered.append(chunk);
    else d.buffered = new MutableBuffer(chunk.slice());
    d.eos = eos;
    return !this.overLimit(d, request);
  }

  /**
   * The filter manager's buffer is a watermark buffer whose high watermark is the listener's
   * per_connection_buffer_limit_bytes (FilterManager createBuffer/buffer_limit_). Past it,
   * requestDataTooLarge: in watermark (streaming) mode — headers StopAllIterationAndWatermark or
   * data StopIterationAndWatermark — the client is read-disabled (backpressure, no reply);
   * otherwise 413 Payload Too Large (request_payload_too_large). On the response side 500, or a
   * reset once headers went out; response watermark mode is not emulated (it keeps buffering).
   * True when a local reply or reset ended the stream.
   */
  private overLimit(d: Direction, request: boolean): boolean {
    const size = d.buffered?.bytes().length ?? 0;
    if (size <= this.core().bufferLimitBytes) return false;
    if (d.mode === "nobuffer") return false;
    if (d.mode === "watermark") {
      if (request && !d.aboveHighWatermark) {
        d.aboveHighWatermark = true;
        this.sink.readDisable?.(true);
      }
      return false;
    }
    if (request) this.localReply(413, Buffer.from("Payload Too Large"), [], "request_payload_too_large");
    else if (!this.enc.headersPassed) {
      this.localReply(500, Buffer.from("Internal Server Error"), [], "response_payload_too_large");
    } else this.reset("response_payload_too_large");
    return true;
  }

  /** requestDataDrained: the read-disabled client may send again. */
  private belowLowWatermark(): void {
    if (!this.dec.aboveHighWatermark) return;
    this.dec.aboveHighWatermark = false;
    this.sink.readDisable?.(false);
  }

  /** Envoy's sendLocalReply: encoded through this filter unless the stream already failed. */
  localReply(code: number, body: Uint8Array, extra: Array<[string, string]>, details: string): void {
    if (this.completed) return;
    this.info.responseCodeDetails = details;
    this.dec.ended = true;
    this.reqHeaders = null;
    this.reqBody = null;
    this.reqTrailers = null;
    this.bufferingReq = false;
    if (this.dec.headersPassed) this.sink.abortUpstream();
    if (this.enc.headersPassed) {
      this.reset(details);
      return;
    }
    // Http::Utility::sendLocalReply: `:status`, then the filter's extra headers (modify_headers,
    // in order), then with a body content-length and — only if no content-type was given —
    // content-type: text/plain; without a body both are removed, even ones the filter passed
    // (the HTTP/1 codec writes content-length: 0 on the wire).
    const h = new HeaderMap([[":status", String(code)]]);
    for (const [k, v] of extra) h.add(k, v);
    if (body.length > 0) {
      h.set("content-length", String(body.length));
      if (h.get("content-type") === undefined) h.add("content-type", "text/plain");
    } else {
      h.remove("content-length");
      h.remove("content-type");
    }
    // FilterManager::sendLocalReply: once a response entered the encoder filters, the local reply
    // goes straight to the codec (sendDirectLocalReply) instead of through the filters again.
    const direct = this.enc.headers !== null;
    this.enc = fresh();
    this.respHeaders = null;
    this.respBody = null;
    this.bufferingResp = false;
    if (direct) {
      this.enc.ended = true;
      this.finalResp = h;
      this.info.responseCode = code;
      this.enc.headersPassed = true;
      this.sink.responseHeaders(h, body.length === 0);
      if (body.length > 0) this.sink.responseData(body, true);
      this.finish();
      return;
    }
    this.encodeHeaders(h, body.length === 0);
    if (body.length > 0) this.encodeData(body, true);
  }

  reset(reason: string): void {
    if (this.completed) return;
    this.dec.ended = true;
    this.enc.ended = true;
    if (this.info.responseCodeDetails === undefined) this.info.responseCodeDetails = reason;
    this.sink.abortUpstream();
    this.sink.resetDownstream(reason);
    this.finish();
  }

  // ---- VM calls with CHECK_FAIL and the status conversions of src/context.cc ---------------

  private core() {
    return this.thread.core;
  }

  private onCreate(): void {
    if (!this.contextCreated && !this.thread.failed) {
      this.thread.deferred(() =>
        this.thread.call(this.ctx, "proxy_on_context_create", this.id, this.ctx.rootId),
      );
    }
    this.contextCreated = true;
  }

  /** CHECK_FAIL_HTTP: FAIL_OPEN continues; otherwise one 503 local reply, encoded around the VM. */
  private checkFail(): "open" | "closed" | null {
    if (!this.thread.failed) return null;
    if (this.core().failurePolicy === "FAIL_OPEN") return "open";
    if (!this.streamFailed) {
      this.streamFailed = true;
      this.failureLocalReplySent = true;
      this.schedule(() => this.localReply(503, new Uint8Array(0), [], "wasm_fail_stream"));
    }
    return "closed";
  }

  private runHeaders(fn: string, n: number, eos: boolean): HStatus {
    const pre = this.checkFail();
    if (pre) return pre === "open" ? "continue" : "stopWatermark";
    const raw = this.thread.deferred(() => {
      const r = this.thread.call(this.ctx, fn, this.id, n, eos ? 1 : 0);
      if (this.checkFail()) return this.thread.failed && this.core().failurePolicy === "FAIL_OPEN" ? 0 : 4;
      if (this.thread.isNextIterationStopped || (r ?? 0) > HeadersStatus.StopAllIterationAndWatermark)
        return 4;
      // ABI 0.2.x: StopIteration becomes StopAllIterationAndWatermark (proxy-wasm-cpp-host #143)
      // unless the plugin sets allow_on_headers_stop_iteration (Envoy ≥ 1.35).
      if (r === HeadersStatus.StopIteration) return this.core().allowOnHeadersStopIteration ? 1 : 4;
      return r ?? 0;
    });
    if (raw === HeadersStatus.StopIteration) return "stopIteration";
    if (raw === HeadersStatus.StopAllIterationAndBuffer) return "stopBuffer";
    if (raw === HeadersStatus.StopAllIterationAndWatermark) return "stopWatermark";
    return "continue"; // 0 Continue and 2 ContinueAndEndStream both map to Continue in Envoy
  }

  private runData(fn: string, n: number, eos: boolean): DStatus {
    const pre = this.checkFail();
    if (pre) return pre === "open" ? "continue" : "nobuffer";
    const raw = this.thread.deferred(() => {
      const r = this.thread.call(this.ctx, fn, this.id, n, eos ? 1 : 0);
      if (this.checkFail()) return this.thread.failed && this.core().failurePolicy === "FAIL_OPEN" ? 0 : 3;
      if (this.thread.isNextIterationStopped || (r ?? 0) > DataStatus.StopIterationNoBuffer) return 3;
      return r ?? 0;
    });
    return (["continue", "buffer", "watermark", "nobuffer"] as const)[raw] ?? "nobuffer";
  }

  private runTrailers(fn: string, n: number): "continue" | "stop" {
    const pre = this.checkFail();
    if (pre) return pre === "open" ? "continue" : "stop";
    const raw = this.thread.deferred(() => {
      const r = this.thread.call(this.ctx, fn, this.id, n);
      if (this.checkFail()) return this.thread.failed && this.core().failurePolicy === "FAIL_OPEN" ? 0 : 1;
      if (this.thread.isNextIterationStopped || (r ?? 0) > 1) return 1;
      return r ?? 0;
    });
    return raw === 0 ? "continue" : "stop";
  }

  /** Actions that re-enter the filter chain wait until the chain's current step returns. */
  private filterCall(f: () => void): void {
    this.inFilter++;
    try {
      f();
    } finally {
      this.inFilter--;
    }
    if (this.inFilter === 0) {
      while (this.pending.length > 0) (this.pending.shift() as () => void)();
    }
  }

  private schedule(f: () => void): void {
    if (this.inFilter > 0) this.pending.push(f);
    else f();
  }

  /** Stream end: access log (on_log), then filter destruction (on_done, on_delete). */
  private finish(): void {
    if (this.completed) return;
    this.completed = true;
    this.dec.ended = true;
    this.enc.ended = true;
    this.info.endTimeMs = Date.now();
    this.belowLowWatermark();
    const t = this.thread;
    if (!this.contextCreated) this.onCreate();
    if (!t.failed) {
      this.accessLogPhase = true;
      this.reqHeaders = null;
      this.respHeaders = null;
      this.reqTrailers = null;
      this.respTrailers = null;
      t.deferred(() => t.call(this.ctx, "proxy_on_log", this.id));
      this.accessLogPhase = false;
    }
    if (!this.destroyed && this.contextCreated) {
      this.destroyed = true;
      if (!t.failed) t.deferred(() => t.call(this.ctx, "proxy_on_done", this.id));
      if (!t.failed) t.deferred(() => t.call(this.ctx, "proxy_on_delete", this.id));
    }
    t.contexts.delete(this.id);
    this.sink.done();
  }
}
