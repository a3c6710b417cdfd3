// Building ext_proc ProcessingResponses: header/body/trailer answers, the body re-streamed in
// chunks, immediate responses. No decisions here.
import type { HeaderMutation, ImmediateResponse, ProcessingResponse, ProtoStruct } from "./messages.ts";
import { OVERWRITE_IF_EXISTS_OR_ADD } from "./messages.ts";

/**
 * Largest streamed body chunk we send. Envoy recommends ≤ 64 KiB per StreamedBodyResponse
 * (processing_mode.proto, FULL_DUPLEX_STREAMED); llm-d-router sends 62,000 bytes for a margin
 * (pkg/common/envoy BodyByteLimit), and so do we.
 */
export const STREAMED_CHUNK_BYTES = 62_000;

export type Direction = "request" | "response";

export function headersResponse(
  dir: Direction,
  mutation: HeaderMutation | undefined,
  clearRouteCache: boolean,
  metadata?: ProtoStruct,
): ProcessingResponse {
  const response = {
    response: {
      ...(mutation !== undefined && !isEmpty(mutation) ? { header_mutation: mutation } : {}),
      ...(clearRouteCache ? { clear_route_cache: true } : {}),
    },
  };
  return {
    ...(dir === "request" ? { request_headers: response } : { response_headers: response }),
    ...(metadata !== undefined ? { dynamic_metadata: metadata } : {}),
  };
}

/** BUFFERED / STREAMED modes: one answer per body message; mutations only in BUFFERED (Envoy's rule). */
export function bodyResponse(
  dir: Direction,
  opts: {
    mutation?: HeaderMutation;
    body?: Uint8Array;
    clearRouteCache?: boolean;
    metadata?: ProtoStruct;
  } = {},
): ProcessingResponse {
  const response = {
    response: {
      ...(opts.mutation !== undefined && !isEmpty(opts.mutation) ? { header_mutation: opts.mutation } : {}),
      ...(opts.body !== undefined ? { body_mutation: { body: opts.body } } : {}),
      ...(opts.clearRouteCache ? { clear_route_cache: true } : {}),
    },
  };
  return {
    ...(dir === "request" ? { request_body: response } : { response_body: response }),
    ...(opts.metadata !== undefined ? { dynamic_metadata: opts.metadata } : {}),
  };
}

/** FULL_DUPLEX_STREAMED: the body as StreamedBodyResponses of at most STREAMED_CHUNK_BYTES. */
export function streamedBody(dir: Direction, body: Uint8Array, endOfStream: boolean): ProcessingResponse[] {
  const out: ProcessingResponse[] = [];
  const one = (chunk: Uint8Array, eos: boolean): ProcessingResponse => {
    const response = {
      response: { body_mutation: { streamed_response: { body: chunk, end_of_stream: eos } } },
    };
    return dir === "request" ? { request_body: response } : { response_body: response };
  };
  if (body.length === 0) return [one(body, endOfStream)];
  for (let at = 0; at < body.length; at += STREAMED_CHUNK_BYTES) {
    const end = Math.min(body.length, at + STREAMED_CHUNK_BYTES);
    out.push(one(body.subarray(at, end), endOfStream && end === body.length));
  }
  return out;
}

export function trailersResponse(dir: Direction): ProcessingResponse {
  return dir === "request" ? { request_trailers: {} } : { response_trailers: {} };
}

/** Status codes Envoy's HttpStatus accepts (envoy.type.v3.StatusCode, validated defined_only). */
const ENVOY_STATUS_CODES = new Set([
  100, 200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 307, 308, 400, 401,
  402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 421, 422, 423, 424, 426,
  428, 429, 431, 500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511,
]);

/** Headers Envoy's local reply writes itself (Http::Utility::sendLocalReply). */
const REPLY_OWNED = new Set([":status", "content-length"]);

export function immediateResponse(
  status: number,
  headers: Array<[string, string]>,
  body: Uint8Array,
  details: string,
): ProcessingResponse {
  const set_headers = headers
    .filter(([k]) => !REPLY_OWNED.has(k))
    .map(([key, value]) => ({
      header: { key, raw_value: Buffer.from(value, "utf8") },
      append_action: OVERWRITE_IF_EXISTS_OR_ADD,
    }));
  const reply: ImmediateResponse = {
    // A code Envoy would refuse (its enum is validated) becomes 500 rather than a rejected answer.
    status: { code: ENVOY_STATUS_CODES.has(status) ? status : 500 },
    ...(set_headers.length > 0 ? { headers: { set_headers } } : {}),
    ...(body.length > 0 ? { body } : {}),
    details,
  };
  return { immediate_response: reply };
}

/** A JSON error body in the filter's own shape (filter/assembly/stream.ts reject/failMode). */
export function jsonError(status: number, message: string, type: string, code: string, details: string) {
  const body = Buffer.from(JSON.stringify({ error: { message, type, code } }));
  return immediateResponse(status, [["content-type", "application/json"]], body, details);
}

function isEmpty(m: HeaderMutation): boolean {
  return (m.set_headers?.length ?? 0) === 0 && (m.remove_headers?.length ?? 0) === 0;
}
