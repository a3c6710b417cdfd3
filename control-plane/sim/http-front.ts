// One vLLM-compatible API server ("front") over a set of simulated engines: the OpenAI routes,
// /health, /metrics, /v1/models and vLLM's /reset_prefix_cache admin route. In internal-LB mode
// one front serves every rank; in hybrid mode the node's local ranks; in external-LB mode there
// is one front per rank. Rank headers index into the front's own list of engines.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type BalancerRule, VllmDpBalancer } from "./balancer.ts";
import { type EngineRequest, RequestRejected, type TokenOutput } from "./engine.ts";
import { METRICS_CONTENT_TYPE, renderMetrics } from "./metrics.ts";
import {
  continuousUsageOf,
  DONE,
  type Endpoint,
  fullResponse,
  newResponseId,
  OpenAIError,
  type ParsedRequest,
  parseRequest,
  type ResponseMeta,
  streamChunk,
  usageChunk,
  usageOf,
} from "./openai.ts";
import { RANK_HEADER, resolveRankHeader } from "./rank-header.ts";
import type { RealtimeEngine } from "./realtime.ts";
import type { SimTokenizer } from "./tokenize.ts";

export const HEADER_SIM_RANK = "x-kvroute-sim-rank";
export const HEADER_SIM_CACHED = "x-kvroute-sim-cached-tokens";

export interface FrontOptions {
  model: string;
  loraNames: readonly string[];
  tokenizer: SimTokenizer;
  /** The engines this front serves, in local-index order. */
  engines: readonly RealtimeEngine[];
  balancerRule: BalancerRule;
  /** Staleness of the balancer's stats in simulated ms (vLLM's coordinator: ~100). */
  statsIntervalMs: number;
  timeScale: number;
  maxModelLen: number;
  promptTokensDetails: boolean;
  maxBodyBytes?: number;
}

/** A request ready for an engine: what both the vLLM front and the Dynamo front submit. */
export interface PreparedRequest {
  parsed: ParsedRequest;
  promptTokens: number[];
  maxTokens: number;
  loraName: string | null;
  /** 1-based position in --lora-modules, as vLLM numbers adapters it loads at startup. */
  loraId: number | null;
}

export function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(new OpenAIError(413, "Request body too large", "RequestEntityTooLarge"));
        req.destroy();
      } else chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

export function sendError(res: ServerResponse, err: OpenAIError, extra: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(err.status, { "content-type": "application/json", ...extra });
  res.end(err.body());
}

/** Body → token ids and limits, with vLLM's checks in vLLM's order (body, model, length). */
export function prepareRequest(
  endpoint: Endpoint,
  raw: string,
  opts: Pick<FrontOptions, "model" | "loraNames" | "tokenizer" | "maxModelLen">,
): PreparedRequest {
  const parsed = parseRequest(endpoint, raw);
  if (parsed.model === "") parsed.model = opts.model;
  const isLora = opts.loraNames.includes(parsed.model);
  if (parsed.model !== opts.model && !isLora) {
    throw new OpenAIError(404, `The model \`${parsed.model}\` does not exist.`, "NotFoundError", "model");
  }
  let promptTokens: number[];
  const p = parsed.prompt;
  try {
    if ("text" in p) promptTokens = opts.tokenizer.encodeCompletion(p.text);
    else if ("tokens" in p) promptTokens = p.tokens;
    else promptTokens = opts.tokenizer.encodeChat(p.messages, { kwargs: p.kwargs });
  } catch (err) {
    if (err instanceof OpenAIError) throw err;
    throw new OpenAIError(400, (err as Error).message);
  }
  // vLLM's defaults: 16 for completions; the rest of the context for chat.
  const maxTokens =
    parsed.maxTokens ?? (endpoint === "completion" ? 16 : opts.maxModelLen - promptTokens.length);
  if (maxTokens < 1 || promptTokens.length + maxTokens > opts.maxModelLen) {
    throw new OpenAIError(
      400,
      `This model's maximum context length is ${opts.maxModelLen} tokens. However, you requested ` +
        `${promptTokens.length + Math.max(maxTokens, 0)} tokens (${promptTokens.length} in the messages, ` +
        `${Math.max(maxTokens, 0)} in the completion). Please reduce the length of the messages or completion.`,
    );
  }
  const loraId = isLora ? opts.loraNames.indexOf(parsed.model) + 1 : null;
  return { parsed, promptTokens, maxTokens, loraName: isLora ? parsed.model : null, loraId };
}

export interface RunHooks {
  /** Extra response headers (e.g. what a Dynamo frontend decided). */
  headers?: Record<string, string>;
  onFinished?: () => void;
}

/**
 * Runs a prepared request on one engine and writes the OpenAI response (JSON or SSE).
 * Headers go out with the first token, when the cached-prefix length is known.
 */
export function runOnEngine(
  res: ServerResponse,
  prepared: PreparedRequest,
  rt: RealtimeEngine,
  opts: { promptTokensDetails: boolean; tokenizer: SimTokenizer; prefilledRemotely?: boolean },
  hooks: RunHooks = {},
): void {
  const { parsed } = prepared;
  const meta: ResponseMeta = {
    id: newResponseId(parsed.endpoint),
    created: Math.floor(Date.now() / 1000),
    model: parsed.model,
  };
  const outIds: number[] = [];
  let sentText = "";
  let engineReq: EngineRequest | null = null;
  let done = false;
  const headers = () => ({
    [HEADER_SIM_RANK]: String(rt.engine.rank),
    [HEADER_SIM_CACHED]: String(Math.max(0, engineReq?.cachedTokens ?? 0)),
    ...hooks.headers,
  });
  const usage = () =>
    usageOf(
      prepared.promptTokens.length,
      outIds.length,
      Math.max(0, engineReq?.cachedTokens ?? 0),
      opts.promptTokensDetails,
    );
  const listener = {
    onToken(out: TokenOutput) {
      outIds.push(out.token);
      if (parsed.stream) {
        if (out.first) {
          res.writeHead(200, {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            ...headers(),
          });
          if (parsed.endpoint === "chat") {
            res.write(
              streamChunk("chat", meta, "", null, {
                role: true,
                usage: parsed.includeUsage && parsed.continuousUsage ? continuousUsageOf(usage()) : undefined,
              }),
            );
          }
        }
        const text = opts.tokenizer.decode(outIds);
        const delta = text.slice(sentText.length);
        sentText = text;
        // vLLM serialises chunks with exclude_unset: `usage` appears only with continuous stats.
        const cont = parsed.includeUsage && parsed.continuousUsage;
        res.write(
          streamChunk(parsed.endpoint, meta, delta, out.finished ? "length" : null, {
            usage: cont ? continuousUsageOf(usage()) : undefined,
          }),
        );
        if (out.finished) {
          if (parsed.includeUsage) res.write(usageChunk(parsed.endpoint, meta, usage()));
          res.end(DONE);
        }
      } else if (out.finished) {
        const body = JSON.stringify(
          fullResponse(parsed.endpoint, meta, opts.tokenizer.decode(outIds), "length", usage()),
        );
        res.writeHead(200, { "content-type": "application/json", ...headers() });
        res.end(body);
      }
      if (out.finished) {
        done = true;
        hooks.onFinished?.();
      }
    },
  };
  try {
    engineReq = rt.submit(
      {
        id: meta.id,
        promptTokens: prepared.promptTokens,
        maxTokens: prepared.maxTokens,
        loraName: prepared.loraName,
        loraId: prepared.loraId,
        cacheSalt: parsed.cacheSalt,
        prefilledRemotely: opts.prefilledRemotely,
      },
      listener,
    );
  } catch (err) {
    hooks.onFinished?.();
    if (!(err instanceof RequestRejected)) throw err;
    sendError(res, new OpenAIError(400, err.message));
    return;
  }
  res.on("close", () => {
    if (!done && engineReq) {
      rt.abort(engineReq);
      hooks.onFinished?.();
    }
  });
}

export class VllmFront {
  readonly server: Server;
  private readonly balancer: VllmDpBalancer;
  private statsTimer: NodeJS.Timeout | null = null;

  constructor(readonly opts: FrontOptions) {
    this.balancer = new VllmDpBalancer(opts.engines.length, opts.balancerRule);
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        sendError(
          res,
          err instanceof OpenAIError ? err : new OpenAIError(500, String(err), "InternalServerError"),
        );
      });
    });
  }

  async listen(port: number, host: string): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        reject(
          err.code === "EADDRINUSE"
            ? new Error(`port ${port} on ${host} is already in use`)
            : new Error(`cannot listen on ${host}:${port}: ${err.message}`),
        );
      };
      this.server.once("error", onError);
      this.server.listen(port, host, () => {
        this.server.off("error", onError);
        resolve();
      });
    });
    const refresh = () => this.balancer.updateStats(this.opts.engines.map((rt) => rt.engine.load()));
    refresh();
    if (this.opts.statsIntervalMs > 0) {
      this.statsTimer = setInterval(refresh, Math.max(1, this.opts.statsIntervalMs * this.opts.timeScale));
      this.statsTimer.unref();
    }
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    if (this.statsTimer) clearInterval(this.statsTimer);
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://sim");
    const route = `${req.method} ${url.pathname}`;
    switch (route) {
      case "GET /health":
        res.writeHead(200).end();
        return;
      case "GET /metrics":
        res.writeHead(200, { "content-type": METRICS_CONTENT_TYPE });
        res.end(
          renderMetrics(
            this.opts.model,
            this.opts.engines.map((rt) => rt.engine),
          ),
        );
        return;
      case "GET /v1/models":
        return this.models(res);
      case "POST /reset_prefix_cache":
        return this.reset(res);
      case "GET /kvroute/sim/cache":
        return this.cacheDump(res, url);
      case "POST /v1/completions":
        return this.generate("completion", req, res);
      case "POST /v1/chat/completions":
        return this.generate("chat", req, res);
      case "POST /v1/completions/render":
        return this.render("completion", req, res);
      case "POST /v1/chat/completions/render":
        return this.render("chat", req, res);
      case "POST /tokenize":
        return this.tokenize(req, res);
      default:
        res
          .writeHead(404, { "content-type": "application/json" })
          .end(JSON.stringify({ detail: "Not Found" }));
    }
  }

  private models(res: ServerResponse): void {
    const created = Math.floor(Date.now() / 1000);
    const card = (id: string, parent: string | null) => ({
      id,
      object: "model",
      created,
      owned_by: "vllm",
      root: id,
      parent,
      max_model_len: this.opts.maxModelLen,
      permission: [],
    });
    const data = [card(this.opts.model, null), ...this.opts.loraNames.map((n) => card(n, this.opts.model))];
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ object: "list", data }));
  }

  private reset(res: ServerResponse): void {
    // vLLM resets every engine behind the server and answers 200 either way (a refusal, while
    // requests hold blocks, is only logged); the extra header makes the outcome observable.
    let ok = true;
    for (const rt of this.opts.engines) {
      ok = rt.engine.resetPrefixCache() && ok;
      rt.flushEvents();
    }
    res.writeHead(200, { "x-kvroute-sim-reset": ok ? "done" : "refused" }).end();
  }

  private cacheDump(res: ServerResponse, url: URL): void {
    // Debug view for tests and demos: the cached block hashes of each engine (as decimal strings).
    const out: Record<string, Array<{ hash: string; parent: string | null; tokens: number[] }>> = {};
    const only = url.searchParams.get("rank");
    for (const rt of this.opts.engines) {
      if (only !== null && String(rt.engine.rank) !== only) continue;
      out[String(rt.engine.rank)] = [...rt.engine.pool.cachedContents()].map(([h, info]) => ({
        hash: h.toString(),
        parent: info.parent === null ? null : info.parent.toString(),
        tokens: info.tokenIds,
      }));
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(out));
  }

  private body(req: IncomingMessage): Promise<string> {
    return readBody(req, this.opts.maxBodyBytes ?? 64 * 1024 * 1024);
  }

  /** vLLM's render routes (what llm-d's token producer calls): the prompt's token ids, no
   * generation. Text-only, so `features` is null. */
  private async render(endpoint: Endpoint, req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A bad request throws an OpenAIError; the server's handler answers it.
    const prepared = prepareRequest(endpoint, await this.body(req), this.opts);
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({ model: prepared.parsed.model, token_ids: prepared.promptTokens, features: null }),
    );
  }

  /** vLLM's /tokenize: `prompt` (with `add_special_tokens`, default true) or chat `messages`. */
  private async tokenize(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await this.body(req);
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw) as Record<string, unknown>;
    } catch (err) {
      return sendError(res, new OpenAIError(400, `Invalid JSON body: ${(err as Error).message}`));
    }
    let tokens: number[];
    if (typeof body.prompt === "string") {
      tokens =
        body.add_special_tokens === false
          ? this.opts.tokenizer.encodeRaw(body.prompt)
          : this.opts.tokenizer.encodeCompletion(body.prompt);
    } else if (Array.isArray(body.messages)) {
      tokens = prepareRequest("chat", JSON.stringify({ ...body, max_tokens: 1 }), this.opts).promptTokens;
    } else return sendError(res, new OpenAIError(400, "Either prompt or messages is required"));
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        count: tokens.length,
        max_model_len: this.opts.maxModelLen,
        tokens,
        token_strs: null,
      }),
    );
  }

  private async generate(endpoint: Endpoint, req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A bad request throws an OpenAIError; the server's handler answers it.
    const prepared = prepareRequest(endpoint, await this.body(req), this.opts);
    const choice = resolveRankHeader(headerValue(req, RANK_HEADER), this.opts.engines.length);
    if (choice.kind === "error") return sendError(res, new OpenAIError(choice.status, choice.message));
    let index: number;
    if (choice.kind === "index") {
      index = choice.index;
      this.balancer.routed(index);
    } else index = this.balancer.pick();
    const rt = this.opts.engines[index] as RealtimeEngine;
    runOnEngine(res, prepared, rt, this.opts, { onFinished: once(() => this.balancer.finished(index)) });
  }
}

/** The first value of a header, as Starlette's `headers.get` (and Rust's `HeaderMap::get`)
 * return it; Node would join repeated headers with ", ". */
export function headerValue(req: IncomingMessage, name: string): string | undefined {
  return req.headersDistinct[name]?.[0];
}

function once(f: () => void): () => void {
  let called = false;
  return () => {
    if (!called) {
      called = true;
      f();
    }
  };
}
