// A body that ends with trailers (HTTP/2 and gRPC-style clients): its last data frame does not
// end the stream, the trailers do. The filter must decide then, over the body it buffered — the
// request leaves with its destination and rank headers, its body whole and once, then the
// trailers. Envoy calls on_request_trailers for it (REFERENCE §5's callback order), as the host does.
import { afterEach, describe, expect, it } from "vitest";
import type { HeaderMap } from "../../host/header-map.ts";
import { headers } from "../../host/host.ts";
import type { FilterChainSink } from "../../host/stream.ts";
import type { WasmThread } from "../../host/thread.ts";
import { chat, ShippedFilter } from "../filter-core/shipped-filter.ts";

let f: ShippedFilter;
afterEach(() => f?.close());

/** What reached the upstream side, in order. */
class Upstream implements FilterChainSink {
  events: string[] = [];
  forwarded: HeaderMap | null = null;
  body = "";
  status = 0;
  requestHeaders(h: HeaderMap): void {
    this.forwarded = h;
    this.events.push("headers");
  }
  requestData(d: Uint8Array): void {
    this.body += Buffer.from(d).toString();
    this.events.push("data");
  }
  requestTrailers(): void {
    this.events.push("trailers");
  }
  abortUpstream(): void {}
  responseHeaders(h: HeaderMap): void {
    if (this.forwarded === null) this.status = Number(h.get(":status") ?? 0);
  }
  responseData(): void {}
  responseTrailers(): void {}
  resetDownstream(): void {}
  done(): void {}
}

const SYSTEM = "You are a careful assistant. ".repeat(40);

function send(body: string, chunks: number, trailers: Array<[string, string]>): Upstream {
  const up = new Upstream();
  const s = f.host.newStream(f.host.threads[0] as WasmThread, up);
  s.decodeHeaders(
    headers([
      [":method", "POST"],
      [":path", "/v1/chat/completions"],
      [":authority", "gw"],
      ["content-type", "application/json"],
    ]),
    false,
  );
  const bytes = new TextEncoder().encode(body);
  const step = Math.ceil(bytes.length / chunks);
  for (let at = 0; at < bytes.length; at += step) s.decodeData(bytes.subarray(at, at + step), false);
  s.decodeTrailers(headers(trailers));
  f.drain();
  return up;
}

describe("a request body ended by trailers", () => {
  it("is routed by its prefix when the trailers arrive, its body forwarded whole, then the trailers", () => {
    f = new ShippedFilter();
    const body = chat(SYSTEM, "which rank?");
    const slot = 2;
    f.hold(body, slot);
    f.publish();
    f.tick();
    const up = send(body, 3, [["x-checksum", "abc"]]);
    expect(up.status).toBe(0);
    expect(up.events).toEqual(["headers", "data", "trailers"]);
    expect(up.body).toBe(body);
    const s = f.slots.all()[slot];
    expect(up.forwarded?.get("x-gateway-destination-endpoint")).toBe(s?.address);
    expect(up.forwarded?.get("x-data-parallel-rank")).toBe(String(s?.headerRank));
    expect(Number(f.host.counter("kvroute.requests.prefix_hit"))).toBe(1);
  });

  it("of a model no pool serves is answered 404 at the trailers, and nothing goes upstream", () => {
    f = new ShippedFilter();
    f.tick();
    const up = send(chat(SYSTEM, "q", "no-such-model"), 2, [["x-checksum", "abc"]]);
    expect(up.status).toBe(404);
    expect(up.events).toEqual([]);
  });
});
