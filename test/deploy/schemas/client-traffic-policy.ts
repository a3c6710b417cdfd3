// ClientTrafficPolicy spec, checked against envoyproxy/gateway v1.9.0 api/v1alpha1/clienttrafficpolicy_types.go and connection_types.go.
// In depth: connection (ClientConnection, with ConnectionLimit); by name and type: every other
// field of the spec. CEL rules left out: which target-reference combination is allowed, and that
// the targets are Gateways or ListenerSets.

import { boolean, int32, int64, object, oneOf, quantity, string, unmodeled } from "./build.ts";
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

export const clientTrafficPolicySpec = object({
  ...policyTargetReferences,
  tcpKeepalive: unmodeled("object"),
  enableProxyProtocol: boolean,
  proxyProtocol: unmodeled("object"),
  clientIPDetection: unmodeled("object"),
  tls: unmodeled("object"),
  path: unmodeled("object"),
  headers: unmodeled("object"),
  timeout: unmodeled("object"),
  connection,
  http1: unmodeled("object"),
  http2: unmodeled("object"),
  http3: unmodeled("object"),
  grpc: unmodeled("object"),
  healthCheck: unmodeled("object"),
  scheme: oneOf("Preserve", "MatchBackend"),
});
