// One ext_proc stream = one HTTP stream through the embedded filter. Envoy's messages drive the
// host stream (request headers → on_request_headers, body chunks → on_request_body, the
// response's headers/body/trailers → the filter's response callbacks, the stream's end →
// on_log), and what the filter passes on comes back as ext_proc answers: the request headers it
// continued with become a header mutation (set + remove) plus `envoy.lb` dynamic metadata and
// clear_route_cache; the body it continued with is re-streamed (FULL_DUPLEX_STREAMED) or
// replaces the buffered one (BUFFERED); a local reply becomes an ImmediateResponse with its
// status, headers and body. So the decision is the shipped filter's by construction.
//
// Order (Envoy's ext_proc contract): in FULL_DUPLEX_STREAMED the headers answer is held until
// the filter continued (after the whole body), then the body follows in ≤ 62,000-byte chunks;
// in BUFFERED/STREAMED every message gets exactly one answer, so the header answer is a CONTINUE
// that only removes the client's routing headers, and the filter's mutations ride on the body
// answer (BUFFERED applies header mutations there).
//
// Client routing headers (client-headers.ts): every answer that lets the request go upstream
// removes the client's copies — the decision's answer, and the request headers answer sent
// before the filter ran (BUFFERED), which a gateway failing open (failure_mode_allow) forwards as
// it stands. The filter is not shown the client's destination header, so the destination and the
// `envoy.lb` metadata can only name its pick or anyEndpoint()'s.
import type { FilterChainSink, HeaderMap as HostHeaderMap, HttpStream } from "../../../host/index.ts";
import { HeaderMap } from "../../../host/index.ts";
import { traceEppDecision } from "../tracing/epp-decision.ts";
import { clientRoutingHeaders, withoutRoutingHeaders } from "./client-headers.ts";
import { headerMutation, type Pairs, pairsOf } from "./header-mutation.ts";
import {
  DESTINATION_HEADER,
  destinationMetadata,
  filterMetadataJson,
  servedEndpoint,
  subsetHint,
} from "./lb-metadata.ts";
import {
  BodySendMode,
  type HeaderMutation,
  type ProcessingRequest,
  type ProcessingResponse,
} from "./messages.ts";
import {
  bodyResponse,
  headersResponse,
  immediateResponse,
  jsonError,
  streamedBody,
  trailersResponse,
} from "./responses.ts";

export interface ExchangeDeps {
  /**
   * A new stream of the embedded filter, with the client's address when the gateway sent it and
   * the request's dynamic metadata (the subset hint travels there, as in Envoy).
   */
  newStream(
    sink: FilterChainSink,
    source: { address: string; port: number },
    metadata: Record<string, Record<string, unknown>>,
  ): HttpStream;
  /** Body modes when the gateway does not say (ProcessingRequest.protocol_config). */
  requestBodyMode: number;
  responseBodyMode: number;
  /** Is this an inference request the filter routes (method and path)? */
  isInference(method: string, path: string): boolean;
  /** Some ready endpoint, for requests the filter does not route (GET /v1/models …); null when none. */
  anyEndpoint(): string | null;
  send(resp: ProcessingResponse): void;
  /** Ends the gRPC call with INVALID_ARGUMENT. */
  invalid(details: string): void;
  /** Observations for metrics and logs. */
  observe?(event: ExchangeEvent): void;
  /**
   * The request headers as the embedded filter is to see them (the objective's priority,
   * objective.ts); the header mutation is still computed against the gateway's own headers.
   */
  filterHeaders?(pairs: Pairs): Pairs;
}

export type ExchangeEvent =
  | { kind: "routed"; destination: string }
  | { kind: "immediate"; status: number; details: string }
  | { kind: "served"; destination: string; served: string };

type Phase = "idle" | "request" | "response" | "done";

/** An address as Envoy writes `upstream.address`: IPv4 `a.b.c.d:port` or IPv6 `[…]:port`. */
const IP_PORT = /^(?:[0-9.]+|\[[0-9a-fA-F:.]+\]):[0-9]{1,5}$/;

export class Exchange implements FilterChainSink {
  private phase: Phase = "idle";
  private stream: HttpStream | null = null;
  private reqMode: number;
  private respMode: number;
  private observability = false;
  private original: Pairs = [];
  private method = "";
  private path = "";
  private subset: string[] | null = null;
  private received: Buffer[] = [];
  /**
   * Request headers not yet shown to the filter: they wait for the first body chunk (or the
   * trailers) so the filter sees both in one turn. Were they decoded at once, the filter would
   * wait a gRPC round trip for the body, and under load that can outlast its body wait, after
   * which it routes without the body (no model, no prefix).
   */
  private heldHeaders: { seen: Pairs } | null = null;
  // What the filter passed on (the sink side of the host stream).
  private passedHeaders: HostHeaderMap | null = null;
  private passedBody: Buffer[] = [];
  private passedEos = false;
  private headersAnswered = false;
  private destination = "";
  private localReply: { headers: Pairs; body: Buffer[] } | null = null;
  private responseOut: { headers: Pairs | null; body: Array<[Buffer, boolean]> } = {
    headers: null,
    body: [],
  };
  private resetReason: string | null = null;

  constructor(private readonly deps: ExchangeDeps) {
    this.reqMode = deps.requestBodyMode;
    this.respMode = deps.responseBodyMode;
  }

  /** One ProcessingRequest from the gateway. */
  onMessage(req: ProcessingRequest): void {
    if (this.phase === "done") return; // after an immediate response Envoy ignores the rest
    if (req.observability_mode === true) this.observability = true;
    switch (req.request) {
      case "request_headers":
        this.onRequestHeaders(req);
        break;
      case "request_body":
        this.onRequestBody(req);
        break;
      case "request_trailers":
        this.onRequestTrailers(req);
        break;
      case "response_headers":
        this.onResponseHeaders(req);
        break;
      case "response_body":
        this.onResponseBody(req);
        break;
      case "response_trailers":
        this.onResponseTrailers(req);
        break;
      default:
        this.deps.invalid("ProcessingRequest carries none of request_headers … response_trailers");
        break;
    }
  }

  /** The gateway closed the stream (end of the HTTP stream, or a reset): on_log runs now if not yet. */
  end(): void {
    if (this.stream !== null && !this.stream.completed) this.stream.reset("downstream_remote_disconnect");
    this.phase = "done";
  }

  // ---- request phase -----------------------------------------------------------------------

  private onRequestHeaders(req: ProcessingRequest): void {
    if (this.phase !== "idle") {
      this.deps.invalid("request_headers after the request started");
      return;
    }
    const pc = req.protocol_config;
    if (pc?.request_body_mode !== undefined) this.reqMode = pc.request_body_mode;
    if (pc?.response_body_mode !== undefined) this.respMode = pc.response_body_mode;
    const h = req.request_headers ?? {};
    this.original = pairsOf(h.headers?.headers);
    this.method = this.original.find(([k]) => k === ":method")?.[1] ?? "";
    this.path = this.original.find(([k]) => k === ":path")?.[1] ?? "";
    if (this.method === "" || this.path === "") {
      this.deps.invalid("request_headers without :method and :path");
      return;
    }
    this.subset = subsetHint(req);
    this.phase = "request";
    this.stream = this.deps.newStream(this, sourceOf(req), filterMetadataJson(req));
    const seen = withoutRoutingHeaders(this.deps.filterHeaders?.(this.original) ?? this.original);
    if (h.end_of_stream === true) {
      this.stream.decodeHeaders(new HeaderMap(seen), true);
      this.afterRequestStep("headers");
      return;
    }
    this.heldHeaders = { seen };
    // Envoy sends the body only after this answer in BUFFERED and STREAMED modes; in
    // FULL_DUPLEX_STREAMED the headers answer waits for the filter's decision.
    if (this.reqMode !== BodySendMode.FULL_DUPLEX_STREAMED)
      this.send(headersResponse("request", this.clientHeadersRemoval(), false));
  }

  /** Removes the client's routing headers: the request headers answer sent before the filter decided. */
  private clientHeadersRemoval(): HeaderMutation {
    return { set_headers: [], remove_headers: clientRoutingHeaders(this.original) };
  }

  /** Shows the held request headers to the filter, just before the message that follows them. */
  private releaseHeaders(stream: HttpStream): void {
    const held = this.heldHeaders;
    if (held === null) return;
    this.heldHeaders = null;
    stream.decodeHeaders(new HeaderMap(held.seen), false);
  }

  private onRequestBody(req: ProcessingRequest): void {
    if (this.phase !== "request" || this.stream === null) {
      this.deps.invalid("request_body outside the request phase");
      return;
    }
    const b = req.request_body ?? {};
    const chunk = Buffer.from(b.body ?? new Uint8Array(0));
    if (!this.headersAnswered) this.received.push(chunk);
    this.releaseHeaders(this.stream);
    if (this.localReply !== null || this.resetReason !== null) {
      this.answerImmediate();
      return;
    }
    this.stream.decodeData(chunk, b.end_of_stream === true);
    this.afterRequestStep("body");
  }

  private onRequestTrailers(req: ProcessingRequest): void {
    if (this.phase !== "request" || this.stream === null) {
      this.deps.invalid("request_trailers outside the request phase");
      return;
    }
    this.releaseHeaders(this.stream);
    if (this.localReply !== null || this.resetReason !== null) {
      this.answerImmediate();
      return;
    }
    this.stream.decodeTrailers(new HeaderMap(pairsOf(req.request_trailers?.trailers?.headers)));
    this.afterRequestStep("trailers");
  }

  /** After the filter saw a request message: answer what can be answered, in Envoy's order. */
  private afterRequestStep(step: "headers" | "body" | "trailers"): void {
    if (this.localReply !== null || this.resetReason !== null) {
      this.answerImmediate();
      return;
    }
    const duplex = this.reqMode === BodySendMode.FULL_DUPLEX_STREAMED;
    if (this.passedHeaders !== null && !this.headersAnswered) {
      if (!this.decide()) return;
      const mutation = headerMutation(
        this.original,
        this.passedHeaders.pairs(),
        clientRoutingHeaders(this.original),
      );
      const metadata = destinationMetadata(this.destination);
      this.headersAnswered = true;
      if (duplex || step === "headers") {
        this.send(headersResponse("request", mutation, true, metadata));
        if (duplex) this.flushRequestBody();
      } else {
        const body = Buffer.concat(this.passedBody);
        const changed = !body.equals(Buffer.concat(this.received));
        this.passedBody = [];
        this.send(
          bodyResponse("request", {
            mutation,
            clearRouteCache: true,
            metadata,
            ...(changed && step === "body" ? { body } : {}),
          }),
        );
      }
      this.received = [];
    } else if (this.headersAnswered) {
      if (duplex) this.flushRequestBody();
      else if (step === "body") {
        this.passedBody = [];
        this.send(bodyResponse("request"));
      }
    } else if (!duplex) {
      // The filter waits for the body, but Envoy sends it only after this answer.
      if (step === "headers") this.send(headersResponse("request", this.clientHeadersRemoval(), false));
      else if (step === "body") this.send(bodyResponse("request"));
    }
    if (step === "trailers" && this.phase === "request") this.send(trailersResponse("request"));
  }

  /**
   * The filter continued: check its pick against the protocol (a destination for every
   * inference request, inside the gateway's subset) before telling the gateway. False when an
   * immediate response was sent instead.
   */
  private decide(): boolean {
    const h = this.passedHeaders as HostHeaderMap;
    let dest = h.get(DESTINATION_HEADER) ?? "";
    if (dest === "") {
      if (this.deps.isInference(this.method, this.path)) {
        // The filter failed open (no healthy slot): a GAIE gateway has no other upstream.
        this.immediate(
          jsonError(
            503,
            "no ready endpoint",
            "service_unavailable",
            "no_healthy_upstream",
            "kvroute_epp_no_endpoint",
          ),
        );
        return false;
      }
      // Not an inference request (GET /v1/models …): any ready endpoint can answer it, as
      // llm-d-router does for requests without a body.
      dest = this.deps.anyEndpoint() ?? "";
      if (dest === "") {
        this.immediate(
          jsonError(
            503,
            "no ready endpoint",
            "service_unavailable",
            "no_healthy_upstream",
            "kvroute_epp_no_endpoint",
          ),
        );
        return false;
      }
      h.set(DESTINATION_HEADER, dest);
    }
    if (this.subset !== null) {
      const allowed = new Set(this.subset);
      const picks = dest.split(",").map((s) => s.trim());
      if (!picks.every((p) => allowed.has(p))) {
        this.immediate(
          jsonError(
            503,
            "no eligible endpoint in the gateway's subset",
            "service_unavailable",
            "no_eligible_endpoint",
            "kvroute_epp_subset_empty",
          ),
        );
        return false;
      }
    }
    this.destination = dest;
    this.deps.observe?.({ kind: "routed", destination: dest });
    traceEppDecision(this.original, h.pairs(), dest);
    return true;
  }

  private flushRequestBody(): void {
    if (this.passedBody.length === 0 && !this.passedEos) return;
    const body = Buffer.concat(this.passedBody);
    this.passedBody = [];
    const eos = this.passedEos;
    this.passedEos = false;
    for (const r of streamedBody("request", body, eos)) this.send(r);
  }

  /** A local reply of the filter (or the host's 413/503), or a reset, as an ImmediateResponse. */
  private answerImmediate(): void {
    const reply = this.localReply;
    if (reply === null) {
      this.immediate(
        jsonError(503, "the request was reset", "service_unavailable", "reset", this.resetReason ?? "reset"),
      );
      return;
    }
    const status = Number(reply.headers.find(([k]) => k === ":status")?.[1] ?? 503);
    const details = this.stream?.info.responseCodeDetails ?? "kvroute_local_reply";
    this.localReply = null;
    this.immediate(immediateResponse(status, reply.headers, Buffer.concat(reply.body), details), false);
  }

  private immediate(resp: ProcessingResponse, resetStream = true): void {
    this.send(resp);
    const ir = resp.immediate_response;
    if (ir !== undefined)
      this.deps.observe?.({ kind: "immediate", status: ir.status.code, details: ir.details ?? "" });
    this.phase = "done";
    // The request never reaches an upstream: end the filter's stream (on_log, in-flight down).
    if (resetStream && this.stream !== null && !this.stream.completed)
      this.stream.reset("epp_immediate_response");
  }

  // ---- response phase ----------------------------------------------------------------------

  private onResponseHeaders(req: ProcessingRequest): void {
    if (this.stream === null || (this.phase !== "request" && this.phase !== "response")) {
      this.deps.invalid("response_headers before request_headers");
      return;
    }
    this.releaseHeaders(this.stream);
    this.phase = "response";
    const served = servedEndpoint(req);
    if (served !== null && this.destination !== "" && served !== this.destination.split(",")[0])
      this.deps.observe?.({ kind: "served", destination: this.destination, served });
    // The filter learns the served endpoint as it would in Envoy: the `upstream.address`
    // attribute of the attempt that answered. It checks the address against its slots itself;
    // Envoy's attribute is always an ip:port, so nothing else is passed as one.
    if (served !== null && IP_PORT.test(served)) this.stream.info.upstreamAddress = served;
    const h = req.response_headers ?? {};
    const before = pairsOf(h.headers?.headers);
    this.stream.encodeHeaders(new HeaderMap(before), h.end_of_stream === true);
    const out = this.responseOut.headers;
    this.responseOut.headers = null;
    this.send(headersResponse("response", headerMutation(before, out ?? before), false));
  }

  private onResponseBody(req: ProcessingRequest): void {
    if (this.phase !== "response" || this.stream === null) {
      this.deps.invalid("response_body before response_headers");
      return;
    }
    const b = req.response_body ?? {};
    const eos = b.end_of_stream === true;
    this.stream.encodeData(Buffer.from(b.body ?? new Uint8Array(0)), eos);
    const out = this.responseOut.body;
    this.responseOut.body = [];
    if (this.respMode === BodySendMode.FULL_DUPLEX_STREAMED) {
      for (const [chunk, end] of out) for (const r of streamedBody("response", chunk, end)) this.send(r);
    } else this.send(bodyResponse("response"));
    if (eos) this.phase = "done";
  }

  private onResponseTrailers(req: ProcessingRequest): void {
    if (this.phase !== "response" || this.stream === null) {
      this.deps.invalid("response_trailers before response_headers");
      return;
    }
    this.stream.encodeTrailers(new HeaderMap(pairsOf(req.response_trailers?.trailers?.headers)));
    this.send(trailersResponse("response"));
    this.phase = "done";
  }

  private send(resp: ProcessingResponse): void {
    if (!this.observability) this.deps.send(resp);
  }

  // ---- FilterChainSink: what the filter passes on ------------------------------------------

  requestHeaders(h: HostHeaderMap): void {
    this.passedHeaders = h;
  }
  requestData(d: Uint8Array, endStream: boolean): void {
    this.passedBody.push(Buffer.from(d));
    if (endStream) this.passedEos = true;
  }
  requestTrailers(): void {}
  abortUpstream(): void {}
  responseHeaders(h: HostHeaderMap): void {
    // Before the response phase, a response can only be the filter's local reply.
    if (this.phase === "request") this.localReply = { headers: h.pairs(), body: [] };
    else this.responseOut.headers = h.pairs();
  }
  responseData(d: Uint8Array, endStream: boolean): void {
    if (this.localReply !== null) this.localReply.body.push(Buffer.from(d));
    else this.responseOut.body.push([Buffer.from(d), endStream]);
  }
  responseTrailers(): void {}
  resetDownstream(reason: string): void {
    if (this.phase === "request" && this.localReply === null) this.resetReason = reason;
  }
  done(): void {}
}

/** The client's address, when the gateway sends the `source.address` attribute. */
function sourceOf(req: ProcessingRequest): { address: string; port: number } {
  for (const ns of Object.values(req.attributes ?? {})) {
    const v = ns.fields?.["source.address"]?.stringValue;
    if (typeof v !== "string") continue;
    const m = /^\[?([0-9a-fA-F:.]+?)\]?:(\d+)$/.exec(v);
    if (m !== null) return { address: m[1] as string, port: Number(m[2]) };
  }
  // Unknown: an address no CIDR contains, so a trusted-CIDR check in the filter fails closed.
  return { address: "unknown", port: 0 };
}
