// The router after the Wasm filter: the request's route, policies and host come from a Routing
// (routing.ts: a route table with per-route policy config, override_host and ORIGINAL_DST
// clusters, or the shorthand without one). Like Envoy, whatever the filter wrote is what routes:
// the route is picked when the router sees the request headers, after the filter continued.
// No route → 404 (route_not_found); a policy denial → its local reply; no host → 503
// (no_healthy_upstream); connect failure → 503 like Envoy's router ("upstream connect error or
// disconnect/reset before headers…"); a reset after the response started resets the downstream
// stream. The route's timeout runs from the end of the downstream request to the end of the
// response: 504 "upstream request timeout" before the response started, a reset after
// (Router::Filter::onResponseTimeout).
import http from "node:http";
import { HeaderMap } from "./header-map.ts";
import { addressString } from "./original-dst.ts";
import { DESTINATION_HEADER, type Routing } from "./routing.ts";
import type { HttpStream } from "./stream.ts";

export class UpstreamRouter {
  private req: http.ClientRequest | null = null;
  private aborted = false;
  private timeoutMs = 0;
  private timer: NodeJS.Timeout | undefined;
  private responseStarted = false;
  upstream: string | undefined;
  /** x-gateway-destination-endpoint as the router saw it (after the filter), for the access log. */
  destination: string | undefined;

  constructor(
    private readonly stream: () => HttpStream,
    private readonly routing: Routing,
  ) {}

  /** The downstream request is complete: the route's timeout starts. */
  private startTimeout(): void {
    if (this.timeoutMs <= 0 || this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.aborted = true;
      this.req?.destroy();
      this.onThread(() => {
        const s = this.stream();
        if (this.responseStarted) s.reset("upstream_response_timeout");
        else s.localReply(504, Buffer.from("upstream request timeout"), [], "upstream_response_timeout");
      });
    }, this.timeoutMs);
    this.timer.unref();
  }

  private stopTimeout(): void {
    clearTimeout(this.timer);
  }

  private onThread(f: () => void): void {
    const s = this.stream();
    s.thread.post(() => {
      if (!s.completed) f();
    });
  }

  requestHeaders(h: HeaderMap, endStream: boolean): void {
    const s = this.stream();
    this.destination = h.get(DESTINATION_HEADER);
    const routed = this.routing.resolve(h, s.info.sourceAddress);
    s.info.clusterName = routed.cluster;
    if (routed.route !== null) s.info.routeName = routed.route.name;
    if (routed.choice.originalDstHostInvalid) s.info.originalDstHostInvalid = true;
    const reply = routed.reply;
    if (reply !== undefined) {
      s.thread.post(() => s.localReply(reply.status, Buffer.from(reply.body), [], reply.details));
      return;
    }
    const target = routed.choice.target;
    if (!target) {
      s.thread.post(() => s.localReply(503, Buffer.from("no healthy upstream"), [], "no_healthy_upstream"));
      return;
    }
    this.timeoutMs = routed.timeoutMs;
    const addr = addressString(target);
    this.upstream = addr;
    s.info.upstreamAddress = addr;
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of h.entries) {
      if (k.startsWith(":")) continue;
      const prev = headers[k];
      headers[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
    }
    headers.host = h.get(":authority") ?? addr;
    const req = http.request({
      host: target.host,
      port: target.port,
      method: h.get(":method") ?? "GET",
      path: h.get(":path") ?? "/",
      headers,
      agent: upstreamAgent,
    });
    this.req = req;
    let started = false;
    req.on("response", (res) => {
      started = true;
      this.responseStarted = true;
      const rh = new HeaderMap([[":status", String(res.statusCode ?? 502)]]);
      for (let k = 0; k < res.rawHeaders.length; k += 2) {
        const key = (res.rawHeaders[k] as string).toLowerCase();
        // Hop-by-hop framing is the downstream codec's business, as in Envoy.
        if (key === "connection" || key === "transfer-encoding" || key === "keep-alive") continue;
        rh.add(key, res.rawHeaders[k + 1] as string);
      }
      let headersDone = false;
      const sendHeaders = (eos: boolean) => {
        headersDone = true;
        this.onThread(() => s.encodeHeaders(rh, eos));
      };
      // Like Envoy's codec: headers go on as soon as they arrive; a body-less response ends there.
      if (res.headers["content-length"] === "0" || res.statusCode === 204 || res.statusCode === 304) {
        this.stopTimeout();
        sendHeaders(true);
        res.resume();
        return;
      }
      sendHeaders(false);
      res.on("data", (c: Buffer) => this.onThread(() => s.encodeData(new Uint8Array(c), false)));
      res.on("end", () => {
        this.stopTimeout();
        if (!headersDone) return;
        const tr = new HeaderMap();
        for (let k = 0; k < res.rawTrailers.length; k += 2) {
          tr.add(res.rawTrailers[k] as string, res.rawTrailers[k + 1] as string);
        }
        if (tr.size > 0) this.onThread(() => s.encodeTrailers(tr));
        else this.onThread(() => s.encodeData(new Uint8Array(0), true));
      });
      res.on("aborted", () => this.onThread(() => s.reset("upstream_reset_after_response_started")));
    });
    req.on("error", (e: NodeJS.ErrnoException) => {
      if (this.aborted) return;
      this.stopTimeout();
      if (started) {
        this.onThread(() => s.reset("upstream_reset_after_response_started"));
        return;
      }
      const text = `upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: ${e.code ?? e.message}`;
      this.onThread(() =>
        s.localReply(
          503,
          Buffer.from(text),
          [],
          "upstream_reset_before_response_started{remote_connection_failure}",
        ),
      );
    });
    if (endStream) {
      req.end();
      this.startTimeout();
    }
  }

  requestData(d: Uint8Array, endStream: boolean): void {
    if (!this.req) return;
    if (d.length > 0) this.req.write(d);
    if (endStream) {
      this.req.end();
      this.startTimeout();
    }
  }

  requestTrailers(t: HeaderMap): void {
    if (!this.req) return;
    this.req.addTrailers(Object.fromEntries(t.entries));
    this.req.end();
    this.startTimeout();
  }

  abort(): void {
    this.stopTimeout();
    this.aborted = true;
    this.req?.destroy();
  }
}

/** Upstream connections are reused like Envoy's connection pool. */
export const upstreamAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });
