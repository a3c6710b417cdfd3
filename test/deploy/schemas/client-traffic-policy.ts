// ClientTrafficPolicy spec, checked against envoyproxy/gateway v1.9.0 api/v1alpha1/clienttrafficpolicy_types.go, connection_types.go and shared_types.go (HTTPHeaderFilter).
// In depth: connection (ClientConnection, with ConnectionLimit) and headers (HeaderSettings, with
// earlyRequestHeaders and lateResponseHeaders as Envoy Gateway's HTTPHeaderFilter); by name and
// type: every other field of the spec. CEL rules left out: which target-reference combination is allowed, and that
// the targets are Gateways or ListenerSets.

import { boolean, int32, int64, list, object, oneOf, quantity, string, unmodeled } from "./build.ts";
import { policyTargetReferences } from "./gateway-api.ts";

/** Quantity with an optional binary or decimal suffix; a bare number is bytes. */
const BYTES = "^[1-9]+[0-9]*([EPTGMK]i|[EPTGMk])?$";

/** Gateway API's Duration (GEP-2257). */
const duration = string({ pattern: "^([0-9]{1,5}(h|m|s|ms)){1,4}$" });

const connection = object({
  connectionLimit: object({
    value: int64({ minimum: 1 }),
    closeDelay: duration,
    maxConnectionDuration: duration,
    maxRequestsPerConnection: int32(),
    maxStreamDuration: duration,
  }),
  bufferLimit: quantity(BYTES),
  socketBufferLimit: quantity(BYTES),
  maxAcceptPerSocketEvent: int32(),
});

/** Gateway API's HTTPHeader: an RFC 7230 token name and a value. */
const httpHeader = object(
  {
    name: string({ minLength: 1, maxLength: 256, pattern: "^[A-Za-z0-9!#$%&'*+\\-.^_\\x60|~]+$" }),
    value: string({ minLength: 1, maxLength: 4096 }),
  },
  ["name", "value"],
);
const headerList = list(httpHeader, {
  minItems: 1,
  maxItems: 64,
  "x-kubernetes-list-type": "map",
  "x-kubernetes-list-map-keys": ["name"],
});

/** Envoy Gateway's copy of Gateway API's HTTPHeaderFilter (64 items, addIfAbsent, removeOnMatch). */
const httpHeaderFilter = object({
  set: headerList,
  add: headerList,
  addIfAbsent: headerList,
  remove: list(string(), { minItems: 1, maxItems: 64, "x-kubernetes-list-type": "set" }),
  removeOnMatch: list(
    object(
      {
        type: oneOf("Exact", "Prefix", "Suffix", "RegularExpression"),
        value: string({ minLength: 1, maxLength: 1024 }),
      },
      ["value"],
    ),
    { minItems: 1, maxItems: 64 },
  ),
});

const headers = object({
  enableEnvoyHeaders: boolean,
  disableRateLimitHeaders: boolean,
  xForwardedClientCert: unmodeled("object"),
  withUnderscoresAction: oneOf("Allow", "RejectRequest", "DropHeader"),
  preserveXRequestID: boolean,
  requestID: oneOf("PreserveOrGenerate", "Preserve", "Generate", "Disable"),
  earlyRequestHeaders: httpHeaderFilter,
  lateResponseHeaders: httpHeaderFilter,
  host: object({ stripTrailingHostDot: boolean }),
  maxRequestHeaderLimit: quantity(BYTES),
});

export const clientTrafficPolicySpec = object({
  ...policyTargetReferences,
  tcpKeepalive: unmodeled("object"),
  enableProxyProtocol: boolean,
  proxyProtocol: unmodeled("object"),
  clientIPDetection: unmodeled("object"),
  tls: unmodeled("object"),
  path: unmodeled("object"),
  headers,
  timeout: unmodeled("object"),
  connection,
  http1: unmodeled("object"),
  http2: unmodeled("object"),
  http3: unmodeled("object"),
  grpc: unmodeled("object"),
  healthCheck: unmodeled("object"),
  scheme: oneOf("Preserve", "MatchBackend"),
});
