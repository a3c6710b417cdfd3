// The OpenAI wire shapes vLLM speaks: request validation for /v1/completions and
// /v1/chat/completions, response bodies, SSE chunks and errors. Pure functions; the HTTP
// server does the I/O. Shapes follow vLLM's protocol models (field names and nulls included),
// e.g. errors are `{"error": {"message", "type", "param", "code"}}` with the HTTP status as code.
import { randomBytes } from "node:crypto";
import type { ChatMessage } from "./chat-template.ts";

export class OpenAIError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string = status === 404 ? "NotFoundError" : "BadRequestError",
    readonly param: string | null = null,
  ) {
    super(message);
  }

  body(): string {
    return JSON.stringify({
      error: { message: this.message, type: this.type, param: this.param, code: this.status },
    });
  }
}

export type Endpoint = "completion" | "chat";

export interface ParsedRequest {
  endpoint: Endpoint;
  model: string;
  /** A string prompt, token ids, or chat messages. */
  prompt:
    | { text: string }
    | { tokens: number[] }
    | { messages: ChatMessage[]; kwargs: Record<string, unknown> };
  maxTokens: number | null;
  stream: boolean;
  includeUsage: boolean;
  continuousUsage: boolean;
  cacheSalt: string | null;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function optInt(body: Record<string, unknown>, name: string, min: number): number | null {
  const v = body[name];
  if (v === undefined || v === null) return null;
  if (typeof v !== "number" || !Number.isInteger(v))
    throw new OpenAIError(400, `${name} must be an integer`, undefined, name);
  if (v < min) throw new OpenAIError(400, `${name} must be at least ${min}, got ${v}.`, undefined, name);
  return v;
}

function messageContent(content: unknown, index: number): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  if (Array.isArray(content)) {
    // vLLM's "string" content format: text parts joined by newlines.
    const parts: string[] = [];
    for (const p of content) {
      if (isObject(p) && p.type === "text" && typeof p.text === "string") parts.push(p.text);
      else
        throw new OpenAIError(
          400,
          `messages[${index}].content: only text parts are supported by the simulator`,
        );
    }
    return parts.join("\n");
  }
  throw new OpenAIError(400, `messages[${index}].content must be a string or a list of parts`);
}

export function parseRequest(endpoint: Endpoint, raw: string): ParsedRequest {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch (err) {
    throw new OpenAIError(400, `Invalid JSON body: ${(err as Error).message}`);
  }
  if (!isObject(body)) throw new OpenAIError(400, "The request body must be a JSON object");
  const model = body.model;
  if (model !== undefined && model !== null && typeof model !== "string")
    throw new OpenAIError(400, "model must be a string");
  const n = optInt(body, "n", 1);
  if (n !== null && n !== 1) throw new OpenAIError(400, "The simulator supports only n=1", undefined, "n");
  const stream = body.stream === true;
  const so = body.stream_options;
  if (so !== undefined && so !== null && !stream) {
    throw new OpenAIError(
      400,
      "Stream options can only be defined when `stream=True`.",
      undefined,
      "stream_options",
    );
  }
  const includeUsage = isObject(so) && so.include_usage === true;
  const continuousUsage = isObject(so) && so.continuous_usage_stats === true;
  const cacheSalt = body.cache_salt;
  if (cacheSalt !== undefined && cacheSalt !== null && (typeof cacheSalt !== "string" || cacheSalt === "")) {
    throw new OpenAIError(
      400,
      "Parameter 'cache_salt' must be a non-empty string if provided.",
      undefined,
      "cache_salt",
    );
  }

  let prompt: ParsedRequest["prompt"];
  let maxTokens: number | null;
  if (endpoint === "completion") {
    maxTokens = optInt(body, "max_tokens", 1);
    let p = body.prompt;
    if (Array.isArray(p) && p.length === 1 && (typeof p[0] === "string" || Array.isArray(p[0]))) p = p[0];
    if (typeof p === "string") prompt = { text: p };
    else if (Array.isArray(p) && p.length > 0 && p.every((t) => Number.isInteger(t) && (t as number) >= 0)) {
      prompt = { tokens: p as number[] };
    } else if (p === undefined) throw new OpenAIError(400, "prompt is required", undefined, "prompt");
    else
      throw new OpenAIError(
        400,
        "prompt must be a string, a list of token ids, or a list with one of those",
        undefined,
        "prompt",
      );
  } else {
    maxTokens = optInt(body, "max_completion_tokens", 1) ?? optInt(body, "max_tokens", 1);
    const msgs = body.messages;
    if (!Array.isArray(msgs) || msgs.length === 0) {
      throw new OpenAIError(400, "messages must be a non-empty list", undefined, "messages");
    }
    const messages: ChatMessage[] = msgs.map((m, i) => {
      if (!isObject(m) || typeof m.role !== "string")
        throw new OpenAIError(400, `messages[${i}] must have a role`);
      return { ...m, role: m.role, content: messageContent(m.content, i) };
    });
    const kwargs = isObject(body.chat_template_kwargs) ? body.chat_template_kwargs : {};
    if (body.add_generation_prompt === false) kwargs.add_generation_prompt = false;
    prompt = { messages, kwargs };
  }
  return {
    endpoint,
    model: typeof model === "string" ? model : "",
    prompt,
    maxTokens,
    stream,
    includeUsage,
    continuousUsage,
    cacheSalt: typeof cacheSalt === "string" ? cacheSalt : null,
  };
}

export interface Usage {
  prompt_tokens: number;
  total_tokens: number;
  completion_tokens: number;
  prompt_tokens_details?: { cached_tokens: number } | null;
}

/**
 * The usage of a finished request. vLLM sets the details only when
 * `--enable-prompt-tokens-details` is on *and* some prompt tokens came from the cache
 * (`if self.enable_prompt_tokens_details and num_cached_tokens:` in its chat and completion
 * serving): 0 cached tokens leave them unset — `null` in a full response, absent from the final
 * stream chunk (written with exclude_none).
 */
export function usageOf(prompt: number, completion: number, cached: number, details: boolean): Usage {
  const u: Usage = {
    prompt_tokens: prompt,
    total_tokens: prompt + completion,
    completion_tokens: completion,
  };
  u.prompt_tokens_details = details && cached > 0 ? { cached_tokens: cached } : null;
  return u;
}

/**
 * The usage of a chunk under `stream_options.continuous_usage_stats`: vLLM builds a fresh
 * UsageInfo from the three counts and writes the chunk with exclude_unset, so no details.
 */
export function continuousUsageOf(u: Usage): Usage {
  return {
    prompt_tokens: u.prompt_tokens,
    total_tokens: u.total_tokens,
    completion_tokens: u.completion_tokens,
  };
}

export function newResponseId(endpoint: Endpoint): string {
  return `${endpoint === "chat" ? "chatcmpl" : "cmpl"}-${randomBytes(16).toString("hex")}`;
}

export interface ResponseMeta {
  id: string;
  created: number;
  model: string;
}

export function fullResponse(
  endpoint: Endpoint,
  meta: ResponseMeta,
  text: string,
  finishReason: string,
  usage: Usage,
): Record<string, unknown> {
  if (endpoint === "completion") {
    return {
      id: meta.id,
      object: "text_completion",
      created: meta.created,
      model: meta.model,
      choices: [
        {
          index: 0,
          text,
          logprobs: null,
          finish_reason: finishReason,
          stop_reason: null,
          prompt_logprobs: null,
        },
      ],
      usage,
      system_fingerprint: null,
      kv_transfer_params: null,
    };
  }
  return {
    id: meta.id,
    object: "chat.completion",
    created: meta.created,
    model: meta.model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: text,
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          tool_calls: [],
          reasoning_content: null,
        },
        logprobs: null,
        finish_reason: finishReason,
        stop_reason: null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage,
    prompt_logprobs: null,
    kv_transfer_params: null,
  };
}

/** One streamed chunk; `delta` null with `role` set is the chat opening chunk. */
export function streamChunk(
  endpoint: Endpoint,
  meta: ResponseMeta,
  delta: string,
  finishReason: string | null,
  opts: { role?: boolean; usage?: Usage | null } = {},
): string {
  const base = {
    id: meta.id,
    object: endpoint === "chat" ? "chat.completion.chunk" : "text_completion",
    created: meta.created,
    model: meta.model,
  };
  const choice =
    endpoint === "chat"
      ? {
          index: 0,
          delta: opts.role ? { role: "assistant", content: "" } : { content: delta },
          logprobs: null,
          finish_reason: finishReason,
          ...(finishReason ? { stop_reason: null } : {}),
        }
      : { index: 0, text: delta, logprobs: null, finish_reason: finishReason, stop_reason: null };
  const out: Record<string, unknown> = { ...base, choices: [choice] };
  if (opts.usage !== undefined) out.usage = opts.usage;
  return `data: ${JSON.stringify(out)}\n\n`;
}

/** The final usage-only chunk sent when `stream_options.include_usage` is true (vLLM writes
 * it with exclude_none, so a disabled `prompt_tokens_details` is absent, not null). */
export function usageChunk(endpoint: Endpoint, meta: ResponseMeta, usage: Usage): string {
  const out = {
    id: meta.id,
    object: endpoint === "chat" ? "chat.completion.chunk" : "text_completion",
    created: meta.created,
    model: meta.model,
    choices: [],
    usage,
  };
  return `data: ${JSON.stringify(out, (_k, v) => (v === null ? undefined : v))}\n\n`;
}

export const DONE = "data: [DONE]\n\n";
