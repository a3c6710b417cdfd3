// One HTTP/1.1 request written byte for byte on its own connection. fetch() cannot send what
// the near-miss tests need: it trims header values, refuses NUL bytes and merges repeated
// fields into one line.
import { connect } from "node:net";

export interface RawResponse {
  status: number;
  body: string;
}

/**
 * `fieldLines` are complete header lines ("Name: value"), written as latin1 so each char is
 * one byte on the wire; Host, Connection: close and Content-Length are added.
 */
export function rawRequest(
  url: string,
  method: string,
  fieldLines: string[],
  body: Uint8Array = new Uint8Array(),
): Promise<RawResponse> {
  const target = new URL(url);
  const head = [
    `${method} ${target.pathname}${target.search} HTTP/1.1`,
    `Host: ${target.host}`,
    "Connection: close",
    `Content-Length: ${body.length}`,
    ...fieldLines,
    "",
    "",
  ].join("\r\n");
  return new Promise((resolve, reject) => {
    const socket = connect(Number(target.port), target.hostname);
    const chunks: Buffer[] = [];
    socket.on("data", (d) => chunks.push(d));
    socket.on("error", reject);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("latin1");
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(text);
      if (status === null) {
        reject(new Error(`no HTTP response: ${JSON.stringify(text.slice(0, 80))}`));
        return;
      }
      const bodyAt = text.indexOf("\r\n\r\n");
      resolve({ status: Number(status[1]), body: bodyAt < 0 ? "" : text.slice(bodyAt + 4) });
    });
    socket.write(Buffer.from(head, "latin1"));
    socket.end(body);
  });
}
