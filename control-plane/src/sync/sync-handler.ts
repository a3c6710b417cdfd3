// GET /v1/sync?epoch=E&version=V — the long poll every gateway's leader runs
// (DESIGN §4). Answers at once when there are changes after V; otherwise waits up to
// longPollMs and answers an empty page. A different epoch (control-plane restart, another
// replica) or a version ahead of ours means the gateway's cache is not ours: resend
// everything from version 0 with the reset flag.
import type { IncomingMessage, ServerResponse } from "node:http";
import { hasValidBearer, sendUnauthorized } from "../api/bearer-auth.ts";
import { sendJsonError } from "../api/json-error.ts";
import type { GatewayRegistry } from "./gateways.ts";
import { encodeSyncPage, SyncFlags } from "./sync-codec.ts";
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

export function createSyncHandler(opts: SyncHandlerOptions) {
  return async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    if (!hasValidBearer(req, opts.authToken)) {
      sendUnauthorized(res);
      return;
    }
    const epochText = url.searchParams.get("epoch") ?? "0";
    const versionText = url.searchParams.get("version") ?? "0";
    if (!DECIMAL_U64.test(epochText) || !DECIMAL_U64.test(versionText)) {
      sendJsonError(res, 400, "epoch and version must be unsigned decimal integers", "bad_request");
      return;
    }
    const maxBytesText = url.searchParams.get("max_bytes");
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

    if (since === opts.log.version && flags === 0) {
      const closed = new AbortController();
      res.once("close", () => closed.abort());
      await opts.log.waitForChange(since, opts.longPollMs, closed.signal);
      if (closed.signal.aborted) return;
    }

    const { entries, more } = opts.log.changesSince(since, pageBytes);
    if (more) flags |= SyncFlags.more;
    const version = entries.length > 0 ? (entries[entries.length - 1] as { version: number }).version : since;
    const gatewayId = req.headers["x-kvroute-gateway"];
    opts.gateways.seen(
      typeof gatewayId === "string" && gatewayId.length > 0
        ? gatewayId.slice(0, 128)
        : (req.socket.remoteAddress ?? "unknown"),
      req.socket.remoteAddress ?? "unknown",
      version,
      (flags & SyncFlags.reset) !== 0,
    );
    const body = encodeSyncPage({ flags, epoch: opts.epoch, version, entries });
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": body.length });
    res.end(body);
  };
}
