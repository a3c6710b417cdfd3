// The router after the Wasm filter, with the upstream choice of an ORIGINAL_DST cluster reading
// x-gateway-destination-endpoint (original_dst_lb_config.use_http_header) or, when the header is
// absent, a configured default cluster. Like Envoy's OriginalDstCluster::LoadBalancer
// (requestOverrideHost): the first header of that name counts, and its whole value must be one
// literal IP:port ([v6]:port for IPv6); anything else — a comma-separated list included — counts
// original_dst_host_invalid and selects no host. The header is read when the router sees the
// request headers, i.e. after the filter continued — so whatever the filter wrote is what routes.
// No target → 503 local reply (no_healthy_upstream); connect failure → 503 like Envoy's router
// ("upstream connect error or disconnect/reset before headers…"); a reset after the response
// started resets the downstream stream.
import http from "node:http";
import { isIP } from "node:net";
import type { ClusterAddress } from "./core.ts";
import { HeaderMap } from "./header-map.ts";
import type { HttpStream } from "./stream.ts";
import type { UpstreamCluster } from "./upstream-cluster.ts";

export const DESTINATION_HEADER = "x-gateway-destination-endpoint";

/** Network::Utility::parseInternetAddressAndPortNoThrow(value, v6only=false), or null. */
export function parseDestination(value: string | undefined): ClusterAddress | null {
  if (value === undefined) return null;
  const v6 = /^\[([^\]]+)\]:(\d+)$/.exec(value);
  const m = v6 ?? /^([^:]+):(\d+)$/.exec(value);
  if (!m) return null;
  const host = m[1] as string;
  const port = Number(m[2]);
  if (isIP(host) !== (v6 ? 6 : 4) || port < 1 || port > 65535) return null;
  return { host, port };
}

export interface RouteDecision {
  target: ClusterAddress | null;
  cluster: string;
}

export class UpstreamRouter {
  private req: http.ClientRequest | null = null;
  private aborted = false;
  upstream: string | undefined;

  constructor(
    private readonly stream: () => HttpStream,
    private readonly defaultCluster: { name: string; cluster: UpstreamCluster } | null,
  ) {}

  private onThread(f: () => void): void {
    const s = this.stream();
    s.thread.post(() => {
      if (!s.completed) f();
    });
  }

  requestHeaders(h: HeaderMap, endStream: boolean): void {
    const s = this.stream();
    const dest = h.get(DESTINATION_HEADER);
    let target: ClusterAddress | null;
    let cluster: string;
    if (dest !== undefined) {
      target = parseDestination(dest);
      cluster = "original_dst";
      if (target === null) s.info.originalDstHostInvalid = true;
    } else {
      target = this.defaultCluster?.cluster.pick() ?? null;
      cluster = this.defaultCluster?.name ?? "";
    }
    s.info.clusterName = cluster;
    if (!target) {
      s.thread.post(() => s.localReply(503, Buffer.from("no healthy upstream"), [], "no_healthy_upstream"));
      return;
    }
    const addr = target.host.includes(":")
      ? `[${target.host}]:${target.port}`
      : `${target.host}:${target.port}`;
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
        sendHeaders(true);
        res.resume();
        return;
      }
      sendHeaders(false);
      res.on("data", (c: Buffer) => this.onThread(() => s.encodeData(new Uint8Array(c), false)));
      res.on("end", () => {
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
    if (endStream) req.end();
  }

  requestData(d: Uint8Array, endStream: boolean): void {
    if (!this.req) return;
    if (d.length > 0) this.req.write(d);
    if (endStream) this.req.end();
  }

  requestTrailers(t: HeaderMap): void {
    if (!this.req) return;
    this.req.addTrailers(Object.fromEntries(t.entries));
    this.req.end();
  }

  abort(): void {
    this.aborted = true;
    this.req?.destroy();
  }
}

/** Upstream connections are reused like Envoy's connection pool. */
export const upstreamAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });
