// POST /v1/report: a gateway leader's batch of in-flight counts, finished requests and
// speculative routes. Decoded whole, then handed to the model; a malformed report is a 400
// with the reason and changes nothing.
import type { IncomingMessage, ServerResponse } from "node:http";
import { hasValidBearer, sendUnauthorized } from "../common/bearer-auth.ts";
import { sendJsonError } from "../common/json-error.ts";
import { decodeReport, type Report, ReportDecodeError } from "./report-codec.ts";

export interface ReportHandlerOptions {
  authToken: string | undefined;
  maxBytes: number;
  /** `body` is the report as the gateway sent it (relayed whole to peer replicas). */
  apply: (report: Report, remoteAddress: string, body: Uint8Array) => void;
}

async function readBody(req: IncomingMessage, maxBytes: number): Promise<Uint8Array | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export function createReportHandler(opts: ReportHandlerOptions) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (!hasValidBearer(req, opts.authToken)) {
      sendUnauthorized(res);
      return;
    }
    const body = await readBody(req, opts.maxBytes);
    if (body === null) {
      sendJsonError(res, 413, `report larger than ${opts.maxBytes} bytes`, "too_large");
      req.resume();
      return;
    }
    let report: Report;
    try {
      report = decodeReport(body);
    } catch (err) {
      if (!(err instanceof ReportDecodeError)) throw err;
      sendJsonError(res, 400, err.message, "bad_report");
      return;
    }
    opts.apply(report, req.socket.remoteAddress ?? "unknown", body);
    res.writeHead(204).end();
  };
}
