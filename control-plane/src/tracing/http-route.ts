// A span per gateway call handled (GET /v1/sync, POST /v1/report): from the request to the
// answer's end (a long poll's wait included), with the gateway's id and the status. The span is
// the active one while the handler runs, so what it does (a report's filter decisions,
// filter-decisions.ts) hangs below it.
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { RouteHandler } from "../api/http-server.ts";
import { tracingStarted } from "./sdk.ts";
import { tracer } from "./tracer.ts";

export function tracedRoute(name: string, handler: RouteHandler): RouteHandler {
  return (req, res, url) => {
    if (!tracingStarted()) return handler(req, res, url);
    const parent = propagation.extract(ROOT_CONTEXT, req.headers);
    const gateway = req.headers["x-kvroute-gateway"];
    const span = tracer.startSpan(
      name,
      {
        kind: SpanKind.SERVER,
        attributes: {
          "http.request.method": req.method ?? "",
          "url.path": url.pathname,
          ...(typeof gateway === "string" ? { "kvroute.gateway": gateway } : {}),
        },
      },
      parent,
    );
    res.once("close", () => {
      span.setAttribute("http.response.status_code", res.statusCode);
      if (res.statusCode >= 500 || !res.writableFinished) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    return context.with(trace.setSpan(parent, span), () => handler(req, res, url));
  };
}
