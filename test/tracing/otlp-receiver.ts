// An OTLP/HTTP trace receiver on loopback, as a collector's otlphttp receiver: POST /v1/traces
// with an ExportTraceServiceRequest in protobuf (the SDK's default protocol, http/protobuf) or
// JSON, decoded with protobufjs from OpenTelemetry's official .proto files. Those files come from
// npm: `otlp-protos` in package.json is an alias of @opentelemetry/otlp-grpc-exporter-base@0.34.0,
// the last release that shipped opentelemetry-proto's sources (trace messages unchanged since).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import protobuf from "protobufjs";

const PROTOS = new URL("../../node_modules/otlp-protos/build/protos/", import.meta.url).pathname;

export interface ReceivedSpan {
  name: string;
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  /** Attribute values as plain strings, numbers and booleans. */
  attributes: Record<string, string | number | boolean>;
  /** The resource's service.name. */
  service: string;
}

interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string;
  doubleValue?: number;
}
interface KeyValue {
  key: string;
  value?: AnyValue;
}
interface DecodedSpan {
  name: string;
  traceId: Uint8Array;
  spanId: Uint8Array;
  parentSpanId?: Uint8Array;
  kind?: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: KeyValue[];
}
interface DecodedRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{ spans?: DecodedSpan[] }>;
  }>;
}

function plain(v: AnyValue | undefined): string | number | boolean {
  if (v === undefined) return "";
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  return "";
}

const attributesOf = (kvs: KeyValue[] | undefined) =>
  Object.fromEntries((kvs ?? []).map((kv) => [kv.key, plain(kv.value)]));
const hex = (b: Uint8Array | undefined) => Buffer.from(b ?? []).toString("hex");

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Paths and content types of every request (only traces are expected). */
  readonly requests: Array<{ path: string; contentType: string }> = [];
  #server: Server | null = null;
  #request: protobuf.Type | null = null;
  url = "";

  async start(): Promise<void> {
    const root = new protobuf.Root();
    root.resolvePath = (_origin, target) => (target.startsWith("/") ? target : `${PROTOS}${target}`);
    await root.load("opentelemetry/proto/collector/trace/v1/trace_service.proto", { keepCase: false });
    this.#request = root.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest");
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const contentType = req.headers["content-type"] ?? "";
        this.requests.push({ path: req.url ?? "", contentType });
        if (req.method !== "POST" || req.url !== "/v1/traces") {
          res.writeHead(404).end();
          return;
        }
        this.#accept(Buffer.concat(chunks), contentType);
        // An empty ExportTraceServiceResponse: full success.
        res.writeHead(200, { "content-type": contentType }).end(contentType.includes("json") ? "{}" : "");
      });
    });
    await new Promise<void>((r) => this.#server?.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  #accept(body: Buffer, contentType: string): void {
    const type = this.#request as protobuf.Type;
    const message = contentType.includes("json")
      ? type.fromObject(JSON.parse(body.toString()))
      : type.decode(body);
    // As a plain object: only the fields present (a oneof's unset members are absent, not
    // defaults), 64-bit integers as decimal strings.
    const decoded = type.toObject(message, { longs: String, defaults: false }) as DecodedRequest;
    for (const rs of decoded.resourceSpans ?? []) {
      const service = String(attributesOf(rs.resource?.attributes)["service.name"] ?? "");
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? [])
          this.spans.push({
            name: s.name,
            traceId: hex(s.traceId),
            spanId: hex(s.spanId),
            parentSpanId: hex(s.parentSpanId),
            kind: s.kind ?? 0,
            startNs: BigInt(s.startTimeUnixNano),
            endNs: BigInt(s.endTimeUnixNano),
            attributes: attributesOf(s.attributes),
            service,
          });
    }
  }

  named(name: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.name === name);
  }

  async close(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((r) => this.#server?.close(r));
  }
}
