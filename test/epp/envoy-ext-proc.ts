// A client that speaks to an ext_proc server the way Envoy's ext_proc filter does
// (source/extensions/filters/http/ext_proc, processing_mode.proto), for the modes GAIE gateways
// use:
// - FULL_DUPLEX_STREAMED: request headers, then every body chunk as it arrives without waiting
//   for answers (end_of_stream on the last); the server answers the headers and then streams the
//   body back (StreamedBodyResponse, end_of_stream on the last); the upstream request is built
//   from the mutated headers and the re-streamed body. Same on the response path.
// - BUFFERED: request headers, wait for their answer; then the whole body in one message with
//   end_of_stream, wait for its answer (header mutations apply there too, and body_mutation.body
//   replaces the body); same on the response path.
// An ImmediateResponse ends the exchange with that status. Every answer is checked against the
// protocol (which phase it may answer, in order); a violation fails the request loudly.
import {
  type ClientDuplexStream,
  credentials,
  loadPackageDefinition,
  type ServiceClientConstructor,
} from "@grpc/grpc-js";
import type {
  CommonResponse,
  HeaderMutation,
  ProcessingRequest,
  ProcessingResponse,
  ProtoStruct,
} from "../../control-plane/src/epp/messages.ts";
import { protoDefinitions } from "../../control-plane/src/epp/protos.ts";

type Pairs = Array<[string, string]>;
type Mode = "FULL_DUPLEX_STREAMED" | "BUFFERED";
const MODE_NUMBER: Record<Mode, number> = { BUFFERED: 2, FULL_DUPLEX_STREAMED: 4 };

// biome-ignore lint/suspicious/noExplicitAny: the generated client constructors are untyped
const pkg = loadPackageDefinition(protoDefinitions) as any;
const ExternalProcessor = pkg.envoy.service.ext_proc.v3.ExternalProcessor as ServiceClientConstructor;
const Health = pkg.grpc.health.v1.Health as ServiceClientConstructor;

export interface UpstreamAnswer {
  status: number;
  headers: Pairs;
  /** Body chunks as the upstream sent them. */
  chunks: Buffer[];
  /** The endpoint that served (reported back as envoy.lb / x-gateway-destination-endpoint-served). */
  served?: string;
}

export interface ExchangeOptions {
  mode?: Mode;
  /** Send protocol_config on the first message (Envoy ≥ 1.36 does); default true. */
  protocolConfig?: boolean;
  /** How the client's body reaches Envoy: chunk size of the request body messages. */
  chunkBytes?: number;
  /** filter_metadata of every message (metadata_context), e.g. the subset hint. */
  metadata?: Record<string, ProtoStruct>;
  /** Added to the response-phase metadata_context (Envoy reports the endpoint that served). */
  responseMetadata?: Record<string, ProtoStruct>;
  attributes?: Record<string, ProtoStruct>;
  /** Request trailers after the body. */
  trailers?: Pairs;
  /** Awaited after the request headers went out and before the body does (a slow client upload). */
  beforeBody?: () => Promise<void>;
  /** How this Envoy's setCopy treats a header present several times (default: replaces every copy). */
  setCopy?: SetCopy;
}

export interface ExchangeResult {
  /** Set when the server answered with an ImmediateResponse. */
  immediate?: { status: number; headers: Pairs; body: Buffer; details: string };
  /** The request as the upstream receives it. */
  upstreamHeaders: Pairs;
  upstreamBody: Buffer;
  destination: string | undefined;
  dynamicMetadata: ProtoStruct | undefined;
  clearRouteCache: boolean;
  /** The response as the client receives it. */
  response?: { status: number; headers: Pairs; body: Buffer };
  /** Every answer, in order (kind names). */
  answers: string[];
  /** The body chunks of the request the server streamed back. */
  streamedChunks: number[];
  /** The request phase's header mutations, in the order Envoy applied them (empty ones included). */
  requestMutations: HeaderMutation[];
  /** The endpoint that answered (the first of the list that accepted the connection). */
  served?: string;
}

/** Reads a duplex call message by message. */
class Inbox {
  private readonly queue: ProcessingResponse[] = [];
  private waiting: ((m: ProcessingResponse | Error) => void) | null = null;
  private failure: Error | null = null;
  constructor(call: ClientDuplexStream<ProcessingRequest, ProcessingResponse>) {
    call.on("data", (m: ProcessingResponse) => {
      if (this.waiting !== null) {
        const w = this.waiting;
        this.waiting = null;
        w(m);
      } else this.queue.push(m);
    });
    const fail = (e: Error) => {
      this.failure = e;
      if (this.waiting !== null) {
        const w = this.waiting;
        this.waiting = null;
        w(e);
      }
    };
    call.on("error", (e: Error) => fail(e));
    call.on("end", () => fail(new Error("the server ended the stream")));
  }
  next(): Promise<ProcessingResponse> {
    const m = this.queue.shift();
    if (m !== undefined) return Promise.resolve(m);
    if (this.failure !== null) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.waiting = (x) => (x instanceof Error ? reject(x) : resolve(x));
    });
  }
  pending(): number {
    return this.queue.length;
  }
}

function kindOf(r: ProcessingResponse): string {
  for (const k of [
    "request_headers",
    "response_headers",
    "request_body",
    "response_body",
    "request_trailers",
    "response_trailers",
    "immediate_response",
  ] as const)
    if (r[k] !== undefined) return k;
  return "none";
}

function headerMap(pairs: Pairs) {
  return { headers: pairs.map(([key, value]) => ({ key, raw_value: Buffer.from(value) })) };
}

/**
 * How Envoy's HeaderMapImpl::setCopy overwrites a header the map holds several times: every copy
 * goes (Envoy since `http_set_copy_replace_all_headers`), or only the first is replaced and the
 * others stay (Envoy before it, or with that runtime guard off).
 */
export type SetCopy = "replace-all" | "first-only";

/**
 * Envoy's HeaderMutation application (ext_proc mutation_utils.cc applyHeaderMutations): every
 * remove_headers entry first, then set_headers in order (overwrite or append).
 */
export function applyMutation(
  pairs: Pairs,
  m: HeaderMutation | undefined,
  setCopy: SetCopy = "replace-all",
): Pairs {
  const removed = new Set((m?.remove_headers ?? []).map((h) => h.toLowerCase()));
  let out: Pairs = pairs.filter(([k]) => !removed.has(k.toLowerCase())).map(([k, v]) => [k, v]);
  for (const o of m?.set_headers ?? []) {
    const key = o.header.key.toLowerCase();
    const value =
      o.header.raw_value !== undefined && o.header.raw_value.length > 0
        ? Buffer.from(o.header.raw_value).toString()
        : (o.header.value ?? "");
    if (o.append_action === 0) out.push([key, value]);
    else {
      const at = out.findIndex(([k]) => k.toLowerCase() === key);
      if (at >= 0) {
        out[at] = [key, value];
        if (setCopy === "replace-all") out = out.filter(([k], i) => k.toLowerCase() !== key || i === at);
      } else out.push([key, value]);
    }
  }
  return out;
}

export class EnvoyExtProc {
  // biome-ignore lint/suspicious/noExplicitAny: generated client
  private readonly client: any;
  // biome-ignore lint/suspicious/noExplicitAny: generated client
  private readonly health: any;

  constructor(readonly address: string) {
    this.client = new ExternalProcessor(address, credentials.createInsecure());
    this.health = new Health(address, credentials.createInsecure());
  }

  close(): void {
    this.client.close();
    this.health.close();
  }

  /** A raw stream, for protocol-violation tests. */
  openRaw(): ClientDuplexStream<ProcessingRequest, ProcessingResponse> {
    return this.client.Process();
  }

  /** A stream that writes raw bytes as one gRPC message (a malformed ProcessingRequest). */
  openBytes(): ClientDuplexStream<Buffer, ProcessingResponse> {
    return this.client.makeBidiStreamRequest(
      "/envoy.service.ext_proc.v3.ExternalProcessor/Process",
      (b: Buffer) => b,
      (b: Buffer) => ExternalProcessor.service.Process?.responseDeserialize(b),
    );
  }

  check(service: string): Promise<{ status: number } | { code: number }> {
    return new Promise((resolve) => {
      this.health.Check({ service }, (err: { code: number } | null, res: { status: number }) =>
        resolve(err !== null ? { code: err.code } : { status: res.status ?? 0 }),
      );
    });
  }

  /**
   * One HTTP request through the ext_proc filter: the request phase, then (unless answered
   * immediately) `upstream` with the mutated request, then the response phase.
   */
  async exchange(
    req: { method?: string; path: string; headers?: Pairs; body?: Buffer | string },
    upstream: (headers: Pairs, body: Buffer) => Promise<UpstreamAnswer>,
    o: ExchangeOptions = {},
  ): Promise<ExchangeResult> {
    const run = new ExchangeRun(
      this.client.Process() as ClientDuplexStream<ProcessingRequest, ProcessingResponse>,
      req,
      o,
    );
    run.sendRequestHeaders();
    const immediate = run.duplex ? await run.duplexRequestPhase() : await run.bufferedRequestPhase();
    if (immediate !== null) return immediate;
    run.endRequestPhase();
    return run.responsePhase(upstream);
  }
}

/** One exchange's state, as an Envoy ext_proc filter keeps it for one HTTP stream. */
class ExchangeRun {
  readonly duplex: boolean;
  private readonly mode: Mode;
  private readonly body: Buffer;
  private readonly headers: Pairs;
  private readonly inbox: Inbox;
  private readonly result: ExchangeResult = {
    upstreamHeaders: [],
    upstreamBody: Buffer.alloc(0),
    destination: undefined,
    dynamicMetadata: undefined,
    clearRouteCache: false,
    answers: [],
    streamedChunks: [],
    requestMutations: [],
  };
  private readonly meta: { metadata_context?: { filter_metadata: Record<string, ProtoStruct> } };
  private readonly trailers: Pairs | undefined;
  private readonly hasBody: boolean;
  private upstreamHeaders: Pairs;
  private upstreamBody: Buffer;

  constructor(
    private readonly call: ClientDuplexStream<ProcessingRequest, ProcessingResponse>,
    req: { method?: string; path: string; headers?: Pairs; body?: Buffer | string },
    private readonly o: ExchangeOptions,
  ) {
    this.mode = o.mode ?? "FULL_DUPLEX_STREAMED";
    this.duplex = this.mode === "FULL_DUPLEX_STREAMED";
    const body = typeof req.body === "string" ? Buffer.from(req.body) : (req.body ?? Buffer.alloc(0));
    this.body = body;
    this.headers = [
      [":method", req.method ?? "POST"],
      [":path", req.path],
      [":authority", "gateway.example"],
      [":scheme", "http"],
      ...(req.headers ?? []),
      ...(body.length > 0 ? ([["content-length", String(body.length)]] as Pairs) : []),
    ];
    this.inbox = new Inbox(call);
    this.meta = o.metadata !== undefined ? { metadata_context: { filter_metadata: o.metadata } } : {};
    this.hasBody = body.length > 0;
    this.trailers = o.trailers;
    this.upstreamHeaders = this.headers;
    this.upstreamBody = body;
  }

  sendRequestHeaders(): void {
    const { o, mode } = this;
    const first = {
      ...(o.protocolConfig === false
        ? {}
        : {
            protocol_config: {
              request_body_mode: MODE_NUMBER[mode],
              response_body_mode: MODE_NUMBER[mode],
            },
          }),
      ...(o.attributes !== undefined ? { attributes: o.attributes } : {}),
    };
    this.call.write({
      request_headers: {
        headers: headerMap(this.headers),
        end_of_stream: !this.hasBody && this.trailers === undefined,
      },
      ...this.meta,
      ...first,
    });
  }

  private async take(): Promise<ProcessingResponse> {
    const r = await this.inbox.next();
    this.result.answers.push(kindOf(r));
    return r;
  }

  private immediate(r: ProcessingResponse): ExchangeResult {
    const ir = r.immediate_response;
    if (ir === undefined) throw new Error("not an immediate response");
    this.result.immediate = {
      status: ir.status.code,
      headers: applyMutation([], ir.headers),
      body: Buffer.from(ir.body ?? new Uint8Array(0)),
      details: ir.details ?? "",
    };
    this.call.end();
    return this.result;
  }

  private common(c: CommonResponse | undefined): void {
    if (c?.clear_route_cache === true) this.result.clearRouteCache = true;
    this.result.requestMutations.push(c?.header_mutation ?? {});
    this.upstreamHeaders = applyMutation(this.upstreamHeaders, c?.header_mutation, this.o.setCopy);
  }

  /** FULL_DUPLEX_STREAMED: the whole request is sent, then the answers are read in order. */
  async duplexRequestPhase(): Promise<ExchangeResult | null> {
    const { call, body, meta, trailers, hasBody, o, result } = this;
    const chunk = o.chunkBytes ?? 16 * 1024;
    if (hasBody) await o.beforeBody?.();
    for (let at = 0; at < body.length; at += chunk)
      call.write({
        request_body: {
          body: body.subarray(at, at + chunk),
          end_of_stream: at + chunk >= body.length && trailers === undefined,
        },
        ...meta,
      });
    if (trailers !== undefined) call.write({ request_trailers: { trailers: headerMap(trailers) }, ...meta });
    const h = await this.take();
    if (h.immediate_response !== undefined) return this.immediate(h);
    if (h.request_headers === undefined)
      throw new Error(`expected the request headers answer, got ${kindOf(h)}`);
    result.dynamicMetadata = h.dynamic_metadata;
    this.common(h.request_headers.response);
    if (hasBody) {
      const parts: Buffer[] = [];
      for (;;) {
        const b = await this.take();
        if (b.immediate_response !== undefined) return this.immediate(b);
        const s = b.request_body?.response?.body_mutation?.streamed_response;
        if (s === undefined) throw new Error(`expected a streamed request body, got ${kindOf(b)}`);
        parts.push(Buffer.from(s.body ?? new Uint8Array(0)));
        result.streamedChunks.push(s.body?.length ?? 0);
        if (s.end_of_stream === true) break;
        if (trailers !== undefined && parts.reduce((n, p) => n + p.length, 0) >= body.length) break;
      }
      this.upstreamBody = Buffer.concat(parts);
    }
    if (trailers !== undefined) {
      const t = await this.take();
      if (t.request_trailers === undefined) throw new Error(`expected the trailers answer, got ${kindOf(t)}`);
    }
    return null;
  }

  /** BUFFERED: headers, their answer, then the whole body and its answer, then trailers. */
  async bufferedRequestPhase(): Promise<ExchangeResult | null> {
    const { call, body, meta, trailers, hasBody, o, result } = this;
    const h = await this.take();
    if (h.immediate_response !== undefined) return this.immediate(h);
    if (h.request_headers === undefined)
      throw new Error(`expected the request headers answer, got ${kindOf(h)}`);
    if (h.dynamic_metadata !== undefined) result.dynamicMetadata = h.dynamic_metadata;
    this.common(h.request_headers.response);
    if (hasBody) {
      await o.beforeBody?.();
      call.write({ request_body: { body, end_of_stream: trailers === undefined }, ...meta });
      const b = await this.take();
      if (b.immediate_response !== undefined) return this.immediate(b);
      if (b.request_body === undefined) throw new Error(`expected the request body answer, got ${kindOf(b)}`);
      if (b.dynamic_metadata !== undefined) result.dynamicMetadata = b.dynamic_metadata;
      const c = b.request_body.response;
      this.common(c);
      if (c?.body_mutation?.body !== undefined) this.upstreamBody = Buffer.from(c.body_mutation.body);
      if (c?.body_mutation?.streamed_response !== undefined)
        throw new Error("a streamed body answer in BUFFERED mode");
    }
    if (trailers !== undefined) {
      call.write({ request_trailers: { trailers: headerMap(trailers) }, ...meta });
      const t = await this.take();
      if (t.request_trailers === undefined) throw new Error(`expected the trailers answer, got ${kindOf(t)}`);
    }
    return null;
  }

  /** The request as the upstream gets it, and the destination the picker chose. */
  endRequestPhase(): void {
    const { result } = this;
    if (this.inbox.pending() > 0) throw new Error("the server answered more than the request phase asked");
    result.upstreamHeaders = this.upstreamHeaders;
    result.upstreamBody = this.upstreamBody;
    const lb =
      result.dynamicMetadata?.fields?.["envoy.lb"]?.structValue?.fields?.["x-gateway-destination-endpoint"];
    result.destination = lb?.stringValue;
  }

  /** The upstream answers; its response goes through the filter like Envoy's encoder path. */
  async responsePhase(
    upstream: (headers: Pairs, body: Buffer) => Promise<UpstreamAnswer>,
  ): Promise<ExchangeResult> {
    const { call, o, result } = this;
    const answer = await upstream(this.upstreamHeaders, this.upstreamBody);
    // Envoy reports the endpoint that served in the response phase's metadata (GAIE protocol).
    const served: Record<string, ProtoStruct> =
      answer.served === undefined
        ? {}
        : {
            "envoy.lb": {
              fields: { "x-gateway-destination-endpoint-served": { stringValue: answer.served } },
            },
          };
    const respMeta = {
      metadata_context: {
        filter_metadata: { ...(o.metadata ?? {}), ...served, ...(o.responseMetadata ?? {}) },
      },
    };
    result.served = answer.served;
    const respHeaders: Pairs = [[":status", String(answer.status)], ...answer.headers];
    const bodyChunks = answer.chunks.filter((c) => c.length > 0);
    call.write({
      response_headers: { headers: headerMap(respHeaders), end_of_stream: bodyChunks.length === 0 },
      ...respMeta,
    });
    const rh = await this.take();
    if (rh.response_headers === undefined)
      throw new Error(`expected the response headers answer, got ${kindOf(rh)}`);
    const clientHeaders = applyMutation(respHeaders, rh.response_headers.response?.header_mutation);
    const clientBody = await this.responseBody(bodyChunks, respMeta);
    call.end();
    result.response = {
      status: Number(clientHeaders.find(([k]) => k === ":status")?.[1] ?? 0),
      headers: clientHeaders.filter(([k]) => k !== ":status"),
      body: Buffer.concat(clientBody),
    };
    return result;
  }

  /** The response body through the filter: streamed chunk by chunk, or buffered whole. */
  private async responseBody(bodyChunks: Buffer[], respMeta: object): Promise<Buffer[]> {
    const { call } = this;
    const clientBody: Buffer[] = [];
    if (this.duplex) {
      bodyChunks.forEach((c, i) => {
        call.write({ response_body: { body: c, end_of_stream: i === bodyChunks.length - 1 }, ...respMeta });
      });
      if (bodyChunks.length > 0)
        for (;;) {
          const b = await this.take();
          const s = b.response_body?.response?.body_mutation?.streamed_response;
          if (s === undefined) throw new Error(`expected a streamed response body, got ${kindOf(b)}`);
          clientBody.push(Buffer.from(s.body ?? new Uint8Array(0)));
          if (s.end_of_stream === true) break;
        }
    } else if (bodyChunks.length > 0) {
      const all = Buffer.concat(bodyChunks);
      call.write({ response_body: { body: all, end_of_stream: true }, ...respMeta });
      const b = await this.take();
      if (b.response_body === undefined)
        throw new Error(`expected the response body answer, got ${kindOf(b)}`);
      const replaced = b.response_body.response?.body_mutation?.body;
      clientBody.push(replaced !== undefined ? Buffer.from(replaced) : all);
    }
    return clientBody;
  }
}

/**
 * The upstream as a GAIE data plane reaches it (Envoy's override_host policy reads the ordered
 * list): the first endpoint of x-gateway-destination-endpoint, then — when a connection is
 * refused — the next ones in order, as retries walk the list. `served` is the one that answered.
 */
export async function forward(headers: Pairs, body: Buffer): Promise<UpstreamAnswer> {
  const get = (k: string) => headers.find(([n]) => n === k)?.[1];
  const list = get("x-gateway-destination-endpoint");
  if (list === undefined) throw new Error("no destination header");
  const out = new Headers();
  for (const [k, v] of headers)
    if (!k.startsWith(":") && k !== "content-length" && k !== "host") out.append(k, v);
  let lastError: unknown;
  for (const dest of list.split(",").map((d) => d.trim())) {
    let res: Response;
    try {
      res = await fetch(`http://${dest}${get(":path")}`, {
        method: get(":method") ?? "POST",
        headers: out,
        ...(body.length > 0 ? { body: new Uint8Array(body) } : {}),
      });
    } catch (err) {
      lastError = err;
      continue;
    }
    const chunks: Buffer[] = [];
    if (res.body !== null) for await (const c of res.body) chunks.push(Buffer.from(c));
    const pairs: Pairs = [];
    res.headers.forEach((v, k) => {
      if (k !== "content-length" && k !== "transfer-encoding" && k !== "connection" && k !== "keep-alive")
        pairs.push([k, v]);
    });
    return { status: res.status, headers: pairs, chunks, served: dest };
  }
  throw new Error(`no endpoint of ${list} answered: ${String(lastError)}`);
}
