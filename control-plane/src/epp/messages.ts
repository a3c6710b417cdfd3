// The ext_proc and health messages as @grpc/proto-loader hands them to us and takes them back
// (keepCase, enums as numbers, bytes as Buffer, oneofs named): only the fields kvroute reads or
// writes. Field meanings: Envoy's api/envoy/service/ext_proc/v3/external_processor.proto.

export interface HeaderValue {
  key: string;
  value?: string;
  raw_value?: Uint8Array;
}

export interface HeaderValueOption {
  header: HeaderValue;
  /** envoy.config.core.v3.HeaderValueOption.HeaderAppendAction */
  append_action?: number;
}

/**
 * google.protobuf.Value / Struct as proto-loader decodes them with `oneofs: true`. protobufjs
 * defines the well-known types itself, with camelCase field names whatever `keepCase` says.
 */
export interface ProtoValue {
  kind?: string;
  nullValue?: number;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: ProtoStruct;
  listValue?: { values?: ProtoValue[] };
}
export interface ProtoStruct {
  fields?: Record<string, ProtoValue>;
}

export interface HttpHeaders {
  headers?: { headers?: HeaderValue[] };
  end_of_stream?: boolean;
}
export interface HttpBody {
  body?: Uint8Array;
  end_of_stream?: boolean;
}
export interface HttpTrailers {
  trailers?: { headers?: HeaderValue[] };
}

export interface ProtocolConfiguration {
  request_body_mode?: number;
  response_body_mode?: number;
  send_body_without_waiting_for_header_response?: boolean;
}

export type RequestKind =
  | "request_headers"
  | "response_headers"
  | "request_body"
  | "response_body"
  | "request_trailers"
  | "response_trailers";

export interface ProcessingRequest {
  request?: RequestKind;
  request_headers?: HttpHeaders;
  response_headers?: HttpHeaders;
  request_body?: HttpBody;
  response_body?: HttpBody;
  request_trailers?: HttpTrailers;
  response_trailers?: HttpTrailers;
  metadata_context?: { filter_metadata?: Record<string, ProtoStruct> };
  attributes?: Record<string, ProtoStruct>;
  observability_mode?: boolean;
  protocol_config?: ProtocolConfiguration;
}

export interface HeaderMutation {
  set_headers?: HeaderValueOption[];
  remove_headers?: string[];
}

export interface CommonResponse {
  status?: number;
  header_mutation?: HeaderMutation;
  body_mutation?: { body?: Uint8Array; clear_body?: boolean; streamed_response?: StreamedBody };
  clear_route_cache?: boolean;
}
export interface StreamedBody {
  body: Uint8Array;
  end_of_stream: boolean;
}

export interface ImmediateResponse {
  status: { code: number };
  headers?: HeaderMutation;
  body?: Uint8Array;
  details?: string;
}

export interface ProcessingResponse {
  request_headers?: { response: CommonResponse };
  response_headers?: { response: CommonResponse };
  request_body?: { response: CommonResponse };
  response_body?: { response: CommonResponse };
  request_trailers?: { header_mutation?: HeaderMutation };
  response_trailers?: { header_mutation?: HeaderMutation };
  immediate_response?: ImmediateResponse;
  dynamic_metadata?: ProtoStruct;
}

/** envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode */
export const BodySendMode = {
  NONE: 0,
  STREAMED: 1,
  BUFFERED: 2,
  BUFFERED_PARTIAL: 3,
  FULL_DUPLEX_STREAMED: 4,
  GRPC: 5,
} as const;

/** envoy.config.core.v3.HeaderValueOption.HeaderAppendAction */
export const OVERWRITE_IF_EXISTS_OR_ADD = 2;

/** grpc.health.v1.HealthCheckResponse.ServingStatus */
export const ServingStatus = { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } as const;
