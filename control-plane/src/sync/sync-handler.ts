// GET /v1/sync?epoch=E&version=V[&protocol=3] — the long poll every gateway's leader runs
// (DESIGN §4). Answers at once when there are changes after V; otherwise waits up to
// longPollMs and answers an empty page. A different epoch (control-plane restart, another
// replica) or a version ahead of ours means the gateway's cache is not ours: resend
// everything from version 0 with the reset flag.
import type { IncomingMessage, ServerResponse } from "node:http";
import { hasValidBearer, sendUnauthorized } from "../common/bearer-auth.ts";
import { sendJsonError } from "../common/json-error.ts";
import type { GatewayRegistry } from "./gateways.ts";
import { SyncFlags } from "./sync-codec.ts";
import type { SyncLog } from "./sync-log.ts";

export interface SyncHandlerOptions {
  log: SyncLog;
  epoch: bigint;
  gateways: GatewayRegistry;
  authToken: string | undefined;
  longPollMs: number;
  pageBytes: number;
}

const DECIMAL_U64 = /^(0|[1-9]\d{0,19})$/;

/** The answer to one poll, given the log as it is now: a page, or "wait for news" (long poll). */
export type SyncAnswer = { wait: true } | { wait: false; body: Uint8Array; version: number; reset: boolean };

/**
 * Decides a poll from its query (epoch, version, max_bytes): a reset from version 0 for another
 * epoch or a version ahead of ours, "wait" when the client is current, else the next page. Pure
 * over the log, so the quality bench's virtual-time control plane answers polls as this handler
 * does. Null when the query is malformed.
 */
export function syncAnswer(
  opts: Pick<SyncHandlerOptions, "log" | "epoch" | "pageBytes">,
  query: URLSearchParams,
  mayWait: boolean,
): SyncAnswer | null {
  const epochText = query.get("epoch") ?? "0";
  const versionText = query.get("version") ?? "0";
  if (!DECIMAL_U64.test(epochText) || !DECIMAL_U64.test(versionText)) return null;
  const maxBytesText = query.get("max_bytes");
  const pageBytes =
    maxBytesText !== null && /^\d{1,10}$/.test(maxBytesText)
      ? Math.min(Number(maxBytesText), opts.pageBytes)
      : opts.pageBytes;

  let since = Number(versionText);
  let flags = 0;
  if (BigInt(epochText) !== opts.epoch || since > opts.log.version) {
    since = 0;
    flags |= SyncFlags.reset;
  }
  if (mayWait && since === opts.log.version && flags === 0) return { wait: true };

  // A gateway that reads patches of segment-row images (protocol=3) gets changed buckets as
  // patches of its images; any other (an older filter asks protocol=2) gets values.
  const page = opts.log.writePage(since, pageBytes, query.get("protocol") === "3", flags, opts.epoch);
  return { wait: false, body: page.body, version: page.version, reset: (flags & SyncFlags.reset) !== 0 };
}

export function createSyncHandler(opts: SyncHandlerOptions) {
  return async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    if (!hasValidBearer(req, opts.authToken)) {
      sendUnauthorized(res);
      return;
    }
    let answer = syncAnswer(opts, url.searchParams, true);
    if (answer === null) {
      sendJsonError(res, 400, "epoch and version must be unsigned decimal integers", "bad_request");
      return;
    }
    if (answer.wait) {
      const closed = new AbortController();
      res.once("close", () => closed.abort());
      await opts.log.waitForChange(opts.log.version, opts.longPollMs, closed.signal);
      if (closed.signal.aborted) return;
      answer = syncAnswer(opts, url.searchParams, false) as Exclude<SyncAnswer, { wait: true }>;
    }
    if (answer.wait) return;
    const gatewayId = req.headers["x-kvroute-gateway"];
    opts.gateways.seen(
      typeof gatewayId === "string" && gatewayId.length > 0
        ? gatewayId.slice(0, 128)
        : (req.socket.remoteAddress ?? "unknown"),
      req.socket.remoteAddress ?? "unknown",
      answer.version,
      answer.reset,
    );
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": answer.body.length });
    res.end(answer.body);
  };
}
