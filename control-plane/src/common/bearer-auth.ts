// Bearer-token check for the endpoints gateways call (/v1/sync, /v1/report), following
// RFC 6750 §2.1: `Authorization: Bearer <token>`. The scheme is case-insensitive (RFC 9110
// §11.1), so `bearer` and `BEARER` count; the separator is one or more spaces (a tab is not
// one); the token must equal the configured one byte for byte. Whitespace around the whole
// field value is not part of the value (RFC 9110 §5.5: Node's parser strips it before we
// see it). The rules and their near misses are in docs/operations.md and test/api/.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { sendJsonError } from "./json-error.ts";

const SCHEME = /^bearer +/i;

/** SHA-256 of the bytes: equal-length inputs for a comparison that leaks neither bytes nor length. */
const digest = (bytes: Buffer): Buffer => createHash("sha256").update(bytes).digest();

/** True when no token is configured (local use) or the request carries exactly that token. */
export function hasValidBearer(req: IncomingMessage, token: string | undefined): boolean {
  if (token === undefined) return true;
  // Authorization is a singleton field. Node keeps only the first of several, but a proxy in
  // front may have acted on another: a request that carries two is ambiguous and refused.
  const fields = req.headersDistinct.authorization;
  if (fields === undefined || fields.length !== 1) return false;
  const field = fields[0] as string;
  const scheme = SCHEME.exec(field);
  if (scheme === null) return false;
  // Node decodes header bytes as latin1, so this gives back exactly the bytes on the wire.
  const given = Buffer.from(field.slice(scheme[0].length), "latin1");
  return timingSafeEqual(digest(given), digest(Buffer.from(token, "latin1")));
}

/** 401 with the challenge RFC 6750 §3 requires, in the control plane's error shape. */
export function sendUnauthorized(res: ServerResponse): void {
  sendJsonError(res, 401, "missing or wrong bearer token", "unauthorized", {
    "www-authenticate": 'Bearer realm="kvroute"',
  });
}
