// proxy_http_call as Envoy implements it (context.cc Context::httpCall + onHttpCallSuccess/
// onHttpCallFailure): always on behalf of a root context (the caller's own root: exports.cc
// http_call uses root_context()); negative timeout, unknown cluster, or missing
// :path/:method/:authority → BadArgument; a non-empty body sets content-length; timeout 0 = none.
// Tokens are the VM's callout counter (WasmBase::nextHttpCallId: 4, 8, 12, …). The answer arrives
// later on the same thread, at the root context that made the call, with headers (":status"
// included), body and trailers readable only during that callback.
// Failure semantics follow Envoy's async client + router: a connection that cannot be made is a
// *successful* call with the router's 503 local reply, a timeout a 504 "upstream request timeout";
// only a reset after the response started (or a body over the async client's buffer limit) is a
// failure: sizes 0 and proxy_get_status → (11 BrokenConnection, "reset").
// A cluster with an in-process handler (HostOptions.clusterHandlers) gets the call as a function
// call instead of a socket; its answer is delivered the same way, posted to the calling thread.
import http from "node:http";
import { type Pairs, WasmResult } from "./abi/constants.ts";
import type { ClusterHandler } from "./core.ts";
import type { HttpCallResponse, WasmThread } from "./thread.ts";

/** Envoy's default async-client response buffer limit. */
const RESPONSE_LIMIT = 1024 * 1024 * 1024;

function localReply(status: number, text: string): HttpCallResponse {
  return {
    headers: [
      [":status", String(status)],
      ["content-length", String(Buffer.byteLength(text))],
      ["content-type", "text/plain"],
    ],
    body: Buffer.from(text),
    trailers: [],
  };
}

export function startHttpCall(
  t: WasmThread,
  rootId: number,
  cluster: string,
  headers: Pairs,
  body: Uint8Array,
  trailers: Pairs,
  timeoutMs: number,
): { code: number; token?: number } {
  if (timeoutMs < 0) return { code: WasmResult.BadArgument };
  const handler = t.core.clusterHandlers.get(cluster);
  const addr = t.core.clusters.get(cluster)?.pick();
  if (!addr && !handler) return { code: WasmResult.BadArgument };
  const lower: Pairs = headers.map(([k, v]) => [k.toLowerCase(), v]);
  const get = (k: string) => lower.find((e) => e[0] === k)?.[1];
  const method = get(":method");
  const path = get(":path");
  const authority = get(":authority");
  if (path === undefined || method === undefined || authority === undefined)
    return { code: WasmResult.BadArgument };

  const token = t.nextHttpCallId();
  if (handler)
    return callInProcess(t, rootId, token, handler, { headers: lower, path, body, trailers, timeoutMs });
  if (!addr) return { code: WasmResult.BadArgument };
  let settled = false;
  const deliver = (r: HttpCallResponse | null) => {
    if (settled) return;
    settled = true;
    if (timer) clearTimeout(timer);
    t.post(() => t.deliverHttpCallResponse(token, r));
  };
  const outHeaders: Record<string, string> = { host: authority };
  for (const [k, v] of lower) if (!k.startsWith(":")) outHeaders[k] = v;
  if (body.length > 0) outHeaders["content-length"] = String(body.length);
  const req = http.request({
    host: addr.host,
    port: addr.port,
    method,
    path,
    headers: outHeaders,
    agent: false,
  });
  let responseStarted = false;
  req.on("response", (res) => {
    responseStarted = true;
    const chunks: Buffer[] = [];
    let size = 0;
    res.on("data", (c: Buffer) => {
      size += c.length;
      if (size > RESPONSE_LIMIT) {
        res.destroy();
        deliver(null);
      } else chunks.push(c);
    });
    res.on("end", () => {
      const hs: Pairs = [[":status", String(res.statusCode ?? 0)]];
      for (let k = 0; k < res.rawHeaders.length; k += 2) {
        hs.push([(res.rawHeaders[k] as string).toLowerCase(), res.rawHeaders[k + 1] as string]);
      }
      const tr: Pairs = [];
      for (let k = 0; k < res.rawTrailers.length; k += 2) {
        tr.push([(res.rawTrailers[k] as string).toLowerCase(), res.rawTrailers[k + 1] as string]);
      }
      deliver({ headers: hs, body: Buffer.concat(chunks), trailers: tr });
    });
    res.on("error", () => deliver(null));
    res.on("aborted", () => deliver(null));
  });
  req.on("error", (e: NodeJS.ErrnoException) => {
    if (responseStarted) deliver(null);
    else
      deliver(
        localReply(
          503,
          `upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: ${e.code ?? e.message}`,
        ),
      );
  });
  const timer =
    timeoutMs > 0
      ? setTimeout(() => {
          if (settled) return;
          req.destroy();
          deliver(localReply(504, "upstream request timeout"));
        }, timeoutMs)
      : null;
  if (trailers.length > 0) {
    // Trailers need chunked encoding on HTTP/1.1.
    req.setHeader("transfer-encoding", "chunked");
    req.removeHeader("content-length");
    req.write(body);
    req.addTrailers(Object.fromEntries(trailers));
    req.end();
  } else req.end(body);
  t.httpCalls.set(token, {
    rootId,
    path,
    cancel: () => {
      settled = true;
      if (timer) clearTimeout(timer);
      req.destroy();
    },
  });
  return { code: WasmResult.Ok, token };
}

/** The call goes to an in-process handler; its answer is posted to the thread like a socket's. */
function callInProcess(
  t: WasmThread,
  rootId: number,
  token: number,
  handler: ClusterHandler,
  call: { headers: Pairs; path: string; body: Uint8Array; trailers: Pairs; timeoutMs: number },
): { code: number; token: number } {
  let settled = false;
  t.httpCalls.set(token, {
    rootId,
    path: call.path,
    cancel: () => {
      settled = true;
    },
  });
  handler(
    { headers: call.headers, body: call.body.slice(), trailers: call.trailers, timeoutMs: call.timeoutMs },
    (answer) => {
      if (settled) return;
      settled = true;
      t.post(() => t.deliverHttpCallResponse(token, answer));
    },
  );
  return { code: WasmResult.Ok, token };
}
