// One error shape for every control-plane endpoint: {"error": {"message", "code"}}.
import type { ServerResponse } from "node:http";

export function sendJsonError(
  res: ServerResponse,
  status: number,
  message: string,
  code: string,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify({ error: { message, code } });
  res.writeHead(status, {
    ...headers,
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}
