// Bearer-token check for the endpoints gateways call (/v1/sync, /v1/report).
import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

/** True when no token is configured (local use) or the request carries exactly that token. */
export function hasValidBearer(req: IncomingMessage, token: string | undefined): boolean {
  if (token === undefined) return true;
  const header = req.headers.authorization;
  if (header === undefined || !header.startsWith("Bearer ")) return false;
  const given = Buffer.from(header.slice(7));
  const want = Buffer.from(token);
  // Constant time, so the token cannot be guessed byte by byte from response timing.
  return given.length === want.length && timingSafeEqual(given, want);
}
